"""The erasure requests: by ids, subject, namespace or everything; the review queue; retention."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from memoryapp import conf
from memoryapp.compliance import deletion, engine
from memoryapp.compliance.leases import ReceiptInProgress
from memoryapp.compliance.selection import (
    MEMORIES,
    REVIEW,
    ROW_MODELS,
    SUMMARIES,
    Target,
    authored_filter,
    batches,
)
from memoryapp.compliance.targets import (
    ErasureRequestError,
    RowsByTable,
    build_target,
    stored_text,
)
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, ErasureTarget, Memory, ReviewStatus
from memoryapp.rules.validation import check_actor


def purge_now() -> bool:
    """Whether an interface (API, admin) purges in the request, or leaves it to the worker.

    ``MEMORYAPP_ERASURE_WORKER`` on: the request deletes the rows and answers; the
    worker (``manage.py memory worker``) purges, verifies and completes the receipt.
    """
    return not conf.erasure_worker()


def locate_ids(
    ids: Iterable[str],
    *,
    namespace: str | None = None,
    tables: Iterable[str] | None = None,
    using: str | Sequence[str] | None = None,
) -> dict[str, dict[str, set[str]]]:
    """Where each id lives: ``id -> {table -> {namespaces}}`` (ids found nowhere are absent).

    ``namespace`` and ``tables`` narrow the search; every database of ``using``
    (as for :func:`erase`) is read.
    """
    wanted = list(dict.fromkeys(ids))
    found: dict[str, dict[str, set[str]]] = {}
    for alias in engine.aliases_for(using):
        for table, model in ROW_MODELS.items():
            if tables is not None and table not in tables:
                continue
            qs = model.objects.using(alias).order_by()
            if namespace is not None:
                qs = qs.filter(namespace=namespace)
            for batch in batches(wanted):
                for pk, ns in qs.filter(pk__in=batch).values_list("pk", "namespace"):
                    found.setdefault(pk, {}).setdefault(table, set()).add(ns)
    return found


def resolve(target: Target, aliases: Sequence[str]) -> Target:
    """An ``ids`` target with its rows: each id resolved once to (table, namespace, id).

    The operator's path (Python, the command line) names bare ids. An id whose
    rows lie in more than one namespace is ambiguous — it may be another
    tenant's row that happens to share the id — and is refused, saying in how
    many namespaces it was found, unless ``namespace`` says which; rows of one
    namespace that share an id (a memory and a review item) are all erased.
    An id found nowhere selects nothing. Targets already holding rows (the
    admin's selection, the API's authorised ids) are returned as they are.
    """
    if target.kind != ErasureTarget.IDS or target.rows:
        return target
    found = locate_ids(target.ids, namespace=target.namespace, using=aliases)
    rows: dict[str, list[tuple[str, str]]] = {}
    for pk in target.ids:
        places = found.get(pk, {})
        namespaces = set().union(*places.values()) if places else set()
        namespaces = {ns for ns in namespaces if target.covers(ns)}
        if len(namespaces) > 1:
            raise ErasureRequestError(
                f"id {pk!r} names rows in {len(namespaces)} namespaces; give namespace= "
                "(--namespace) to say which one to erase"
            )
        for table, nss in places.items():
            for ns in sorted(nss & namespaces):
                rows.setdefault(table, []).append((ns, pk))
    return Target(
        ErasureTarget.IDS,
        ids=target.ids,
        namespace=target.namespace,
        within=target.within,
        grants=target.grants,
        rows={table: tuple(pairs) for table, pairs in rows.items()},
    )


def erase(
    *,
    subject: str | None = None,
    namespace: str | None = None,
    ids: Iterable[str] | str | None = None,
    everything: bool = False,
    actor: str = "",
    include_authored: bool = False,
    using: str | Sequence[str] | None = None,
    purge: bool = True,
    rows: RowsByTable | None = None,
    within: Iterable[str] | None = None,
    grants: Iterable[tuple[str, bool]] | None = None,
    receipt_id: str | None = None,
) -> ErasureReceipt:
    """Erase for real (docs/behaviour.md §9): hard-delete, purge the bytes, verify, write a receipt.

    One transaction per database deletes the chosen rows of ``memories`` (live
    and soft-deleted), ``session_summaries``, ``memory_review_queue`` and the
    ``memory_events`` of those rows, and replaces the admin history's copy of
    their titles. After the commit, outside any transaction, the vendor purge
    runs (:mod:`memoryapp.db.purge`) and the result is verified.

    Args:
        subject: a user key: its user-scope memories (written for it or kept in
            its user namespace), and the summaries and review items of its
            sessions. Project-scope memories it authored are listed in the
            receipt and erased only with ``include_authored=True``.
        namespace: a namespace's rows in every table; with ``subject`` or
            ``ids``, a restriction to that namespace.
        ids: memory (or summary, review item) ids, each resolved once to the
            rows (table, namespace) holding it; an id held in more than one
            namespace is refused as ambiguous unless ``namespace`` says which
            (see :func:`resolve`).
        everything: every row of the four tables (the receipts stay).
        actor: who asked (recorded; a subject's own key is never recorded in clear).
        include_authored: also erase the subject's project-scope memories.
        using: a database alias or several; default the default database plus
            ``MEMORYAPP_USER_DATABASE``.
        purge: False deletes now and leaves the purge to the erasure worker
            (``manage.py memory worker``) or a later ``memory erase --retry``: one
            vendor purge for many erasures.
        rows: instead of ``ids``, the exact rows to erase (table name →
            ``(namespace, id)`` pairs), already resolved and authorised by the
            caller (the admin's selection, the API's ids within a client's grants).
        within: restrict a ``subject`` (or ``ids``) erasure to these namespaces
            (exactly these names).
        grants: restrict a ``subject`` (or ``ids``) erasure to the namespaces
            these ``(namespace, is_prefix)`` pairs cover, decided as the rows are
            selected under the erasure locks (the API: the grants a client may
            erase under; a namespace written after the request was authorised is
            covered as well, one no grant covers never touched).
        receipt_id: the id to record the receipt under (chosen by the caller
            beforehand, as the API does for an ``Idempotency-Key``); an id already
            recorded raises ``engine.ReceiptTaken`` and erases nothing.

    Returns:
        The saved :class:`~memoryapp.models.ErasureReceipt`. Called inside a
        transaction, the purge runs when it commits and the receipt says
        ``pending`` until then.

    Raises:
        ErasureRequestError: the request names nothing, or names it ambiguously.
    """
    actor = check_actor(actor)  # refused before anything runs: MemoryValidationError
    aliases = engine.aliases_for(using)
    target = build_target(
        subject=subject,
        namespace=namespace,
        ids=ids,
        everything=everything,
        include_authored=include_authored,
        rows=rows,
        within=within,
        grants=grants,
    )
    target = resolve(target, aliases)
    criteria: dict = {}
    if target.kind == ErasureTarget.IDS:
        criteria["ids_requested"] = len(target.ids)
    if target.restricted:
        criteria["namespace_restricted"] = True
    if target.within is not None:
        criteria["limited_to_namespaces"] = len(target.within)
    if target.grants is not None:
        criteria["limited_to_grants"] = True
    receipt, _ = engine.execute(
        target.kind,
        [target],
        aliases=aliases,
        actor=actor,
        subject=target.subject,
        namespace=target.namespace,
        include_authored=target.include_authored,
        criteria=criteria,
        purge=purge,
        truncate=target.kind == ErasureTarget.EVERYTHING,
        receipt_id=receipt_id,
    )
    return receipt


def preview(
    *,
    subject: str | None = None,
    namespace: str | None = None,
    ids=None,
    everything: bool = False,
    include_authored: bool = False,
    using: str | Sequence[str] | None = None,
    rows: RowsByTable | None = None,
    within: Iterable[str] | None = None,
    grants: Iterable[tuple[str, bool]] | None = None,
) -> dict:
    """What :func:`erase` would remove: counts per table, and kept authored memories."""
    aliases = engine.aliases_for(using)
    target = build_target(
        subject=subject,
        namespace=namespace,
        ids=ids,
        everything=everything,
        include_authored=include_authored,
        rows=rows,
        within=within,
        grants=grants,
    )
    return _preview([resolve(target, aliases)], aliases)


def authored_count(
    subject: str,
    *,
    namespace: str | None = None,
    using: str | Sequence[str] | None = None,
    within: Iterable[str] | None = None,
    grants: Iterable[tuple[str, bool]] | None = None,
) -> int:
    """How many project-scope memories ``subject`` authored (live and soft-deleted).

    A subject erasure keeps them unless ``include_authored``; this is the number the
    operator decides about, shown before the erasure (admin, API dry run, CLI).
    """
    target = build_target(subject=subject, namespace=namespace, within=within, grants=grants)
    q = authored_filter(target)
    return sum(Memory.objects.using(a).filter(q).count() for a in engine.aliases_for(using))


def _preview(targets: Sequence[Target], aliases: Sequence[str]) -> dict:
    counts: dict[str, int] = {}
    authored = 0
    for alias in aliases:
        for target in targets:
            work = deletion.apply(alias, target, delete=False)
            for table, n in work.counts.items():
                counts[table] = counts.get(table, 0) + n
            authored += len(work.authored)
    return {"counts": counts, "project_memories_kept": authored}


def _statuses(status) -> tuple[str, ...] | None:
    if status is None:
        return None
    if isinstance(status, str):
        values: tuple = (status,)
    elif isinstance(status, Iterable) and not isinstance(status, (bytes, dict)):
        values = tuple(status)
    else:
        raise ErasureRequestError("status must be a review status or a list of them")
    unknown = [s for s in values if not isinstance(s, str) or s not in ReviewStatus.values]
    if unknown or not values:
        raise ErasureRequestError(
            f"Unknown review status {unknown or values!r}: "
            f"expected one of {', '.join(ReviewStatus.values)}"
        )
    return values


def erase_review_items(
    *,
    namespace: str | None = None,
    status: str | Iterable[str] | None = None,
    subject: str | None = None,
    actor: str = "",
    using: str | Sequence[str] | None = None,
    purge: bool = True,
) -> ErasureReceipt:
    """Purge the review queue as an erasure: hard delete, vendor purge, receipt.

    Every filter given narrows the selection (``None`` = any): the items of a
    namespace, of one status (or several), of one subject. The receipt's
    ``counts["memory_review_queue"]`` is the number removed.
    """
    actor = check_actor(actor)  # refused before anything runs: MemoryValidationError
    statuses = _statuses(status)
    if namespace is not None:
        namespace = stored_text("namespace", namespace)
    if subject is not None:
        subject = stored_text("subject", subject)
    target = Target(
        ErasureTarget.REVIEW_ITEMS, subject=subject, namespace=namespace, statuses=statuses
    )
    receipt, _ = engine.execute(
        ErasureTarget.REVIEW_ITEMS,
        [target],
        aliases=engine.aliases_for(using),
        actor=actor,
        subject=subject,
        namespace=namespace,
        criteria={"statuses": list(statuses) if statuses is not None else None},
        purge=purge,
    )
    return receipt


def retention_cutoffs(at: dt.datetime | None = None) -> dict[str, dt.datetime]:
    """The moments before which rows are expired, per table, from the retention settings."""
    at = at or now()
    out: dict[str, dt.datetime] = {}
    for table, days in (
        (MEMORIES, conf.retention_deleted_memories_days()),
        (REVIEW, conf.retention_review_items_days()),
        (SUMMARIES, conf.retention_session_summaries_days()),
    ):
        if days is not None:
            out[table] = at - dt.timedelta(days=days)
    return out


def preview_expired(
    *, at: dt.datetime | None = None, using: str | Sequence[str] | None = None
) -> dict:
    """What :func:`purge_expired` would remove (counts), and the cutoffs it would use."""
    cutoffs = retention_cutoffs(at)
    result = _preview([Target(ErasureTarget.RETENTION, cutoffs=cutoffs)], engine.aliases_for(using))
    result["cutoffs"] = {t: c.isoformat() for t, c in cutoffs.items()}
    return result


def purge_expired(
    *,
    actor: str = "",
    at: dt.datetime | None = None,
    using: str | Sequence[str] | None = None,
    purge: bool = True,
) -> ErasureReceipt | None:
    """Erase (really) what the retention settings say has expired; None when none is set.

    Soft-deleted memories deleted before ``MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS``,
    approved/rejected review items decided before
    ``MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS``, and (when set) session summaries
    older than ``MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS``, with their events.
    """
    actor = check_actor(actor)  # refused before anything runs: MemoryValidationError
    cutoffs = retention_cutoffs(at)
    if not cutoffs:
        return None
    target = Target(ErasureTarget.RETENTION, cutoffs=cutoffs)
    receipt, _ = engine.execute(
        ErasureTarget.RETENTION,
        [target],
        aliases=engine.aliases_for(using),
        actor=actor,
        criteria={"cutoffs": {t: c.isoformat() for t, c in cutoffs.items()}},
        purge=purge,
    )
    return receipt


def retry_purge(
    receipt: ErasureReceipt | str | None = None,
    *,
    using: str | None = None,
    method: str | None = None,
    busy: list[ReceiptInProgress] | None = None,
) -> list[ErasureReceipt]:
    """Complete a receipt now, or every unfinished one — those needing attention too.

    One vendor purge per database serves all of them. ``method`` (``"auto"``,
    ``"online"``, ``"rewrite"``) overrides ``MEMORYAPP_ERASURE_PURGE_METHOD`` for
    this retry. Returns the receipts retried (complete ones are skipped), each
    saying how it ended. A receipt another live process holds (the worker, a
    request) is left to it: asked for alone, :class:`~.leases.ReceiptInProgress`
    is raised; among all, it is skipped and added to ``busy``.
    """
    if method is None:
        return engine.retry(receipt, using=using, busy=busy)
    with conf.purge_method(method):
        return engine.retry(receipt, using=using, busy=busy)


def receipts_for(
    *, subject: str | None = None, namespace: str | None = None, using: str | None = None
):
    """The receipts of erasures that named ``subject`` or ``namespace`` (matched by HMAC)."""
    from memoryapp.compliance.receipts import keyed_hmac

    qs = ErasureReceipt.objects.using(using or "default")
    if subject is not None:
        qs = qs.filter(subject_hmac=keyed_hmac(subject))
    if namespace is not None:
        qs = qs.filter(namespace_hmac=keyed_hmac(namespace))
    return qs.order_by("created_at", "id")
