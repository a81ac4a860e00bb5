"""Export (GDPR access and portability): everything stored about a subject or a namespace."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db.models import Q, QuerySet

from memoryapp import conf
from memoryapp.compliance import engine
from memoryapp.compliance.desk_scope import tenant_of_target
from memoryapp.compliance.receipts import as_dict, key_id, keyed_hmac, safe_actor
from memoryapp.compliance.selection import (
    MEMORIES,
    REVIEW,
    SUMMARIES,
    RowModel,
    Target,
    authored_filter,
    batches,
    contributed_filter,
    row_filter,
)
from memoryapp.compliance.targets import ErasureRequestError, build_target
from memoryapp.db import replicas
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
    ErasureTarget,
    ExportRecord,
    ExportVia,
    Memory,
    MemoryEvent,
    ReviewItem,
    SessionSummary,
)
from memoryapp.rules.validation import check_actor

FORMAT = "memoryapp-export/1"
CHUNK = 1000

Progress = Callable[[int, int], None]


def _iso(value) -> str | None:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def memory_as_dict(m: Memory) -> dict:
    """A memory as an export document lists it (soft-deleted ones included)."""
    return {
        "id": m.id,
        "namespace": m.namespace,
        "subject": m.subject,
        "scope": m.scope,
        "type": m.type,
        "key_normalized": m.key_normalized,
        "title": m.title,
        "content": m.content,
        "tags": m.tags,
        "keywords": m.keywords,
        "source": m.source,
        "confidence": m.confidence,
        "sensitivity": m.sensitivity,
        "created_at": _iso(m.created_at),
        "updated_at": _iso(m.updated_at),
        "deleted_at": _iso(m.deleted_at),
        "state": "live" if m.deleted_at is None else "soft-deleted",
    }


def _summary(s: SessionSummary) -> dict:
    return {
        "id": s.id,
        "namespace": s.namespace,
        "subject": s.subject,
        "session_id": s.session_id,
        "summary_text": s.summary_text,
        "tokens_before": s.tokens_before,
        "messages_summarized": s.messages_summarized,
        "created_at": _iso(s.created_at),
    }


def _review(i: ReviewItem) -> dict:
    return {
        "id": i.id,
        "namespace": i.namespace,
        "subject": i.subject,
        "scope": i.scope,
        "type": i.type,
        "key_normalized": i.key_normalized,
        "title": i.title,
        "content": i.content,
        "tags": i.tags,
        "evidence": i.evidence,
        "source_session": i.source_session,
        "occurrences": i.occurrences,
        "confidence": i.confidence,
        "status": i.status,
        "created_at": _iso(i.created_at),
        "updated_at": _iso(i.updated_at),
    }


def event_as_dict(e: MemoryEvent) -> dict:
    """An audit event as an export document lists it."""
    try:
        detail = json.loads(e.detail) if e.detail else None
    except ValueError:
        detail = e.detail
    return {
        "id": e.id,
        "memory_id": e.memory_id,
        "event_type": e.event_type,
        "timestamp": _iso(e.timestamp),
        "namespace": e.namespace,
        "actor": e.actor,
        "detail": detail,
    }


#: What an export leaves out, and why: derived data recomputed from what it does list.
OMITTED = {
    "memory_embeddings": (
        "left out: derived data. The semantic recall ranking's vectors are computed from "
        "each memory's title and content (listed here) by a model, stored with the row "
        "and erased with it."
    ),
}


def retention_statement() -> dict:
    """The retention rules in force, for export documents and the docs."""
    return {
        "live_memories": "kept until deleted by the user, an operator or an erasure",
        "soft_deleted_memories_days": conf.retention_deleted_memories_days(),
        "decided_review_items_days": conf.retention_review_items_days(),
        "pending_review_items": "kept until approved, rejected or purged",
        "session_summaries_days": conf.retention_session_summaries_days(),
        "events": "kept while the memory they describe exists; erased with it",
        "erasure_receipts": "kept as proof of erasure; they hold no erased content",
        "note": (
            "A number is the days after deletion or decision at which 'manage.py memory "
            "purge-expired' erases the row for good; null means no time limit."
        ),
    }


def export(
    *,
    subject: str | None = None,
    namespace: str | None = None,
    using: str | Sequence[str] | None = None,
    progress: Progress | None = None,
    within: Iterable[str] | None = None,
    grants: Iterable[tuple[str, bool]] | None = None,
    receipts: Iterable[str] | None = None,
    actor: str = "",
    via: str = ExportVia.PYTHON,
    request_id: str = "",
    user=None,
) -> dict:
    """Everything stored about a subject or a namespace, as one JSON-serialisable document.

    By subject: the memories an erasure of that subject would remove (live and
    soft-deleted), the project-scope memories it authored (listed separately:
    they are kept by an erasure unless asked), those it contributed to through an
    approved review item and does not own alone, its session summaries and
    review items, the events of all of those, and the receipts of erasures
    that named it. By namespace: every row of the namespace. With both, the
    subject's rows within that namespace. The document also states the
    purposes and retention rules.

    Args:
        subject: a user key.
        namespace: a namespace.
        using: database alias(es), as for :func:`~memoryapp.compliance.erase`.
        progress: called as ``progress(done, total)`` while rows are read.
        within: only rows of these namespaces (an API client's export of a
            subject: the namespaces its grants allow). The document then says
            ``"limited_to_grants": true``, whether or not rows exist elsewhere.
        grants: only rows of the namespaces these ``(namespace, is_prefix)``
            pairs cover (an API client's export of a subject: its grants, read
            as the rows are); the document says ``"limited_to_grants": true`` too.
        receipts: only receipts with these ids (an iterable, or a ``values()``
            queryset of one column), beside those of an erasure restricted to
            ``namespace``: a client sees the receipts of its own erasures, never
            another tenant's. None lists every matching receipt (an operator).
        actor: who exports (a user name, ``api:<user>``…), for the audit record.
        via: the interface (:class:`~memoryapp.models.ExportVia`), for the record.
        request_id: the subject request the export answers, if any.
        user: the account that asked (an API client), recorded as the record's
            ``user``: it, not the actor's name, decides whose records a client
            reads back, so a later account reusing the name inherits none.

    Every export writes an :class:`~memoryapp.models.ExportRecord` (the keyed
    HMACs of the subject and namespace, the counts, the actor — no subject key,
    no exported text) before the document is returned: an export that could not
    be recorded is not handed out (the error propagates).

    Raises:
        ErasureRequestError: neither subject nor namespace given.
    """
    actor = check_actor(actor)  # refused before anything runs: MemoryValidationError
    if subject is None and namespace is None:
        raise ErasureRequestError("export needs a subject or a namespace")
    target = build_target(subject=subject, namespace=namespace, within=within, grants=grants)
    aliases = engine.aliases_for(using)
    # A replica that dies while the rows are read: they are read again on the primary.
    rows = replicas.read_with_fallback(lambda: _read_rows(aliases, target, progress))
    events = _events(aliases, target, rows)
    if progress is not None:
        read = sum(len(part) for part in rows.values())
        progress(read, read)
    found_receipts = _receipts(aliases[0], subject, namespace, receipts)
    query = {k: v for k, v in (("subject", subject), ("namespace", namespace)) if v is not None}
    scoped = target.within is not None or target.grants is not None
    limited = {"limited_to_grants": True} if scoped else {}
    document = {
        "format": FORMAT,
        "generated_at": now().isoformat(),
        "query": query,
        **limited,
        "purposes": conf.export_purposes(),
        "retention": retention_statement(),
        "omitted": OMITTED,
        "counts": {
            "memories": len(rows[MEMORIES]),
            "project_memories_authored": len(rows["authored"]),
            "project_memories_contributed": len(rows["contributed"]),
            "session_summaries": len(rows[SUMMARIES]),
            "review_items": len(rows[REVIEW]),
            "events": len(events),
            "erasure_receipts": len(found_receipts),
        },
        "memories": rows[MEMORIES],
        "project_memories_authored": rows["authored"],
        "project_memories_contributed": rows["contributed"],
        "session_summaries": rows[SUMMARIES],
        "review_items": rows[REVIEW],
        "events": events,
        "erasure_receipts": found_receipts,
    }
    record_export(
        document,
        subject=subject,
        namespace=namespace,
        actor=actor,
        via=via,
        request_id=request_id,
        using=aliases[0],
        user=user,
    )
    return document


def _read_rows(aliases, target: Target, progress) -> dict[str, list[dict]]:
    """The document's rows, by section, read where :func:`replicas.lag_tolerant_alias` says."""
    # The rows of an export tolerate lag: a read replica may serve them (never after the
    # caller's own write it has not replayed); the record and receipts use the primary.
    readers = {alias: replicas.lag_tolerant_alias(alias) for alias in aliases}
    plan = [(part, readers[a], model, q) for part, a, model, q in _plan(aliases, target)]
    total = sum(model.objects.using(a).filter(q).count() for _, a, model, q in plan)
    done = 0
    rows: dict[str, list[dict]] = {
        MEMORIES: [], "authored": [], "contributed": [], SUMMARIES: [], REVIEW: []
    }  # fmt: skip
    shape: dict[str, Callable[[Any], dict]] = {
        MEMORIES: memory_as_dict,
        "authored": memory_as_dict,
        "contributed": memory_as_dict,
        SUMMARIES: _summary,
        REVIEW: _review,
    }
    for part, alias, model, q in plan:
        qs = model.objects.using(alias).filter(q).order_by("created_at", "id")
        for obj in qs.iterator(chunk_size=CHUNK):
            rows[part].append(shape[part](obj))
            done += 1
            if progress is not None and done % CHUNK == 0:
                progress(done, total)
    return rows


