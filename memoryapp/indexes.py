"""Process-wide recall indexes, one per (database, namespace, scope), kept fresh by the counter.

SPEC §1: the ``memories_change`` counter moves on every write by any writer.
An index remembers the counter value it is current for. When the counter has
moved, the index catches up with a *delta* (rows of its own namespace updated
since its watermark) instead of a rebuild, so a write in namespace B costs
namespace A one small query, and a write in A costs A only the changed rows.
This manager's own writes are applied directly: the facade records the counter
before and after its write inside one exclusive transaction (``change_window``),
so an index that was current before the write is current after it.

Indexes are bounded by an LRU with a byte cap (``MEMORYAPP_RECALL_CACHE_BYTES``).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction

from .conf import recall_cache_bytes
from .db.meta import read_change_counter
from .fields import now
from .models import Confidence, Memory, json_list
from .recall import IndexRecord, RecallIndex

# A delta re-reads the rows stamped up to this long before the previous sync
# began: it covers writers whose transaction committed after that moment with
# an older stamp (clock skew between app servers, long transactions).
DELTA_SLACK = dt.timedelta(seconds=5)
_FIELDS = ("id", "title", "content", "tags_json", "keywords_json", "updated_at", "confidence")


@dataclass
class ChangeWindow:
    """The counter before and after a write made in one exclusive transaction."""

    using: str
    before: int = -1
    after: int = -1


@contextmanager
def change_window(using: str):
    """A transaction that owns the change counter from start to end.

    On PostgreSQL the counter row is locked first (every writer's trigger needs
    it, so nobody else can move it until commit); on SQLite the IMMEDIATE
    transaction already excludes other writers. ``before``/``after`` therefore
    bracket exactly this transaction's changes.
    """
    window = ChangeWindow(using)
    with transaction.atomic(using=using):
        window.before = read_change_counter(using, lock=True)
        yield window
        window.after = read_change_counter(using)


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


class RecallIndexes:
    """The LRU of indexes; thread-safe."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0  # full builds so far (observability and tests)
        self.deltas = 0  # delta syncs so far

    def clear(self) -> None:
        """Forget every index (tests; after a restore)."""
        with self._lock:
            self._entries.clear()

    def get(self, using: str, namespace: str, scope: str, counter: int) -> RecallIndex:
        """The index of one store slice, current for ``counter``."""
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
        equals ``window.before``); otherwise the next :meth:`get` catches up.
        """
        with self._lock:
            entry = self._entries.get((window.using, namespace, scope))
        if entry is None:
            return
        with entry.lock:
            if entry.counter != window.before:
                return
            for memory in upserted:
                entry.index.add(record_of(memory))
            for memory_id in removed:
                entry.index.remove(memory_id)
            entry.counter = window.after

    # ---------------------------------------------------------------- internals
    def _rows(self, using: str, namespace: str, scope: str):
        return Memory.objects.using(using).filter(namespace=namespace, scope=scope)

    def _build(self, using: str, namespace: str, scope: str, counter: int) -> _Entry:
        index = RecallIndex()
        watermark = now()
        rows = self._rows(using, namespace, scope).live().values_list(*_FIELDS)
        index.bulk_load(to_record(*row) for row in rows.iterator(chunk_size=5000))
        self.builds += 1
        return _Entry(index, counter, watermark, index.nbytes)

    def _delta(self, entry: _Entry, using: str, namespace: str, scope: str, counter: int) -> None:
        started = now()
        rows = self._rows(using, namespace, scope).filter(
            updated_at__gte=entry.watermark - DELTA_SLACK
        )
        for row in rows.values_list(*_FIELDS, "deleted_at"):
            if row[7] is None:
                entry.index.add(to_record(*row[:7]))
            else:
                entry.index.remove(row[0])
        # Hard deletes (erasure) and writers with skewed clocks leave no recent
        # row behind; the live count catches them, and the ids reconcile.
        live = self._rows(using, namespace, scope).live()
        if live.count() != len(entry.index):
            stored = set(live.values_list("id", flat=True))
            for memory_id in entry.index.ids() - stored:
                entry.index.remove(memory_id)
            missing = stored - entry.index.ids()
            for row in live.filter(id__in=missing).values_list(*_FIELDS):
                entry.index.add(to_record(*row))
        entry.counter = counter
        entry.watermark = started
        entry.nbytes = entry.index.nbytes
        self.deltas += 1

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


#: The process-wide indexes.
INDEXES = RecallIndexes()
