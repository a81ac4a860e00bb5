"""The process-wide recall index cache: an LRU bounded in bytes, kept fresh by the slice counters.

docs/behaviour.md §1: the ``memories_change`` counter moves on every write by any writer.
The same triggers keep one counter per (namespace, scope) slice in
``memory_slice_changes``, and an index remembers the value of *its* slice's
counter it is current for. A write in namespace B therefore leaves namespace
A's index untouched (not even a query), and when A's counter has moved (another
process, raw SQL, an erasure), A catches up with a *delta* — the rows of A
updated since its watermark — instead of a rebuild. This manager's own writes
are applied directly: the facade reads the slice counters before and after its
write inside one exclusive transaction (``change_window``), so an index that was
current before the write is current after it.

Indexes are bounded by an LRU with a byte cap (``MEMORYAPP_RECALL_CACHE_BYTES``).
The pieces around the cache have their own modules: :mod:`memoryapp.recall.change_window`
(the counters bracketing a write), :mod:`memoryapp.recall.rows` (rows read as index
records) and :mod:`memoryapp.recall.stable_blocks` (the rendered stable blocks the cache
also holds); their names are re-exported here.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from itertools import chain
from typing import Protocol

from django.db import connections

from memoryapp import conf, metrics
from memoryapp.conf import recall_cache_bytes, recall_snapshots
from memoryapp.db import read_your_writes
from memoryapp.db import snapshots as stored_snapshots
from memoryapp.fields import now
from memoryapp.models import Memory
from memoryapp.recall import rows as index_rows
from memoryapp.recall.change_window import ChangeWindow, change_window
from memoryapp.recall.core import snapshot as recall_snapshot
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.rows import live_records, record_of
from memoryapp.recall.stable_blocks import StableBlocks

__all__ = [
    "DELTA_SLACK",
    "INDEXES",
    "ChangeWindow",
    "RecallIndexes",
    "StableBlocks",
    "change_window",
    "live_records",
    "record_of",
]

# A delta re-reads the rows stamped up to this long before the previous sync
# began: it covers writers whose transaction committed after that moment with
# an older stamp (clock skew between app servers, long transactions).
DELTA_SLACK = dt.timedelta(seconds=5)


@dataclass
class _Entry:
    index: RecallIndex
    counter: int
    watermark: dt.datetime  # when the last build or delta started reading (this clock)
    nbytes: int = 0
    # The bytes of this entry in the LRU's running total; None while not in the LRU.
    counted: int | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Ids this process changed in the index from inside a transaction that had not
    # committed yet: if it rolled back, the next delta must read them again (their
    # rows may be older than the delta's window).
    unsettled: set[str] = field(default_factory=set)
    # Rows changed since the stored snapshot (None: none is stored for this state):
    # past a threshold the snapshot is rewritten, so other processes' catch-up stays short.
    drift: int | None = None


# Past this many unsettled ids an entry is dropped (rebuilt on its next use) rather
# than re-reading them at every delta.
MAX_UNSETTLED = 10_000
# A stored snapshot is rewritten once this many of its rows changed (or a tenth of
# them, whichever is more): a cold loader then replays a short delta.
SNAPSHOT_DRIFT = 64


class ReadSource(Protocol):
    """Where a replica read comes from (:class:`memoryapp.db.replicas.ReplicaStatus`)."""

    alias: str
    current_at: float | None


def _older_than(source: ReadSource, watermark: dt.datetime) -> bool:
    """Whether a replica's state predates what an index read up to ``watermark`` holds.

    A replica whose currency is unknown counts as older: the held index stays.
    """
    if source.current_at is None:
        return True
    return dt.datetime.fromtimestamp(source.current_at, dt.UTC) < watermark


@dataclass(frozen=True)
class _Read:
    """Which database an index is read from: the slice's own, or a replica of it."""

    primary: str
    source: ReadSource | None

    @property
    def alias(self) -> str:
        return self.source.alias if self.source is not None else self.primary

    def watermark(self) -> dt.datetime:
        """What a read now covers: every row committed before it (a replica's: before
        the moment it was known to hold every commit)."""
        started = now()
        if self.source is None or self.source.current_at is None:
            return started
        return min(started, dt.datetime.fromtimestamp(self.source.current_at, dt.UTC))


