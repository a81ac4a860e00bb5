"""Process-wide recall indexes, one per (database, namespace, scope), kept fresh by counters.

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
"""

from __future__ import annotations

import ctypes
import datetime as dt
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from itertools import chain
from typing import Any

from django.db import connections, transaction
from django.utils.dateparse import parse_datetime

from . import metrics, recall_snapshot
from .conf import recall_cache_bytes, recall_snapshots
from .db import snapshots as stored_snapshots
from .db import vendor
from .db.meta import SliceKey, read_change_counter, read_slice_counters
from .fields import now
from .models import Confidence, Memory, json_list
from .recall import IndexRecord, RecallIndex

# A delta re-reads the rows stamped up to this long before the previous sync
# began: it covers writers whose transaction committed after that moment with
# an older stamp (clock skew between app servers, long transactions).
DELTA_SLACK = dt.timedelta(seconds=5)
_FIELDS = ("id", "title", "content", "tags_json", "keywords_json", "updated_at", "confidence")
_FETCH = 2000  # rows per fetch while streaming a build
_IN_CHUNK = 500  # ids per "IN (...)" list, well under every vendor's parameter limit
_EXPLICIT = str(Confidence.EXPLICIT_USER)
_STAMP = Memory._meta.get_field("updated_at")


@dataclass
class ChangeWindow:
    """The slice counters before and after a write made in one exclusive transaction."""

    using: str
    before: dict[SliceKey, int] = field(default_factory=dict)
    after: dict[SliceKey, int] = field(default_factory=dict)


@contextmanager
def change_window(using: str, slices: Iterable[SliceKey]):
    """A transaction that owns the change counters from start to end.

    On PostgreSQL the ``memories_change`` row is locked first (every writer's
    trigger updates it before any slice row, so nobody else can move a counter
    until commit); on SQLite the IMMEDIATE transaction already excludes other
    writers. ``before``/``after`` therefore bracket exactly this transaction's
    changes to ``slices``.
    """
    window = ChangeWindow(using)
    slices = list(slices)
    with transaction.atomic(using=using):
        if vendor.of(using).lock_counter_first:
            read_change_counter(using, lock=True)
        window.before = read_slice_counters(using, slices)
        yield window
        window.after = read_slice_counters(using, slices)


def to_record(
    memory_id: str,
    title: str,
    content: str,
    tags_json: str,
    keywords_json: str,
    updated_at: object,
    confidence: str,
    *,
    tags: tuple[str, ...] | None = None,
) -> IndexRecord:
    """An :class:`IndexRecord` from the stored columns.

    ``updated_at`` is a datetime or a timestamp column's text (see
    :func:`_text_timestamp`); ``tags``, when given, is ``tags_json`` already parsed.
    """
    stamp = _text_timestamp(updated_at)
    return IndexRecord(
        id=memory_id,
        title=title,
        content=content,
        tags=_json_tuple(tags_json) if tags is None else tags,
        keywords=_json_tuple(keywords_json),
        updated_at=stamp,
        explicit=str(confidence) == _EXPLICIT,
        fingerprint=row_fingerprint(title, content, tags_json, keywords_json, confidence, stamp),
    )


def row_fingerprint(
    title: str, content: str, tags_json: str, keywords_json: str, confidence: str, stamp: float
) -> int:
    """What a delta compares to tell a re-read row from the indexed one.

    Every column the index reads, not ``updated_at`` alone: a writer with one-second
    stamps (Agentao) or raw SQL can change a row without moving it. A keyed-free
    BLAKE2b digest rather than ``hash()``: snapshots carry fingerprints from one
    process to another, and ``hash()`` of a string differs between processes.
    Each column is length-prefixed, so no two different rows join to the same text.
    """
    # str(): a TextChoices member's str() is its value, as the column's text is.
    parts = (title, content, tags_json, keywords_json, str(confidence), repr(float(stamp)))
    text = "".join(f"{len(part)}:{part}" for part in parts)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def record_of(memory: Memory) -> IndexRecord:
    """An :class:`IndexRecord` from a model instance."""
    return to_record(
        memory.id,
        memory.title,
        memory.content,
        memory.tags_json,
        memory.keywords_json,
        memory.updated_at,
        memory.confidence,
    )


@dataclass
class _Entry:
    index: RecallIndex
    counter: int
    watermark: dt.datetime  # when the last build or delta started reading (this clock)
    nbytes: int = 0
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


def _in_transaction(using: str) -> bool:
    return connections[using].in_atomic_block


