"""Process-wide recall indexes, one per (database, namespace, scope), kept fresh by counters.

SPEC §1: the ``memories_change`` counter moves on every write by any writer.
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
import ctypes.util
import datetime as dt
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import connections, transaction
from django.utils.dateparse import parse_datetime

from .conf import recall_cache_bytes
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
        if connections[using].vendor != "sqlite":
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
    updated_at: dt.datetime,
    confidence: str,
) -> IndexRecord:
    """An :class:`IndexRecord` from the stored columns."""
    return IndexRecord(
        id=memory_id,
        title=title,
        content=content,
        tags=tuple(json_list(tags_json)),
        keywords=tuple(json_list(keywords_json)),
        updated_at=_timestamp(updated_at),
        explicit=confidence == Confidence.EXPLICIT_USER,
    )


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
        self.stable_blocks = StableBlocks()

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
            entry = self._build(using, namespace, scope, counter)
            with self._lock:
                entry = self._entries.setdefault(key, entry)
                self._entries.move_to_end(key)
                self._evict()
            return entry.index
        with entry.lock:
            if entry.counter != counter:
                self._delta(entry, using, namespace, scope, counter)
        return entry.index

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
        with entry.lock:
            if slice_key not in window.before or entry.counter != window.before[slice_key]:
                return
            for memory in upserted:
                entry.index.add(record_of(memory))
            entry.index.remove_many(removed)
            entry.counter = window.after[slice_key]
            entry.nbytes = entry.index.nbytes

    # ---------------------------------------------------------------- internals
    def _rows(self, using: str, namespace: str, scope: str):
        return Memory.objects.using(using).filter(namespace=namespace, scope=scope)

    def _build(self, using: str, namespace: str, scope: str, counter: int) -> _Entry:
        index = RecallIndex()
        watermark = now()
        index.bulk_load(live_records(using, namespace, scope))
        self.builds += 1
        _release_free_memory()
        return _Entry(index, counter, watermark, index.nbytes)

    def _delta(self, entry: _Entry, using: str, namespace: str, scope: str, counter: int) -> None:
        started = now()
        index = entry.index
        changed = self._rows(using, namespace, scope).filter(
            updated_at__gte=entry.watermark - DELTA_SLACK
        )
        stale: list[str] = []
        for memory_id, updated_at, deleted_at in changed.values_list(
            "id", "updated_at", "deleted_at"
        ):
            if deleted_at is not None:
                index.remove(memory_id)
            elif index.updated_at(memory_id) != _timestamp(updated_at):
                # Rows the slack re-reads but that have not changed since they were
                # indexed (the common case) cost no re-tokenising.
                stale.append(memory_id)
        for record in live_records(using, namespace, scope, ids=stale):
            index.add(record)
        # Hard deletes (erasure) and writers with skewed clocks leave no recent
        # row behind; the live count catches them, and the ids reconcile.
        live = self._rows(using, namespace, scope).live()
        if live.count() != len(index):
            stored = set(live.values_list("id", flat=True))
            if index.remove_many(index.ids() - stored):
                # Rows gone from the table were erased: their tokens leave this
                # process's index now, not at some later compaction.
                index.compact()
            missing = list(stored - index.ids())
            for record in live_records(using, namespace, scope, ids=missing):
                index.add(record)
        entry.counter = counter
        entry.watermark = started
        entry.nbytes = index.nbytes
        self.deltas += 1
        with self._lock:
            self._evict()  # the slice may have grown past the cap

    def _evict(self) -> None:
        cap = recall_cache_bytes()
        total = sum(e.nbytes for e in self._entries.values())
        while total > cap and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            total -= dropped.nbytes


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


def _json_tuple(text: object) -> tuple[str, ...]:
    """A ``*_json`` column as a tuple, as :func:`~memoryapp.models.json_list` reads it."""
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

    Plain SQL on a chunked (server-side on PostgreSQL) cursor: the ORM's per-row
    converters and model machinery cost about as much as tokenising, and a build
    should never hold every row at once. Tag lists repeat across rows, so each
    distinct ``tags_json`` text is parsed once.

    Args:
        using: The database alias.
        namespace: The namespace.
        scope: ``user`` or ``project``.
        ids: Only these ids (None: the whole slice).
    """
    columns = ", ".join(_FIELDS)
    where = "namespace = %s AND scope = %s AND deleted_at IS NULL"
    if ids is None:
        batches: Iterable[list[str]] = [[]]
    else:
        wanted = list(ids)
        batches = [wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK)]
    tags_of: dict[str, tuple[str, ...]] = {}
    connection = connections[using]
    for batch in batches:
        sql, params = f"SELECT {columns} FROM memories WHERE {where}", [namespace, scope]
        if ids is not None:
            sql += " AND id IN (" + ", ".join(["%s"] * len(batch)) + ")"
            params += batch
        with connection.chunked_cursor() as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(_FETCH):
                for memory_id, title, content, tags_json, kw_json, updated, conf in rows:
                    tags = tags_of.get(tags_json)
                    if tags is None:
                        tags = tags_of[tags_json] = _json_tuple(tags_json)
                    yield IndexRecord(
                        id=memory_id,
                        title=title,
                        content=content,
                        tags=tags,
                        keywords=_json_tuple(kw_json),
                        updated_at=_text_timestamp(updated),
                        explicit=conf == _EXPLICIT,
                    )


def _load_malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_MALLOC_TRIM = _load_malloc_trim()


def _release_free_memory() -> None:
    """Hand the heap freed by a build back to the OS (glibc keeps it otherwise).

    A 100,000-row build frees ~100 MB of temporaries that glibc would keep mapped
    for the life of the process.
    """
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


#: The process-wide indexes.
INDEXES = RecallIndexes()
