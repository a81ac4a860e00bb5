"""``DjangoMemoryStore``: Agentao's ``MemoryStore`` protocol on this app's models, one namespace.

An Agentao ``MemoryManager`` built on two of these (a project namespace and a
user namespace) keeps its memories, session summaries and review queue in
this app's database — SQLite or PostgreSQL — where the back office, the API
and this app's own ``MemoryManager`` see them live.

Each method does what Agentao's own ``SQLiteMemoryStore`` does (the reference,
read for its behaviour, not copied), restricted to the bound namespace. The
deliberate differences are listed in ``docs/agentao.md``.

``agentao`` is imported lazily (``records.agentao_models``), on the first call
that builds one of its dataclasses: importing this module never needs the
optional extra.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.models import F, QuerySet
from django.db.models.expressions import OrderBy, RawSQL

from .. import store as memory_store
from ..db import partitioning, vendor
from ..db.meta import read_change_counter, read_slice_counters
from ..fields import now
from ..models import Memory, ReviewItem, SessionSummary, new_id
from ..querysets import MemoryQuerySet
from .errors import (
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
from .records import iso, parse_iso, to_record, to_review_item, to_summary

if TYPE_CHECKING:
    from agentao.memory.models import MemoryRecord, MemoryReviewItem, SessionSummaryRecord

_INSERT_ATTEMPTS = 5
_MAX_OCCURRENCES = 2**31 - 1  # memory_review_queue.occurrences is a 32-bit integer


def _dump(values: Iterable[Any] | None) -> str:
    return json.dumps(list(values or ()), ensure_ascii=False)


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
    """

    def __init__(
        self,
        namespace: str = "",
        *,
        using: str | None = None,
        subject: str | None = None,
        actor: str = "agentao",
    ) -> None:
        if not isinstance(namespace, str):
            raise TypeError("namespace must be a string")
        if subject is not None and not isinstance(subject, str):
            raise TypeError("subject must be a string or None")
        self.namespace = namespace
        self.using = using or DEFAULT_DB_ALIAS
        self.subject = subject
        self.actor = actor
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

    def _insert(self, row, live_match: Callable[[], Any]) -> Any:
        """Insert ``row``; returns the live row that won a race for its key, else None.

        A savepoint per attempt keeps the transaction usable after an
        ``IntegrityError``. Two causes: a concurrent insert of the same key
        (the partial unique index; the winner is returned to be updated), or
        an id already taken — Agentao's ids are 8 hex digits chosen per file,
        so in a shared multi-tenant table they collide; a fresh id is drawn.
        """
        model = type(row)
        for _ in range(_INSERT_ATTEMPTS):
            try:
                with transaction.atomic(using=self.using):
                    if not self._id_free(model, row.pk):
                        row.pk = new_id()
                        continue
                    row.save(using=self.using, force_insert=True)
                return None
            except IntegrityError:
                winner = live_match()
                if winner is not None:
                    return winner
                if not model.objects.using(self.using).filter(pk=row.pk).exists():
                    raise
                row.pk = new_id()
        raise IntegrityError(f"could not find a free id for a new {model._meta.verbose_name}")

    def _id_free(self, model, pk: str) -> bool:
        """False when a row of another namespace has ``pk`` where the primary key cannot
        tell (PostgreSQL's partitioned tables key on namespace and id); the primary
        key refuses it everywhere else."""
        if not vendor.of(self.using).partitions_by_namespace:
            return True
        with connections[self.using].cursor() as cursor:
            return partitioning.claim_id(cursor, model._meta.db_table, pk)

    # ------------------------------------------------------- memory CRUD (8)
    @translated
    def upsert_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Insert ``record``, or update the live row with the same (scope, key) in place.

        As Agentao: an update keeps the row's id, scope, key and
        ``created_at``, replaces title, content, tags, keywords, type,
        source, confidence and sensitivity, and moves ``updated_at``; an
        insert keeps the record's id and ``created_at`` (see
        :func:`parse_iso`). Logs a ``create`` or ``update`` event.
        """
        stamp = now()
        fields = {
            "type": record.type,
            "title": record.title,
            "content": record.content,
            "tags_json": _dump(record.tags),
            "keywords_json": _dump(record.keywords),
            "source": record.source,
            "confidence": record.confidence,
            "sensitivity": record.sensitivity,
        }
        if self.subject is not None:
            fields["subject"] = self.subject
        with transaction.atomic(using=self.using):
            live = self._live().filter(scope=record.scope, key_normalized=record.key_normalized)

            def live_match():
                return live.select_for_update().first()

            existing = live_match()
            created = existing is None
            if created:
                row = Memory(
                    id=record.id or new_id(),
                    namespace=self.namespace,
                    scope=record.scope,
                    key_normalized=record.key_normalized,
                    created_at=parse_iso(record.created_at, stamp),
                    updated_at=stamp,
                    **fields,
                )
                existing = self._insert(row, live_match)
                created = existing is None
            if not created:
                for name, value in fields.items():
                    setattr(existing, name, value)
                existing.updated_at = stamp
                existing.save(using=self.using, update_fields=[*fields, "updated_at"])
                row = existing
            memory_store.log_event(
                self.using,
                row.id,
                "create" if created else "update",
                namespace=self.namespace,
                actor=self.actor,
                scope=row.scope,
                type=row.type,
                source=row.source,
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
        deleted = memory_store.soft_delete_ids(
            self.using, self.namespace, [memory_id], actor=self.actor
        )
        return _how_many(deleted) > 0

    @translated
    def clear_memories(self, scope: str | None = None) -> int:
        """Soft-delete every live memory of a scope (None = all); returns the count."""
        with transaction.atomic(using=self.using):
            ids = list(self._live(scope).select_for_update().values_list("id", flat=True))
            deleted = memory_store.soft_delete_ids(
                self.using, self.namespace, ids, actor=self.actor, reason="clear"
            )
        return _how_many(deleted)

    # ---------------------------------------------------- session summaries (3)
    @translated
    def save_session_summary(self, record: SessionSummaryRecord) -> None:
        """Insert a summary as given (its id, session id, counts and ``created_at``)."""
        stamp = now()
        row = SessionSummary(
            id=record.id or new_id(),
            session_id=record.session_id,
            summary_text=record.summary_text,
            tokens_before=int(record.tokens_before or 0),
            messages_summarized=int(record.messages_summarized or 0),
            created_at=parse_iso(record.created_at, stamp),
            namespace=self.namespace,
            subject=self.subject,
        )
        with transaction.atomic(using=self.using):
            self._insert(row, lambda: None)

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
        qs = self._summaries()
        if session_id:
            qs = qs.filter(session_id=session_id)
        with transaction.atomic(using=self.using):
            deleted, _ = qs.delete()
        return deleted

    # ----------------------------------------------------------- review queue (4)
    @translated
    def upsert_review_item(self, item: MemoryReviewItem) -> MemoryReviewItem:
        """Insert a review item, or fold it into the pending one with the same (scope, key).

        As Agentao: folding adds ``max(item.occurrences, 1)`` to the
        occurrences, replaces type, title, content, tags, evidence and
        source session, raises the confidence to ``inferred`` from two
        occurrences on, and moves ``updated_at``; id, scope, key,
        ``created_at`` and status are kept. An insert keeps the item's
        fields as given.
        """
        stamp = now()
        with transaction.atomic(using=self.using):
            pending = self._review().filter(
                scope=item.scope, key_normalized=item.key_normalized, status="pending"
            )

            def pending_match():
                return pending.select_for_update().first()

            existing = pending_match()
            if existing is None:
                row = ReviewItem(
                    id=item.id or new_id(),
                    scope=item.scope,
                    type=item.type,
                    key_normalized=item.key_normalized,
                    title=item.title,
                    content=item.content,
                    tags_json=_dump(item.tags),
                    evidence=item.evidence,
                    source_session=item.source_session,
                    occurrences=item.occurrences,
                    confidence=item.confidence,
                    status=item.status,
                    created_at=parse_iso(item.created_at, stamp),
                    updated_at=stamp,
                    namespace=self.namespace,
                    subject=self.subject,
                )
                match = pending_match if item.status == "pending" else (lambda: None)
                existing = self._insert(row, match)
                if existing is None:
                    return self._review_item(row)
            # Saturates at the column's bound (a 32-bit integer on PostgreSQL).
            occurrences = min(
                int(existing.occurrences) + max(int(item.occurrences or 0), 1), _MAX_OCCURRENCES
            )
            existing.type = item.type
            existing.title = item.title
            existing.content = item.content
            existing.tags_json = _dump(item.tags)
            existing.occurrences = occurrences
            existing.evidence = item.evidence
            existing.confidence = "inferred" if occurrences >= 2 else item.confidence
            existing.source_session = item.source_session
            existing.updated_at = stamp
            changed = [
                "type",
                "title",
                "content",
                "tags_json",
                "occurrences",
                "evidence",
                "confidence",
                "source_session",
                "updated_at",
            ]
            if self.subject is not None:
                existing.subject = self.subject
                changed.append("subject")
            existing.save(using=self.using, update_fields=changed)
        return self._review_item(existing)

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
        with transaction.atomic(using=self.using):
            changed = self._review().filter(pk=item_id).update(status=status, updated_at=now())
        return bool(changed)

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


def _how_many(deleted: Iterable[str] | int) -> int:
    """``store.soft_delete_ids`` answers with the ids it deleted (older versions: a count)."""
    return deleted if isinstance(deleted, int) else len(list(deleted))


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