def _plan(aliases: Sequence[str], target: Target) -> list[tuple[str, str, RowModel, Q]]:
    """The document's sections: ``(section, alias, model, filter)``, those that apply."""
    plan: list[tuple[str, str, RowModel, Q | None]] = []
    for alias in aliases:
        plan.append((MEMORIES, alias, Memory, row_filter(MEMORIES, target)))
        plan.append(("authored", alias, Memory, authored_filter(target)))
        plan.append(("contributed", alias, Memory, contributed_filter(target)))
        plan.append((SUMMARIES, alias, SessionSummary, row_filter(SUMMARIES, target)))
        plan.append((REVIEW, alias, ReviewItem, row_filter(REVIEW, target)))
    return [(part, alias, model, q) for part, alias, model, q in plan if q is not None]


def record_export(
    document: dict,
    *,
    subject: str | None,
    namespace: str | None,
    actor: str,
    via: str,
    request_id: str = "",
    using: str = "default",
    user=None,
) -> ExportRecord:
    """Write the audit record of an export document (no subject key, no exported text).

    The actor is stored as erasure receipts store it (:func:`~.receipts.safe_actor`):
    a self-service export whose actor names the subject has it replaced.
    """
    kind = "+".join(k for k, v in (("subject", subject), ("namespace", namespace)) if v is not None)
    return ExportRecord.objects.using(using).create(
        actor=safe_actor(actor, subject),
        via=via,
        target_kind=kind,
        subject_hmac=keyed_hmac(subject) if subject is not None else None,
        namespace_hmac=keyed_hmac(namespace) if namespace is not None else None,
        key_id=key_id(),
        limited_to_grants=bool(document.get("limited_to_grants")),
        tenant=tenant_of_target(subject, namespace),
        counts=dict(document.get("counts") or {}),
        request_id=str(request_id or "")[:64],
        user=user,
    )