NOT_READ = object()
"""``RecallIndexes.get``'s ``stored`` default: the caller did not read the snapshot."""


def _model() -> str:
    """The model id of the indexes' vectors ("" with embeddings off): snapshots name it."""
    embedder = conf.embedder()
    return "" if embedder is None else embedder.model_id


def _in_transaction(using: str) -> bool:
    return connections[using].in_atomic_block


class RecallIndexes:
    """The LRU of indexes (and the shared stable blocks); thread-safe."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        # sum(e.nbytes for e in _entries), kept as entries come, go and change size:
        # summing ~600 entries on every insert was a visible share of a cold recall.
        self._bytes = 0
        self.builds = 0  # full builds so far (observability and tests)
        self.deltas = 0  # delta syncs so far
        self.loads = 0  # indexes loaded from a stored snapshot
        self.persists = 0  # snapshots written
        self.stable_blocks = StableBlocks()

    def usage(self) -> tuple[int, int]:
        """How many indexes this process holds, and their bytes (metrics)."""
        with self._lock:
            return len(self._entries), self._bytes

    def clear(self) -> None:
        """Forget every index and shared stable block (tests; after a restore)."""
        with self._lock:
            for entry in self._entries.values():
                entry.counted = None
            self._entries.clear()
            self._bytes = 0
        self.stable_blocks.clear()

    def holds(self, using: str, namespace: str, scope: str) -> bool:
        """Whether this process holds the slice's index now (its place in the LRU unchanged)."""
        with self._lock:
            return (using, namespace, scope) in self._entries

    def get(
        self,
        using: str,
        namespace: str,
        scope: str,
        counter: int,
        stored: stored_snapshots.StoredSnapshot | None | object = NOT_READ,
        source: ReadSource | None = None,
    ) -> RecallIndex:
        """The index of one store slice, current for its slice counter value ``counter``.

        ``stored``: the slice's stored snapshot when the caller read it already, with
        the counter (:func:`memoryapp.db.snapshots.read_with_counters`; None: none is
        stored); by default it is read here when the index is not held.
        ``source``: a read replica of ``using`` that ``counter`` (and ``stored``) came
        from; the rows are read there too. The entry stays keyed by ``using`` and only
        moves forward: a replica behind the held index leaves it as it is.
        """
        key = (using, namespace, scope)
        read = _Read(using, source)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            entry = self._load(read, namespace, scope, counter, stored)
            if entry is None:
                entry = self._build(read, namespace, scope, counter)
            with self._lock:
                entry = self._entries.setdefault(key, entry)
                if entry.counted is None:  # this call's entry went in
                    entry.counted = entry.nbytes
                    self._bytes += entry.nbytes
                self._entries.move_to_end(key)
                self._evict()
        else:
            with entry.lock:
                # A replica behind what this process holds: the held index is newer.
                # Counters are random versions (only "changed" means anything), so
                # age is told by time: the replica holds every commit before
                # ``current_at``, the held index every row before its watermark.
                behind = source is not None and _older_than(source, entry.watermark)
                if entry.counter != counter and not behind:
                    changed = self._delta(entry, read, namespace, scope, counter)
                    if entry.drift is not None:
                        entry.drift += changed
        self._maybe_persist(entry, using, namespace, scope)
        return entry.index

    def discard(self, using: str, namespace: str, scope: str) -> None:
        """Forget one slice's cached index (a stored snapshot stays)."""
        with self._lock:
            self._forget((using, namespace, scope))

    def apply_own_write(
        self,
        window: ChangeWindow,
        namespace: str,
        scope: str,
        upserted: Iterable[Memory] = (),
        removed: Iterable[str] = (),
    ) -> None:
        """Fold this process's own write into a cached index without a query.

        Only when the index was current right before the write (its counter
        equals the slice's ``window.before``); otherwise the next :meth:`get`
        catches up.
        """
        with self._lock:
            entry = self._entries.get((window.using, namespace, scope))
        if entry is None:
            return
        slice_key = (namespace, scope)
        upserted, removed = list(upserted), list(removed)
        with entry.lock:
            if slice_key not in window.before or entry.counter != window.before[slice_key]:
                return
            for memory in upserted:
                entry.index.add(record_of(memory))
            entry.index.remove_many(removed)
            if entry.drift is not None:
                entry.drift += len(upserted) + len(removed)
            entry.counter = window.after[slice_key]
            self._resized(entry, entry.index.nbytes)
            if _in_transaction(window.using):
                # An enclosing transaction may still roll this write back.
                entry.unsettled.update(m.id for m in upserted)
                entry.unsettled.update(removed)
                self._limit_unsettled(window.using, namespace, scope, entry)

    # ---------------------------------------------------------------- internals
    def _rows(self, using: str, namespace: str, scope: str):
        return Memory.objects.using(using).filter(namespace=namespace, scope=scope)

    def _build(self, read: _Read, namespace: str, scope: str, counter: int) -> _Entry:
        index = RecallIndex()
        watermark = read.watermark()
        index.bulk_load(live_records(read.alias, namespace, scope))
        self.builds += 1
        metrics.index_event("build")
        _release_free_memory()
        return _Entry(index, counter, watermark, index.nbytes)

    def _load(
        self, read: _Read, namespace: str, scope: str, counter: int, stored=NOT_READ
    ) -> _Entry | None:
        """The slice's index from its stored snapshot, caught up to ``counter``; None if none."""
        if not recall_snapshots():
            return None
        if stored is NOT_READ:
            stored = stored_snapshots.read(read.alias, namespace, scope)
        if not isinstance(stored, stored_snapshots.StoredSnapshot):
            return None
        try:
            index = recall_snapshot.load(stored.payload, _model())
        except ValueError:
            index = None  # corrupt: rebuilt and rewritten below
        if index is None:  # written under other tokenisation rules
            return None
        watermark = dt.datetime.fromtimestamp(stored.watermark, dt.UTC)
        entry = _Entry(index, stored.counter, watermark, index.nbytes, drift=0)
        self.loads += 1
        metrics.index_event("load")
        if stored.counter != counter:
            entry.drift = self._delta(entry, read, namespace, scope, counter)
        return entry

    def _maybe_persist(self, entry: _Entry, using: str, namespace: str, scope: str) -> None:
        """Store the entry's index when none is stored for it, or the stored one drifted.

        Only outside any transaction and with nothing unsettled: a snapshot holds
        committed rows only. The write is refused if the slice moved meanwhile.
        """
        if not recall_snapshots() or _in_transaction(using) or entry.unsettled:
            return
        with entry.lock:
            index = entry.index
            drift = entry.drift
            if drift is not None and drift < max(SNAPSHOT_DRIFT, len(index) // 10):
                return
            if not len(index) or stored_snapshots.in_memory(using):
                return
            # What the bytes describe, taken before they are cut: the write below is
            # refused if the slice has moved past this counter since.
            counter, watermark, rows = entry.counter, entry.watermark.timestamp(), len(index)
            payload = recall_snapshot.dump(index, _model())
            if payload is None:
                return
            self._resized(entry, index.nbytes)
            # A cache fill, not the caller's write (its reads may stay on a replica).
            with read_your_writes.not_the_callers_write():
                written = stored_snapshots.write_if_current(
                    using,
                    namespace,
                    scope,
                    counter=counter,
                    watermark=watermark,
                    rows=rows,
                    payload=payload,
                )
            if written:
                entry.drift = 0
                self.persists += 1
                metrics.index_event("persist")

    def _delta(self, entry: _Entry, read: _Read, namespace: str, scope: str, counter: int) -> int:
        """Catch the entry up to ``counter``; returns how many of its records changed."""
        started = read.watermark()
        using = read.alias
        index = entry.index
        since = entry.watermark - DELTA_SLACK
        changed: set[str] = set()
        # The rows stamped since the last sync, and any this process touched inside a
        # transaction that may have rolled back; a row read again that matches the
        # indexed one (its fingerprint) costs no re-tokenising.
        rows = index_rows.slice_rows(using, namespace, scope, since=since)
        if entry.unsettled:
            rows = chain(
                rows, index_rows.slice_rows(using, namespace, scope, ids=list(entry.unsettled))
            )
        seen: set[str] = set()
        for record, deleted in rows:
            seen.add(record.id)
            if deleted:
                if index.remove(record.id):
                    changed.add(record.id)
            elif index.fingerprint(record.id) != record.fingerprint:
                index.add(record)
                changed.add(record.id)
        for memory_id in entry.unsettled - seen:  # gone from the table
            if index.remove(memory_id):
                changed.add(memory_id)
        # Hard deletes (erasure) and writers with skewed clocks leave no recent
        # row behind; the live count catches them, and the ids reconcile.
        live = self._rows(using, namespace, scope).live()
        if live.count() != len(index):
            stored = set(live.values_list("id", flat=True))
            gone = index.ids() - stored
            if index.remove_many(gone):
                # Rows gone from the table were erased: their tokens leave this
                # process's index now, not at some later compaction.
                index.compact()
                changed |= gone
            missing = list(stored - index.ids())
            for record in live_records(using, namespace, scope, ids=missing):
                index.add(record)
                changed.add(record.id)
        entry.counter = counter
        entry.watermark = started
        self._resized(entry, index.nbytes)
        using = read.primary
        if _in_transaction(using):
            entry.unsettled |= changed  # read inside a transaction: maybe uncommitted
            self._limit_unsettled(using, namespace, scope, entry)
        else:
            entry.unsettled.clear()  # what this delta read is committed
        self.deltas += 1
        metrics.index_event("delta")
        with self._lock:
            self._evict()  # the slice may have grown past the cap
        return len(changed)

    def _limit_unsettled(self, using: str, namespace: str, scope: str, entry: _Entry) -> None:
        if len(entry.unsettled) > MAX_UNSETTLED:
            with self._lock:
                if self._entries.get((using, namespace, scope)) is entry:
                    self._forget((using, namespace, scope))

    def _resized(self, entry: _Entry, nbytes: int) -> None:
        """Set an entry's size, and the running total if the entry is in the LRU."""
        with self._lock:
            entry.nbytes = nbytes
            if entry.counted is not None:
                self._bytes += nbytes - entry.counted
                entry.counted = nbytes

    def _forget(self, key: tuple[str, str, str]) -> None:
        """Drop one entry from the LRU (caller holds ``self._lock``)."""
        entry = self._entries.pop(key, None)
        if entry is not None and entry.counted is not None:
            self._bytes -= entry.counted
            entry.counted = None

    def _evict(self) -> None:
        """Drop the least recently used entries past the cap, keeping at least one
        (caller holds ``self._lock``)."""
        cap = recall_cache_bytes()
        while self._bytes > cap and len(self._entries) > 1:
            self._forget(next(iter(self._entries)))
            metrics.index_event("evict")


@cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None elsewhere; looked up at the first build.

    Not at import: ``ctypes.util.find_library`` may run ``ldconfig`` in a subprocess.
    """
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def _release_free_memory() -> None:
    """Hand the heap freed by a build back to the OS (glibc keeps it otherwise).

    A 100,000-row build frees ~100 MB of temporaries that glibc would keep mapped
    for the life of the process.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


#: The process-wide indexes.
INDEXES = RecallIndexes()