class StableBlocks:
    """A small LRU of rendered stable blocks shared by the managers of one process.

    Keyed by the cross-session tail and the (alias, namespace, scope, counter) of
    every slice a block reads, so a block is reused exactly while none of its rows
    changed: an API request or an agent turn that starts a fresh manager does not
    select and render it again. Values are ``(text, ids)``, about 2 KB each.
    """

    MAX = 256

    def __init__(self) -> None:
        self._blocks: OrderedDict[tuple, tuple[str, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[str, tuple[str, ...]] | None:
        """The block stored under ``key``, or None."""
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
            return found

    def put(self, key: tuple, text: str, ids: Iterable[str]) -> None:
        """Keep one rendered block, dropping the least recently used past :data:`MAX`."""
        with self._lock:
            self._blocks[key] = (text, tuple(ids))
            self._blocks.move_to_end(key)
            while len(self._blocks) > self.MAX:
                self._blocks.popitem(last=False)

    def clear(self) -> None:
        """Forget every block."""
        with self._lock:
            self._blocks.clear()


class RecallIndexes:
    """The LRU of indexes (and the shared stable blocks); thread-safe."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0  # full builds so far (observability and tests)
        self.deltas = 0  # delta syncs so far
        self.loads = 0  # indexes loaded from a stored snapshot
        self.persists = 0  # snapshots written
        self.stable_blocks = StableBlocks()

    def usage(self) -> tuple[int, int]:
        """How many indexes this process holds, and their bytes (metrics)."""
        with self._lock:
            entries = list(self._entries.values())
        return len(entries), sum(e.nbytes for e in entries)

    def clear(self) -> None:
        """Forget every index and shared stable block (tests; after a restore)."""
        with self._lock:
            self._entries.clear()
        self.stable_blocks.clear()

    def get(self, using: str, namespace: str, scope: str, counter: int) -> RecallIndex:
        """The index of one store slice, current for its slice counter value ``counter``."""
        key = (using, namespace, scope)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            entry = self._load(using, namespace, scope, counter)
            if entry is None:
                entry = self._build(using, namespace, scope, counter)
            with self._lock:
                entry = self._entries.setdefault(key, entry)
                self._entries.move_to_end(key)
                self._evict()
        else:
            with entry.lock:
                if entry.counter != counter:
                    changed = self._delta(entry, using, namespace, scope, counter)
                    if entry.drift is not None:
                        entry.drift += changed
        self._maybe_persist(entry, using, namespace, scope)
        return entry.index

    def discard(self, using: str, namespace: str, scope: str) -> None:
        """Forget one slice's cached index (a stored snapshot stays)."""
        with self._lock:
            self._entries.pop((using, namespace, scope), None)

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
            entry.nbytes = entry.index.nbytes
            if _in_transaction(window.using):
                # An enclosing transaction may still roll this write back.
                entry.unsettled.update(m.id for m in upserted)
                entry.unsettled.update(removed)
                self._limit_unsettled(window.using, namespace, scope, entry)

    # ---------------------------------------------------------------- internals
    def _rows(self, using: str, namespace: str, scope: str):
        return Memory.objects.using(using).filter(namespace=namespace, scope=scope)

    def _build(self, using: str, namespace: str, scope: str, counter: int) -> _Entry:
        index = RecallIndex()
        watermark = now()
        index.bulk_load(live_records(using, namespace, scope))
        self.builds += 1
        metrics.index_event("build")
        _release_free_memory()
        return _Entry(index, counter, watermark, index.nbytes)

    def _load(self, using: str, namespace: str, scope: str, counter: int) -> _Entry | None:
        """The slice's index from its stored snapshot, caught up to ``counter``; None if none."""
        if not recall_snapshots():
            return None
        stored = stored_snapshots.read(using, namespace, scope)
        if stored is None:
            return None
        try:
            index = recall_snapshot.load(stored.payload)
        except ValueError:
            index = None  # corrupt: rebuilt and rewritten below
        if index is None:  # written under other tokenisation rules
            return None
        watermark = dt.datetime.fromtimestamp(stored.watermark, dt.UTC)
        entry = _Entry(index, stored.counter, watermark, index.nbytes, drift=0)
        self.loads += 1
        metrics.index_event("load")
        if stored.counter != counter:
            entry.drift = self._delta(entry, using, namespace, scope, counter)
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
            payload = recall_snapshot.dump(index)
            if payload is None:
                return
            entry.nbytes = index.nbytes
            if stored_snapshots.write_if_current(
                using,
                namespace,
                scope,
                counter=counter,
                watermark=watermark,
                rows=rows,
                payload=payload,
            ):
                entry.drift = 0
                self.persists += 1
                metrics.index_event("persist")

    def _delta(self, entry: _Entry, using: str, namespace: str, scope: str, counter: int) -> int:
        """Catch the entry up to ``counter``; returns how many of its records changed."""
        started = now()
        index = entry.index
        since = entry.watermark - DELTA_SLACK
        changed: set[str] = set()
        # The rows stamped since the last sync, and any this process touched inside a
        # transaction that may have rolled back; a row read again that matches the
        # indexed one (its fingerprint) costs no re-tokenising.
        rows = _slice_rows(using, namespace, scope, since=since)
        if entry.unsettled:
            rows = chain(rows, _slice_rows(using, namespace, scope, ids=list(entry.unsettled)))
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
        entry.nbytes = index.nbytes
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
                    del self._entries[(using, namespace, scope)]

    def _evict(self) -> None:
        cap = recall_cache_bytes()
        total = sum(e.nbytes for e in self._entries.values())
        while total > cap and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            total -= dropped.nbytes
            metrics.index_event("evict")


def _timestamp(value: dt.datetime) -> float:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _text_timestamp(value: object) -> float:
    """POSIX seconds of a timestamp column read without Django's converters.

    SQLite hands back text (ours: ISO with ``T``, naive UTC; other writers may add an
    offset or use a space), PostgreSQL an aware ``datetime``.
    """
    if isinstance(value, dt.datetime):
        return _timestamp(value)
    if isinstance(value, str):
        try:
            return _timestamp(dt.datetime.fromisoformat(value))
        except ValueError:
            parsed = parse_datetime(value)
            if parsed is not None:
                return _timestamp(parsed)
    return 0.0


def _json_tuple(text: Any) -> tuple[str, ...]:
    """A ``*_json`` column (text, NULL, or whatever a hand-edited row holds) as a tuple, as
    :func:`~memoryapp.models.json_list` reads it."""
    try:
        value = json.loads(text)  # the hot path: our own writers store lists of strings
    except (TypeError, ValueError):
        return ()
    if type(value) is list:
        try:
            "".join(value)  # a C-speed check that every item is a string
        except TypeError:
            pass
        else:
            return tuple(value)
    return tuple(json_list(text))  # anything else: the model's lenient reading


def live_records(
    using: str, namespace: str, scope: str, ids: Iterable[str] | None = None
) -> Iterator[IndexRecord]:
    """Stream the live rows of one slice (or of ``ids`` within it) as index records.

    Args:
        using: The database alias.
        namespace: The namespace.
        scope: ``user`` or ``project``.
        ids: Only these ids (None: the whole slice).
    """
    for record, _ in _slice_rows(using, namespace, scope, ids=ids, live=True):
        yield record


def _slice_rows(
    using: str,
    namespace: str,
    scope: str,
    *,
    since: dt.datetime | None = None,
    ids: Iterable[str] | None = None,
    live: bool = False,
) -> Iterator[tuple[IndexRecord, bool]]:
    """``(record, soft-deleted?)`` of one slice's rows: all, those updated at or after
    ``since``, or ``ids``; with ``live``, only the live ones.

    Plain SQL on a chunked (server-side on PostgreSQL) cursor: the ORM's per-row
    converters and model machinery cost about as much as tokenising, and a build
    should never hold every row at once. Tag lists repeat across rows, so each
    distinct ``tags_json`` text is parsed once.
    """
    connection = connections[using]
    columns = ", ".join((*_FIELDS, "deleted_at"))
    base = f"SELECT {columns} FROM memories WHERE namespace = %s AND scope = %s"
    if live:
        base += " AND deleted_at IS NULL"
    if ids is not None:
        wanted = list(ids)
        statements = [
            (base + " AND id IN (" + ", ".join(["%s"] * len(chunk)) + ")", chunk)
            for chunk in (wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK))
        ]
    elif since is not None:
        stamp = _STAMP.get_db_prep_value(since, connection)
        statements = [(base + " AND updated_at >= %s", [stamp])]
    else:
        statements = [(base, [])]
    tags_of: dict[str, tuple[str, ...]] = {}
    for sql, extra in statements:
        with connection.chunked_cursor() as cursor:
            cursor.execute(sql, [namespace, scope, *extra])
            while rows := cursor.fetchmany(_FETCH):
                for *row, deleted_at in rows:
                    tags_json = row[3]
                    tags = tags_of.get(tags_json)
                    if tags is None:
                        tags = tags_of[tags_json] = _json_tuple(tags_json)
                    yield to_record(*row, tags=tags), deleted_at is not None


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
