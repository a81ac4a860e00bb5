"""``DjangoMemoryStore``: Agentao's ``MemoryStore`` protocol on this app's models, one namespace.

An Agentao ``MemoryManager`` built on two of these (a project namespace and a
user namespace) keeps its memories, session summaries and review queue in
this app's database — SQLite or PostgreSQL — where the back office, the API
and this app's own ``MemoryManager`` see them live.

Each method does what Agentao's own ``SQLiteMemoryStore`` does (the reference,
read for its behaviour, not copied), restricted to the bound namespace. The
deliberate differences are listed in ``docs/agentao.md``. Reads are queries on
the bound namespace, here; every write is delegated to
:mod:`memoryapp.interop.writes` (after reading Agentao's timestamp text),
so this adapter writes no row itself.

``agentao`` is imported lazily (``records.agentao_models``), on the first call
that builds one of its dataclasses: importing this module never needs the
optional extra.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import F, QuerySet
from django.db.models.expressions import OrderBy, RawSQL

from memoryapp.db import vendor
from memoryapp.db.meta import read_change_counter, read_slice_counters
from memoryapp.fields import now
from memoryapp.interop import writes
from memoryapp.interop.errors import (
    StoreDatabaseError,
    StoreDataError,
    StoreIntegrityError,
    StoreInterfaceError,
    StoreInternalError,
    StoreNotSupportedError,
    StoreOperationalError,
    StoreProgrammingError,
    translated,
)
from memoryapp.interop.records import iso, parse_iso, to_record, to_review_item, to_summary
from memoryapp.models import Memory, ReviewItem, SessionSummary
from memoryapp.querysets import MemoryQuerySet

if TYPE_CHECKING:
    from agentao.memory.models import MemoryRecord, MemoryReviewItem, SessionSummaryRecord


def _folded(text: Any) -> str:
    return text.lower() if isinstance(text, str) else str(text).lower()


def _prefilter_safe(needle: str) -> bool:
    """Whether ``icontains`` on the JSON text columns is a superset of the Python check.

    JSON escapes quotes, backslashes, control characters (and, as written by
    Agentao, every non-ASCII character), and SQLite folds case for ASCII only:
    other needles are checked in Python over the namespace's live rows.
    """
    return needle.isascii() and needle.isprintable() and '"' not in needle and "\\" not in needle


# --------------------------------------------------------------------- store
class DjangoMemoryStore:
    """Agentao's ``MemoryStore`` protocol over this app's tables, bound to one namespace.

    Use one per namespace, as Agentao uses one SQLite file per store::

        from agentao.memory import MemoryManager, MemoryRetriever
        from memoryapp.agentao import DjangoMemoryStore

        mm = MemoryManager(
            project_store=DjangoMemoryStore("acme/web"),
            user_store=DjangoMemoryStore("acme/alice"),
        )

    Reads return Agentao's own dataclasses (``MemoryRecord``,
    ``SessionSummaryRecord``, ``MemoryReviewItem``) with Agentao's field
    values: the ids Agentao's manager chose, ISO 8601 timestamps (naive UTC),
    tags and keywords as lists, live rows only where Agentao returns live
    rows. ``change_version()`` is the database's trigger-maintained
    ``memories_change`` counter, so Agentao's ``MemoryRetriever`` sees writes
    made by any process or tool. Database errors are raised as classes that
    are both Django's and ``sqlite3``'s (:class:`StoreDatabaseError` and
    siblings), which Agentao's manager knows how to degrade.

    The store validates nothing: Agentao's manager runs its guard before it
    writes, exactly as with Agentao's SQLite store.

    Args:
        namespace: the owner of every row this store reads and writes
            (``""`` is the single-tenant namespace Agentao's own SQLite
            store shares a file with).
        using: the database alias (default ``"default"``).
        subject: provenance written into new rows' ``subject`` column (the
            user key in whose session they were written; docs/behaviour.md §9), or None.
        actor: recorded on the audit events this store writes.
        keep_ids: insert rows with the record's own id (when free), as Agentao
            does; False draws a fresh id for every insert (the API's store
            endpoints: see :func:`memoryapp.interop.writes.new_row_id`).
    """

    def __init__(
        self,
        namespace: str = "",
        *,
        using: str | None = None,
        subject: str | None = None,
        actor: str = "agentao",
        keep_ids: bool = True,
    ) -> None:
        if not isinstance(namespace, str):
            raise TypeError("namespace must be a string")
        if subject is not None and not isinstance(subject, str):
            raise TypeError("subject must be a string or None")
        self.namespace = namespace
        self.using = using or DEFAULT_DB_ALIAS
        self.subject = subject
        self.actor = actor
        # False: inserts get a server-drawn id (interop.writes.new_row_id), so that a
        # caller sharing the tables with other tenants learns nothing from the id.
        self.keep_ids = keep_ids
        # Read by Agentao's MemoryManager: set when a store stands in for one
        # that could not be opened. A Django store never does that.
        self.fallback_reason: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.namespace!r}, using={self.using!r})"

    # What a read or write answers with: Agentao's dataclasses here; the rows
    # themselves in :class:`RowStore`, which the HTTP API serves.
    _record: Callable[[Memory], Any] = staticmethod(to_record)
    _summary: Callable[[SessionSummary], Any] = staticmethod(to_summary)
    _review_item: Callable[[ReviewItem], Any] = staticmethod(to_review_item)

    # ------------------------------------------------------------ querysets
    def _memories(self) -> MemoryQuerySet:
        return Memory.objects.using(self.using).filter(namespace=self.namespace)

    def _live(self, scope: str | None = None) -> MemoryQuerySet:
        qs = self._memories().live()
        # Agentao tests ``if scope:``, so "" means every scope, like None.
        return qs.filter(scope=scope) if scope else qs

    def _summaries(self) -> QuerySet[SessionSummary]:
        return SessionSummary.objects.using(self.using).filter(namespace=self.namespace)

    def _review(self) -> QuerySet[ReviewItem]:
        return ReviewItem.objects.using(self.using).filter(namespace=self.namespace)

    def _insertion_order(self, qs: QuerySet) -> OrderBy:
        """Equal timestamps keep insertion order (a stable sort), in either direction.

        SQLite's ``rowid`` is the insertion order; PostgreSQL has none, and
        there a tie needs two writes in the same microsecond, so the id decides.
        Agentao's queries have no tie-breaker at all: SQLite's sorter leaves
        ties in an order of its own, usually the table's (rowid) order.
        """
        if vendor.of(self.using).rowid_order:
            table = connections[self.using].ops.quote_name(qs.model._meta.db_table)
            return RawSQL(f"{table}.rowid", ()).asc()
        return F("pk").asc()

    def _oldest_first(self, qs: QuerySet[Memory]) -> QuerySet[Memory]:
        """Memories by ``created_at``; equal stamps by (scope, key), unique among live rows.

        Agentao stamps whole seconds, so its rows tie often. Its queries read
        ``memories`` through the ``uix_memories_scope_key`` index (its own
        file's and ours alike), so its ties come out in (scope, key) order:
        the same tie-break here makes both stores list a shared file alike.
        """
        return qs.order_by("created_at", "scope", "key_normalized", "pk")

    def _newest_first(self, qs: QuerySet, field: str = "created_at") -> QuerySet:
        return qs.order_by(F(field).desc(), self._insertion_order(qs))

    # ------------------------------------------------------- memory CRUD (8)
    @translated
    def upsert_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Insert ``record``, or update the live row with the same (scope, key) in place.

        As Agentao: an update keeps the row's id, scope, key and
        ``created_at``, replaces title, content, tags, keywords, type,
        source, confidence and sensitivity, and moves ``updated_at``; an
        insert keeps the record's id and ``created_at`` (see
        :func:`parse_iso`). Logs a ``create`` or ``update`` event. The write is
        :func:`memoryapp.interop.writes.upsert_memory`'s.
        """
        stamp = now()
        row = writes.upsert_memory(
            record=record,
            created_at=parse_iso(record.created_at, stamp),
            stamp=stamp,
            using=self.using,
            namespace=self.namespace,
            subject=self.subject,
            actor=self.actor,
            keep_id=self.keep_ids,
        )
        return self._record(row)

    @translated
    def get_memory_by_id(self, memory_id: str) -> MemoryRecord | None:
        """The live memory with this id in this namespace, else None."""
        row = self._live().filter(pk=memory_id).first()
        return self._record(row) if row is not None else None

    @translated
    def get_memory_by_scope_key(self, scope: str, key_normalized: str) -> MemoryRecord | None:
        """The live memory with this (scope, key), else None."""
        row = self._live().filter(scope=scope, key_normalized=key_normalized).first()
        return self._record(row) if row is not None else None

    @translated
    def list_memories(self, scope: str | None = None) -> list[MemoryRecord]:
        """Live memories of a scope (None = all), oldest ``created_at`` first."""
        return [self._record(r) for r in self._oldest_first(self._live(scope))]

    @translated
    def search_memories(self, query: str, scope: str | None = None) -> list[MemoryRecord]:
        """Case-insensitive substring of title, content, key, a tag or a keyword.

        The query is taken literally (Agentao's ``LIKE`` treats ``%`` and
        ``_`` as wildcards) and case is folded for every script (SQLite's
        ``LOWER`` folds ASCII only). Like Agentao, the query is not stripped:
        an empty query matches every live row.
        """
        if query is None:
            return []
        needle = _folded(query)
        qs = self._live(scope)
        if _prefilter_safe(needle):
            qs = qs.search_prefilter(needle)
        rows = [r for r in self._oldest_first(qs) if _search_hit(r, needle)]
        return [self._record(r) for r in rows]

    @translated
    def filter_by_tag(self, tag: str, scope: str | None = None) -> list[MemoryRecord]:
        """Live memories carrying ``tag`` exactly, compared case-insensitively."""
        if tag is None:
            return []
        wanted = _folded(tag)
        qs = self._live(scope)
        if _prefilter_safe(wanted):
            qs = qs.tagged_prefilter(wanted)
        rows = [r for r in self._oldest_first(qs) if any(_folded(t) == wanted for t in r.tags)]
        return [self._record(r) for r in rows]

    @translated
    def soft_delete_memory(self, memory_id: str) -> bool:
        """Soft-delete one live memory (``deleted_at`` and ``updated_at`` set); True if found."""
        return writes.soft_delete_memory(
            memory_id=memory_id, using=self.using, namespace=self.namespace, actor=self.actor
        )

    @translated
    def clear_memories(self, scope: str | None = None) -> int:
        """Soft-delete every live memory of a scope (None = all); returns the count."""
        return writes.clear_memories(
            using=self.using, namespace=self.namespace, scope=scope, actor=self.actor
        )

    # ---------------------------------------------------- session summaries (3)
    @translated
    def save_session_summary(self, record: SessionSummaryRecord) -> None:
        """Insert a summary as given (its id, session id, counts and ``created_at``)."""
        writes.save_session_summary(
            record=record,
            created_at=parse_iso(record.created_at, now()),
            using=self.using,
            namespace=self.namespace,
            subject=self.subject,
        )

    @translated
    def list_session_summaries(
        self, session_id: str | None = None, limit: int = 20
    ) -> list[SessionSummaryRecord]:
        """Summaries (of one session, or all), newest first, at most ``limit``.

        As SQLite's ``LIMIT``: a negative or None limit returns them all.
        """
        qs = self._summaries()
        if session_id:
            qs = qs.filter(session_id=session_id)
        qs = self._newest_first(qs)
        if limit is not None and int(limit) >= 0:
            qs = qs[: int(limit)]
        return [self._summary(r) for r in qs]

    @translated
    def clear_session_summaries(self, session_id: str | None = None) -> int:
        """Hard-delete the summaries of one session (or, with None, all); returns the count."""
        return writes.clear_session_summaries(
            using=self.using, namespace=self.namespace, session_id=session_id
        )

    # ----------------------------------------------------------- review queue (4)
    @translated
    def upsert_review_item(self, item: MemoryReviewItem) -> MemoryReviewItem:
        """Insert a review item, or fold it into the pending one with the same (scope, key).

        As Agentao: folding adds ``max(item.occurrences, 1)`` to the
        occurrences, replaces type, title, content, tags, evidence and
        source session, raises the confidence to ``inferred`` from two
        occurrences on, and moves ``updated_at``; id, scope, key,
        ``created_at`` and status are kept. An insert keeps the item's
        fields as given. The write is
        :func:`memoryapp.interop.writes.upsert_review_item`'s.
        """
        stamp = now()
        row = writes.upsert_review_item(
            item=item,
            created_at=parse_iso(item.created_at, stamp),
            stamp=stamp,
            using=self.using,
            namespace=self.namespace,
            subject=self.subject,
            keep_id=self.keep_ids,
        )
        return self._review_item(row)

    @translated
    def get_review_item(self, item_id: str) -> MemoryReviewItem | None:
        """The review item with this id (any status), else None."""
        row = self._review().filter(pk=item_id).first()
        return self._review_item(row) if row is not None else None

    @translated
    def list_review_items(
        self, status: str | None = "pending", limit: int = 50
    ) -> list[MemoryReviewItem]:
        """Items of a status — most occurrences first, then newest — or (None) all, newest first."""
        qs = self._review()
        if status:
            qs = qs.filter(status=status).order_by(
                F("occurrences").desc(), F("created_at").desc(), self._insertion_order(qs)
            )
        else:
            qs = self._newest_first(qs)
        if limit is not None and int(limit) >= 0:
            qs = qs[: int(limit)]
        return [self._review_item(r) for r in qs]

    @translated
    def update_review_status(self, item_id: str, status: str) -> bool:
        """Set an item's status (any transition; the manager checks it was pending)."""
        return writes.update_review_status(
            item_id=item_id, status=status, using=self.using, namespace=self.namespace
        )

    # --------------------------------------------------------------- optional
    @translated
    def change_version(self) -> int:
        """``schema_meta.memories_change``: advances on every write to ``memories``, by anyone.

        The counter is per database, not per namespace: a write in another
        namespace moves it too, which only costs Agentao's retriever a rebuild.
        """
        return read_change_counter(self.using)

    def close(self) -> None:
        """Release this thread's connection unless a transaction is open on it.

        Django owns connections (one per thread and alias) and reopens them on
        the next query, so this is safe to call more than once; Agentao's
        manager calls it on shutdown.
        """
        connection = connections[self.using]
        if not connection.in_atomic_block:
            connection.close()


class RowStore(DjangoMemoryStore):
    """A :class:`DjangoMemoryStore` that answers with this app's rows, not Agentao's dataclasses.

    The HTTP API's store endpoints (docs/agentao.md, "Over HTTP") run the
    protocol's semantics through it and serialise the rows like every other
    endpoint, so the server never needs ``agentao`` installed.
    """

    @staticmethod
    def _record(row: Memory) -> Memory:
        return row

    @staticmethod
    def _summary(row: SessionSummary) -> SessionSummary:
        return row

    @staticmethod
    def _review_item(row: ReviewItem) -> ReviewItem:
        return row

    @translated
    def slice_fingerprint(self) -> int:
        """A number that changes whenever a memory of this namespace changes, by anyone.

        Built from the namespace's two slice counters (``memory_slice_changes``,
        random values set by triggers), so writes in other namespaces leave it
        alone — unlike :meth:`change_version`, which is per database. It is
        compared for equality only (Agentao's retriever does no more).
        """
        slices = [(self.namespace, scope) for scope in ("project", "user")]
        counters = read_slice_counters(self.using, slices)
        text = ",".join(str(counters[pair]) for pair in slices)
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=7).digest(), "big")


def _search_hit(row: Memory, needle: str) -> bool:
    if needle in row.title.lower() or needle in row.content.lower():
        return True
    if needle in row.key_normalized.lower():
        return True
    return any(needle in _folded(t) for t in row.tags) or any(
        needle in _folded(k) for k in row.keywords
    )


__all__ = [
    "DjangoMemoryStore",
    "RowStore",
    "StoreDatabaseError",
    "StoreDataError",
    "StoreIntegrityError",
    "StoreInterfaceError",
    "StoreInternalError",
    "StoreNotSupportedError",
    "StoreOperationalError",
    "StoreProgrammingError",
    "iso",
    "parse_iso",
]