def export_memories(*, rows: Sequence[Memory], using: str) -> dict:
    """These memories and their audit events, as one JSON-serialisable document.

    The admin's "Export selected memories": the same format and row shapes as
    :func:`export`, for an operator's selection (``rows``, in the order given;
    ``using``: the events' database) rather than a subject or a namespace.
    Events are read in batches — one ``IN`` list for a whole "Select all" would
    pass SQLite's limit of 32,766 bound variables — and listed oldest first.
    """
    wanted = [m.pk for m in rows]
    events = MemoryEvent.objects.using(using)
    found = sorted(
        (e for batch in batches(wanted) for e in events.filter(memory_id__in=batch)),
        key=lambda e: e.id,
    )
    return {
        "format": FORMAT,
        "generated_at": now().isoformat(),
        "query": {"ids": wanted},
        "omitted": OMITTED,
        "counts": {"memories": len(rows), "events": len(found)},
        "memories": [memory_as_dict(m) for m in rows],
        "events": [event_as_dict(e) for e in found],
    }


def _events(aliases, target: Target, rows: dict[str, list[dict]]) -> list[dict]:
    # By (namespace, id): an event of another namespace's row with the same id is
    # not about these rows (and may be another tenant's).
    by_namespace: dict[str, list[str]] = {}
    for part in rows.values():
        for r in part:
            by_namespace.setdefault(r["namespace"], []).append(r["id"])
    out: dict[tuple[str, int], dict] = {}
    for alias in aliases:
        events = MemoryEvent.objects.using(alias)
        for namespace, ids in by_namespace.items():
            for batch in batches(ids):
                for e in events.filter(namespace=namespace, memory_id__in=list(batch)):
                    out[(alias, e.id)] = event_as_dict(e)
        if target.kind == ErasureTarget.NAMESPACE:
            for e in events.filter(namespace=target.namespace).iterator(chunk_size=CHUNK):
                out[(alias, e.id)] = event_as_dict(e)
    return sorted(out.values(), key=lambda e: (e["timestamp"] or "", e["id"]))


def _receipts(alias: str, subject: str | None, namespace: str | None, visible) -> list[dict]:
    qs = ErasureReceipt.objects.using(alias)
    if subject is not None:
        qs = qs.filter(subject_hmac=keyed_hmac(subject))
    elif namespace is not None:
        qs = qs.filter(namespace_hmac=keyed_hmac(namespace))
    if visible is not None:
        allowed = Q(pk__in=visible if isinstance(visible, QuerySet) else list(visible))
        if namespace is not None:  # an erasure within the exported namespace
            allowed |= Q(namespace_hmac=keyed_hmac(namespace))
        qs = qs.filter(allowed)
    keep = ("id", "target_kind", "created_at", "counts", "purge_status", "verified", "purged_at")
    return [{k: v for k, v in as_dict(r).items() if k in keep} for r in qs]
