"""The writes of Agentao's ``MemoryStore`` protocol on this app's rows (docs/agentao.md).

:class:`memoryapp.interop.store.DjangoMemoryStore` (and ``RowStore``, which the
API's store endpoints serve) reads through the querysets and writes through
these functions. They keep that protocol's row semantics, which are not this
app's own write path (:mod:`.memories`): no guard and no classification
(Agentao's manager ran its own before calling the store), the ids, scopes,
keys and ``created_at`` Agentao chose, and Agentao's rules for an upsert (a
memory updated in place; a review item folded into the pending one).

Records are duck-typed: Agentao's dataclasses, or anything with their
attributes (the API passes its validated input as a ``SimpleNamespace``).
Their timestamps arrive already read from Agentao's text by the caller
(``interop.records.parse_iso``, which needs the write's own clock: ``stamp``),
because that is Agentao's format, not this layer's.

Memory writes run in their slices' change window and fold into a cached recall
index (:meth:`~memoryapp.recall.cache.RecallIndexes.apply_own_write`), as every other
memory write does: the counters they read are the ones the triggers move
anyway, so a writer's next recall needs no query. Summaries and review items
are in no recall index: they run in a plain transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.db import IntegrityError, connections, transaction

from memoryapp.db import locks, partitioning, vendor
from memoryapp.fields import now
from memoryapp.models import Memory, ReviewItem, SessionSummary, new_id
from memoryapp.recall.cache import INDEXES, change_window
from memoryapp.rules import validation
from memoryapp.services import memories, summaries
from memoryapp.services.slices import Binding, StoreSlice
from memoryapp.writes import live, review_queue, store

INSERT_ATTEMPTS = 5  # fresh ids drawn before an insert gives up


def _dump(values: Iterable[Any] | None) -> str:
    """A list as Agentao stores it: JSON text, non-ASCII kept as is."""
    return json.dumps(list(values or ()), ensure_ascii=False)


# ----------------------------------------------------------------- inserts
def _insert(row, *, using: str, live_match: Callable[[], Any]) -> Any:
    """Insert ``row``; returns the live row that won a race for its key, else None.

    A savepoint per attempt keeps the transaction usable after an
    ``IntegrityError``. Two causes: a concurrent insert of the same key (the
    partial unique index; the winner is returned, to be updated), or an id
    already taken — Agentao's ids are 8 hex digits chosen per file, so in a
    shared multi-tenant table they collide; a fresh id is drawn.
    """
    model = type(row)
    for _ in range(INSERT_ATTEMPTS):
        try:
            with transaction.atomic(using=using):
                if not _id_free(model, row.pk, using=using):
                    row.pk = new_id()
                    continue
                row.save(using=using, force_insert=True)
            return None
        except IntegrityError:
            winner = live_match()
            if winner is not None:
                return winner
            if not model.objects.using(using).filter(pk=row.pk).exists():
                raise
            row.pk = new_id()
    raise IntegrityError(f"could not find a free id for a new {model._meta.verbose_name}")


def _id_free(model, pk: str, *, using: str) -> bool:
    """False when a row of another namespace has ``pk`` where the primary key cannot tell
    (PostgreSQL's partitioned tables key on namespace and id: ``claim_id`` asks the
    id table); the primary key refuses it everywhere else."""
    if not vendor.of(using).partitions_by_namespace:
        return True
    with connections[using].cursor() as cursor:
        return partitioning.claim_id(cursor, model._meta.db_table, pk)


def new_row_id(wanted: str | None, keep: bool) -> str:
    """The id a new row is inserted with: the writer's own (``keep``), else a fresh one.

    Ids are unique per table across every namespace, so an id already taken —
    by this namespace or by another tenant's row — cannot be kept. A writer
    that keeps its ids therefore learns, from getting a fresh one back, that an
    id exists somewhere. Agentao in-process (``DjangoMemoryStore``, one host's
    own database) keeps its ids; the API's store endpoints, shared by tenants,
    never do (``keep=False``): every inserted row gets a fresh server id, so the
    answer is the same whether the id a client sent was free, its own or another
    tenant's (docs/agentao.md). ``_insert`` still checks even a fresh id.
    """
    return wanted if keep and wanted else new_id()


# ---------------------------------------------------------------- memories
@validation.checked_arguments
def upsert_memory(
    *,
    record,
    created_at: dt.datetime,
    stamp: dt.datetime,
    using: str,
    namespace: str,
    subject: str | None = None,
    actor: str = "",
    keep_id: bool = True,
) -> Memory:
    """Insert ``record``, or update the live row with its (scope, key) in place; the row.

    As Agentao: an update keeps the row's id, scope, key and ``created_at``,
    replaces title, content, tags, keywords, type, source, confidence and
    sensitivity, and moves ``updated_at`` to ``stamp``; an insert keeps the
    record's id (a fresh one when empty or taken) and ``created_at``. ``subject``
    (provenance) is written when given, else left as it is. Logs a ``create``
    or ``update`` event.

    Args:
        record: ``id``, ``scope``, ``key_normalized``, ``type``, ``title``,
            ``content``, ``tags``, ``keywords``, ``source``, ``confidence``,
            ``sensitivity`` are read (``created_at`` is the argument instead).
        created_at: the record's creation time, for an insert.
        stamp: the write's clock (``updated_at``).
        keep_id: False draws a fresh id for an insert whatever the record's
            (see :func:`new_row_id`).
    """
    row = live.Row(
        record.scope, record.key_normalized, record.type, record.title, record.content,
        _dump(record.tags), _dump(record.keywords), record.source, record.confidence,
        json.dumps(
            {"scope": record.scope, "source": record.source, "type": record.type}, sort_keys=True
        ),
        sensitivity=record.sensitivity, created_at=created_at,
    )  # fmt: skip
    with change_window(using, [(namespace, record.scope)], subjects=[subject]) as window:
        written = _upsert_claiming_ids(
            row, new_row_id(record.id, keep_id), using=using, namespace=namespace,
            subject=subject, actor=actor, stamp=stamp,
        )  # fmt: skip
        memory = Memory(
            id=written.id, namespace=namespace, subject=written.subject, scope=row.scope,
            key_normalized=row.key_normalized, type=row.type, title=row.title,
            content=row.content, tags_json=row.tags_json, keywords_json=row.keywords_json,
            source=row.source, confidence=row.confidence, sensitivity=record.sensitivity,
            created_at=store._aware(written.created_at), updated_at=stamp, deleted_at=None,
        )  # fmt: skip
        memory._state.adding, memory._state.db = False, using
    INDEXES.apply_own_write(window, namespace, memory.scope, [memory])
    return memory


def _upsert_claiming_ids(row: live.Row, memory_id: str, *, using: str, **write) -> live.Written:
    """The one write of :mod:`memoryapp.writes.live` for a row whose id the writer chose.

    Agentao's ids are 8 hex digits chosen per file, so in a shared multi-tenant
    table they collide: a taken id (in this namespace, or in another where the
    primary key cannot tell: :func:`_id_free`) gives way to a fresh one.
    """
    with connections[using].cursor() as cursor:
        for _ in range(INSERT_ATTEMPTS):
            if not _id_free(Memory, memory_id, using=using):
                memory_id = new_id()
                continue
            try:
                (written,) = live.upsert_rows(
                    cursor, using=using, rows=[row._replace(id=memory_id)], lock=True, **write
                )
            except live.IdTaken:  # ON CONFLICT DO NOTHING: the transaction is still usable
                memory_id = new_id()
                continue
            return written
    raise IntegrityError("could not find a free id for a new memory")


@validation.checked_arguments
def soft_delete_memory(*, memory_id: str, using: str, namespace: str, actor: str = "") -> bool:
    """Soft-delete one live memory of ``namespace`` (``deleted_at`` and ``updated_at`` set,
    a ``soft_delete`` event); True if it was live there.

    The row's scope is read first, to know which slice's window to open (a
    scope never changes, and a row deleted meanwhile is simply not found).
    """
    scope = (
        Memory.objects.using(using)
        .filter(namespace=namespace, pk=memory_id)
        .live()
        .values_list("scope", flat=True)
        .first()
    )
    if scope is None:
        return False
    removed = memories.soft_delete(
        store_slice=StoreSlice("store protocol", using, namespace, scope),
        ids=[memory_id],
        actor=actor,
    )
    return bool(removed)


@validation.checked_arguments
def clear_memories(*, using: str, namespace: str, scope: str | None = None, actor: str = "") -> int:
    """Soft-delete every live memory of a scope (None or "" = every scope); the count.

    Agentao tests ``if scope:``, so "" means every scope here too. Every scope
    the namespace has live rows in is cleared in one window (one transaction),
    each with ``soft_delete`` events whose reason is ``clear``.
    """
    if scope:
        scopes = [scope]
    else:
        live = Memory.objects.using(using).filter(namespace=namespace).live()
        scopes = sorted(set(live.order_by().values_list("scope", flat=True).distinct()))
    if not scopes:
        return 0
    removed: dict[str, list[str]] = {}
    with change_window(using, [(namespace, s) for s in scopes]) as window:
        for s in scopes:
            removed[s] = store.clear(using, namespace, [s], actor=actor)
    for s, ids in removed.items():
        INDEXES.apply_own_write(window, namespace, s, removed=ids)
    return sum(len(ids) for ids in removed.values())


# ------------------------------------------------------- session summaries
def save_session_summary(
    *,
    record,
    created_at: dt.datetime,
    using: str,
    namespace: str,
    subject: str | None = None,
) -> SessionSummary:
    """Insert a summary as given (its id — a fresh one when empty or taken —, session id,
    counts and ``created_at``); the row.

    Unlike :func:`memoryapp.services.summaries.save` nothing is refused or
    clamped here: Agentao's manager decided what to store.

    Args:
        record: ``id``, ``session_id``, ``summary_text``, ``tokens_before`` and
            ``messages_summarized`` are read.
    """
    row = SessionSummary(
        id=record.id or new_id(),
        session_id=record.session_id,
        summary_text=record.summary_text,
        tokens_before=int(record.tokens_before or 0),
        messages_summarized=int(record.messages_summarized or 0),
        created_at=created_at,
        namespace=namespace,
        subject=subject,
    )
    with transaction.atomic(using=using):
        locks.for_write(using, namespaces=[namespace], subjects=[subject])
        _insert(row, using=using, live_match=lambda: None)
    return row


def clear_session_summaries(*, using: str, namespace: str, session_id: str | None = None) -> int:
    """Hard-delete the summaries of one session (None or "": all) of ``namespace``; the count.

    The facade's own delete (:func:`memoryapp.services.summaries.delete`), with
    Agentao's ``if session_id:`` test. No event: Agentao's store writes none for it.
    """
    return summaries.delete(
        binding=Binding.of(project=namespace, using=using), session_id=session_id or None
    )


# ------------------------------------------------------------ review queue
def upsert_review_item(
    *,
    item,
    created_at: dt.datetime,
    stamp: dt.datetime,
    using: str,
    namespace: str,
    subject: str | None = None,
    keep_id: bool = True,
) -> ReviewItem:
    """Insert a review item, or fold it into the pending one with its (scope, subject, key);
    the row. Unlike Agentao, which folds on (scope, key), another subject's item of the
    key is never folded into (:func:`memoryapp.writes.review_queue.fold`).

    As Agentao: folding adds ``max(item.occurrences, 1)`` to the occurrences
    (saturating at the column's 32-bit bound), replaces type, title, content,
    tags, evidence and source session, raises the confidence to ``inferred``
    from two occurrences on, and moves ``updated_at`` to ``stamp``; id, scope,
    key, ``created_at`` and status are kept. An insert keeps the item's fields
    as given. ``subject`` is written when given. No event (Agentao's manager
    decides items through :meth:`update_review_status`, which logs none either).

    Args:
        item: ``id``, ``scope``, ``type``, ``key_normalized``, ``title``,
            ``content``, ``tags``, ``evidence``, ``source_session``,
            ``occurrences``, ``confidence`` and ``status`` are read.
        keep_id: False draws a fresh id for an insert whatever the item's
            (see :func:`new_row_id`).
    """
    row = ReviewItem(
        id=new_row_id(item.id, keep_id),
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
        created_at=created_at,
        updated_at=stamp,
        namespace=namespace,
        subject=subject,
    )
    with transaction.atomic(using=using):
        locks.for_write(using, namespaces=[namespace], subjects=[subject])
        return review_queue.fold(
            row,
            using=using,
            insert=lambda new, match: _insert(new, using=using, live_match=match),
            saturating=True,
        )


@validation.checked_arguments
def update_review_status(*, item_id: str, status: str, using: str, namespace: str) -> bool:
    """Set the status of an item of ``namespace`` (any transition: Agentao's manager checks
    it was pending); True if the item exists. No event, unlike the queue's own
    decisions (:mod:`memoryapp.services.review`), as Agentao's store logs none."""
    with transaction.atomic(using=using):
        changed = (
            ReviewItem.objects.using(using)
            .filter(namespace=namespace, pk=item_id)
            .update(status=status, updated_at=now())
        )
    return bool(changed)
