"""The review queue's decisions, in one place (docs/behaviour.md §6): queue, approve, reject, purge.

Namespace, scope and subject of an approved memory come from the item itself,
never from the caller's binding: an item proposed in ``acme/bob``'s session
becomes a memory of ``acme/bob`` (and goes with ``erase(subject="acme/bob")``)
whether the facade, the admin, the API or ``memory review --approve`` without
``--user`` approves it. The rows themselves are written by
:mod:`memoryapp.writes.review_queue` (queue, decide) and :mod:`memoryapp.services.memories`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence

from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Q

from memoryapp.conf import get_guard, user_database
from memoryapp.fields import now
from memoryapp.models import Memory, MemoryEvent, ReviewItem, ReviewStatus, Source
from memoryapp.rules import crystallizer, validation
from memoryapp.rules.batching import batches
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services import memories
from memoryapp.services import review_contributors as contributors
from memoryapp.services.slices import Binding
from memoryapp.writes import bulk, store
from memoryapp.writes import review_queue as review

DECISION_CHUNK = 500  # review items decided per transaction (and per IN list)

logger = logging.getLogger("memoryapp.facade.queue")


# ------------------------------------------------------------------- queue
def queue(
    *,
    messages,
    guard: MemoryGuard,
    using: str = DEFAULT_DB_ALIAS,
    namespace: str,
    subject: str | None,
    session_id: str,
) -> list[ReviewItem]:
    """Queue the crystallizer's proposals from ``messages``; never memories.

    A proposal with invalid text or a credential in any field is dropped, never
    queued: the queue is stored and shown like memories are.
    """
    proposals = [p for p in crystallizer.propose(messages or []) if _storable(p, guard)]
    if not proposals:
        return []
    return review.queue_proposals(
        proposals, using=using, namespace=namespace, subject=subject, session_id=session_id
    )


def _storable(proposal, guard: MemoryGuard) -> bool:
    """Whether a proposal may be queued (the reason is logged, the text never)."""
    fields = (proposal.key_normalized, proposal.title, proposal.content, proposal.evidence)
    try:
        for text in fields:
            validation.check_text(text, "Review item")
            guard.detect_sensitive(text)
    except SensitiveMemoryError:
        logger.info("crystallizer proposal dropped: it looks like a credential")
        return False
    except MemoryValidationError as exc:
        logger.info("crystallizer proposal dropped: %s", exc)
        return False
    return True


# ----------------------------------------------------------------- approve
def _writer(item: ReviewItem, using: str, user_using: str | None) -> Binding:
    """The stores ``item``'s memory lands in: its namespace, its subject's user namespace.

    Both held to the namespace rule of every write (an item may have been queued
    through Agentao's store protocol).
    """
    project = validation.check_namespace(item.namespace, "project namespace")
    user = item.subject
    if user is not None:
        user = validation.check_namespace(user, "user namespace")
    return Binding.of(project=project, user=user, using=using, user_using=user_using)


@validation.checked_arguments
def approve(
    *,
    item_id: str,
    namespace: str,
    using: str = DEFAULT_DB_ALIAS,
    user_using: str | None = None,
    guard: MemoryGuard | None = None,
    actor: str = "",
) -> Memory | None:
    """Promote a pending item of ``namespace`` to a memory (source ``crystallized``).

    Returns None when the item is not pending there. Logs a ``review_approve``
    event (the item's id, the memory's id, ``actor``) in the same transaction
    as the decision. A project-scope item approves its pending siblings (other
    subjects' items of its key) into the same memory, whose owner is then the
    sole contributor or nobody (:mod:`memoryapp.services.review_contributors`).
    """
    with transaction.atomic(using=using):
        # The item's project siblings are approved with it (services/review_contributors).
        covered = contributors.lock_for_decision(using, namespace, [item_id])
        rows = contributors.locked_rows(using, namespace, [item_id], covered)
        item = review.decide(using, namespace, item_id, ReviewStatus.APPROVED)
        if item is None:
            return None
        memory = memories.upsert(
            binding=_writer(item, using, user_using),
            guard=guard or get_guard(),
            key=item.key_normalized,
            value=item.content,
            tags=item.tags,
            scope=item.scope,
            type=item.type,
            source=Source.CRYSTALLIZED,
            actor=actor,
            title=item.title,  # readable ("Constraint: never …"), not the key
        ).memory
        store.log_event(
            using,
            item.pk,
            "review_approve",
            namespace=item.namespace,
            actor=actor,
            memory=memory.pk,
        )
        contributors.settle(using, namespace, [(item, memory.pk)], rows, actor=actor)
        memory.refresh_from_db(using=memory._state.db or using, fields=["subject"])
        return memory


@validation.checked_arguments
def approve_many(
    *,
    item_ids: Iterable[str],
    namespace: str | None = None,
    using: str = DEFAULT_DB_ALIAS,
    user_using: str | None = None,
    guard: MemoryGuard | None = None,
    actor: str = "",
) -> tuple[int, list[tuple[ReviewItem, str]]]:
    """Approve many pending items at once (of ``namespace``, or of any): ``(approved, refused)``.

    The bulk path of :func:`approve` for an operator's "select all": the same
    guard and classification (through :mod:`memoryapp.writes.bulk`), the same
    namespace, scope and subject taken from each item, the same events, but a
    few statements per chunk of items instead of a dozen per item. An item the
    guard refuses stays pending and is returned with the reason. The count
    includes the project siblings approved with the items asked for.
    """
    guard = guard or get_guard()
    user_using = user_using or user_database() or using  # as a facade on ``using`` resolves it
    approved = 0
    refused: list[tuple[ReviewItem, str]] = []
    for ns, ids in _by_namespace(item_ids, namespace, using).items():
        # Where the memories land: the project, and each subject's user namespace
        # (the default one for an item without a subject).
        written: set[str] = {ns, ""}
        done_here = 0
        for pending in _pending_chunks(ids, ns, using):
            with transaction.atomic(using=using):
                chunk = list(pending.values_list("pk", flat=True))
                done, bad = _approve_chunk(chunk, ns, using, user_using, guard, actor, written)
                refused += bad
                done_here += len(done)
        if done_here >= DECISION_CHUNK:  # many new rows: the planner should know (as an import)
            for alias in {using, user_using}:
                bulk.refresh_statistics(alias, written)
        approved += done_here
    return approved, refused


def _approve_chunk(
    chunk: list[str],
    ns: str,
    using: str,
    user_using: str,
    guard: MemoryGuard,
    actor: str,
    written: set[str],
) -> tuple[list[tuple[ReviewItem, str]], list[tuple[ReviewItem, str]]]:
    """Approve one chunk of ``ns``'s pending items and their project siblings (in the
    caller's transaction): ``(approved (item, memory id) pairs, refused (item, reason))``.
    Adds the user namespaces written to ``written``."""
    covered = contributors.lock_for_decision(using, ns, chunk)
    rows = contributors.locked_rows(using, ns, chunk, covered)
    wanted = set(chunk)
    items = sorted((r for r in rows if r.pk in wanted), key=lambda r: (r.created_at, r.id))
    by_subject: dict[str | None, list[ReviewItem]] = {}
    for item in items:
        by_subject.setdefault(item.subject, []).append(item)
        written.add(item.subject or "")
    done: list[tuple[ReviewItem, str]] = []
    refused: list[tuple[ReviewItem, str]] = []
    for group in by_subject.values():
        ok, bad = _approve_group(group, using, user_using, guard, actor)
        done += ok
        refused += bad
    contributors.mark_approved(using, ns, done, actor=actor)
    # A refused item stays pending, even where a sibling of its key was approved.
    stay = {item.pk for item, _ in refused}
    open_rows = [r for r in rows if r.pk not in stay]
    done += contributors.settle(using, ns, done, open_rows, actor=actor)
    return done, refused


def approved_memories(
    items: Iterable[tuple[str, str]], *, using: str = DEFAULT_DB_ALIAS
) -> dict[tuple[str, str], str]:
    """``(namespace, item id)`` → the id of the memory its approval wrote, read from the
    ``review_approve`` events logged in that namespace.

    For telling an operator where an approval went (the admin links each new
    memory). Ids are unique within a namespace only: an event of another
    namespace naming the same item id is another item's. Items never approved are
    absent; an item approved twice (never the case: a decided item is not
    pending) would answer its latest approval.
    """
    by_namespace: dict[str, list[str]] = {}
    for namespace, item_id in dict.fromkeys(items):
        by_namespace.setdefault(namespace, []).append(item_id)
    found: dict[tuple[str, str], str] = {}
    events = MemoryEvent.objects.using(using).filter(event_type="review_approve")
    for namespace, ids in by_namespace.items():
        for start in range(0, len(ids), DECISION_CHUNK):
            chunk = ids[start : start + DECISION_CHUNK]
            for item_id, detail in (
                events.filter(namespace=namespace, memory_id__in=chunk)
                .order_by("timestamp", "id")
                .values_list("memory_id", "detail")
            ):
                try:
                    memory_id = json.loads(detail or "{}").get("memory")
                except (ValueError, AttributeError):
                    continue
                if isinstance(memory_id, str) and memory_id:
                    found[(namespace, item_id)] = memory_id
    return found


def _by_namespace(item_ids: Iterable[str], namespace: str | None, using: str):
    """``item_ids`` by the namespace of their pending items (all of ``namespace`` if given)."""
    ids = list(dict.fromkeys(item_ids))
    if namespace is not None:
        return {namespace: ids} if ids else {}
    pending = ReviewItem.objects.using(using).pending()
    found: dict[str, list[str]] = {}
    for batch in batches(ids):  # ids only: cheap at any count
        for pk, ns in pending.filter(pk__in=batch).values_list("pk", "namespace"):
            found.setdefault(ns, []).append(pk)
    return found


def _pending_chunks(ids: list[str], namespace: str, using: str):
    """The pending items of ``namespace`` among ``ids``, as one queryset per chunk
    (each decided in its own transaction, its IN list far below SQLite's limit)."""
    items = ReviewItem.objects.using(using).in_namespace(namespace)
    for start in range(0, len(ids), DECISION_CHUNK):
        chunk = ids[start : start + DECISION_CHUNK]
        yield items.filter(pk__in=chunk, status=ReviewStatus.PENDING)


def _approve_group(items: list[ReviewItem], using, user_using, guard, actor: str):
    """Write the memories of one subject's items; ``(item, memory id)`` pairs and refusals."""
    binding = _writer(items[0], using, user_using)
    records = [
        (
            n,
            {
                "key": item.key_normalized,
                "value": item.content,
                "tags": list(item.tags),
                "scope": item.scope,
                "type": item.type,
                "source": Source.CRYSTALLIZED,
                "title": item.title,
            },
        )
        for n, item in enumerate(items, start=1)
    ]
    report = memories.import_records(
        binding=binding, guard=guard, records=records, actor=actor, skip_invalid=True, analyze=False
    )
    bad_lines = dict(report.invalid)
    refused = [(items[n - 1], reason) for n, reason in bad_lines.items()]
    written = [item for n, item in enumerate(items, start=1) if n not in bad_lines]
    ids = _memory_ids_for(written, binding)
    return [(item, ids[item.pk]) for item in written], refused


def _memory_ids_for(items: list[ReviewItem], binding: Binding) -> dict[str, str]:
    """Item id → the live memory it became (where an upsert of it lands), few queries."""
    by_target: dict[tuple[str, str, str], dict[str, str]] = {}
    for item in items:
        target = binding.store_for(item.scope)
        key = (target.using, target.namespace, target.scope)
        by_target.setdefault(key, {})[item.key_normalized] = item.pk
    found: dict[str, str] = {}
    for (using, namespace, scope), items_by_key in by_target.items():
        rows = Memory.objects.using(using).live().filter(namespace=namespace, scope=scope)
        keys = list(items_by_key)
        for start in range(0, len(keys), DECISION_CHUNK):
            chunk = keys[start : start + DECISION_CHUNK]
            for key, pk in rows.filter(key_normalized__in=chunk).values_list(
                "key_normalized", "pk"
            ):
                found[items_by_key[key]] = pk
    return found


# ------------------------------------------------------------------ reject
@validation.checked_arguments
def reject(*, item_id: str, namespace: str, using: str = DEFAULT_DB_ALIAS, actor: str = "") -> bool:
    """Mark a pending item of ``namespace`` rejected; False if it is not pending there.

    A project-scope item's pending siblings are rejected with it. Logs a
    ``review_reject`` event per item with ``actor`` in the same transaction.
    """
    with transaction.atomic(using=using):
        rows = contributors.locked_rows(using, namespace, [item_id], None)
        item = review.decide(using, namespace, item_id, ReviewStatus.REJECTED)
        if item is None:
            return False
        for row in [item, *contributors.decide_siblings([item], rows)]:
            if row is not item:
                review.decide(using, namespace, row.pk, ReviewStatus.REJECTED)
            store.log_event(using, row.pk, "review_reject", namespace=namespace, actor=actor)
        return True


def pending_holder(*, item_id: str, namespace: str, using: str = DEFAULT_DB_ALIAS) -> str | None:
    """The id of the pending item that holds ``item_id``'s key (same namespace, scope,
    subject and key), which making ``item_id`` pending again would collide with; None
    when there is none (or the item is gone).

    Asked before the write, so that the refusal never reaches the database as a unique
    violation (whose log line would quote the key).
    """
    item = (
        ReviewItem.objects.using(using)
        .filter(pk=item_id, namespace=namespace)
        .values("scope", "subject", "key_normalized")
        .first()
    )
    if item is None:
        return None
    subject = item["subject"] or ""
    siblings = ReviewItem.objects.using(using).filter(
        namespace=namespace,
        scope=item["scope"],
        key_normalized=item["key_normalized"],
        status=ReviewStatus.PENDING,
    )
    siblings = (
        siblings.filter(subject=subject)
        if subject
        else siblings.filter(Q(subject__isnull=True) | Q(subject=""))
    )
    return siblings.exclude(pk=item_id).values_list("pk", flat=True).first()


@validation.checked_arguments
def reject_many(
    *,
    item_ids: Iterable[str],
    namespace: str | None = None,
    using: str = DEFAULT_DB_ALIAS,
    actor: str = "",
) -> int:
    """Reject many pending items at once (of ``namespace``, or of any); how many were
    rejected (project siblings included)."""
    rejected = 0
    for ns, ids in _by_namespace(item_ids, namespace, using).items():
        for pending in _pending_chunks(ids, ns, using):
            with transaction.atomic(using=using):
                chunk = list(pending.values_list("pk", flat=True))
                rows = contributors.locked_rows(using, ns, chunk, None)
                asked = [r for r in rows if r.pk in set(chunk)]
                chosen = [r.pk for r in asked + contributors.decide_siblings(asked, rows)]
                ReviewItem.objects.using(using).filter(pk__in=chosen).update(
                    status=ReviewStatus.REJECTED, updated_at=now()
                )
                MemoryEvent.objects.using(using).bulk_create(
                    MemoryEvent(memory_id=pk, event_type="review_reject", namespace=ns, actor=actor)
                    for pk in chosen
                )
                rejected += len(chosen)
    return rejected


# ------------------------------------------------------------------- purge
@validation.checked_arguments
def purge(
    *,
    namespaces: Iterable[str | None] = (None,),
    status: str | Iterable[str] | None = None,
    subject: str | None = None,
    actor: str = "",
    using: str | Sequence[str] | None = None,
    purge: bool = True,
) -> list:
    """Erase review items for good: one erasure (and receipt) per namespace, None = every one.

    A real erasure (hard delete, vendor purge, receipt; docs/behaviour.md §6, §9),
    not just a ``DELETE``: ``wipe_all`` leaves the queue, and its excerpts of
    user messages, in place. Each filter given narrows the selection (``status``:
    one status or several; ``using``: the database alias or aliases).

    Raises:
        MemoryValidationError: an unknown status.
    """
    wanted = validation.check_choices(status, ReviewStatus.values, "review status")
    from memoryapp.compliance import erase_review_items

    # The statuses as read once above: a caller's iterator would be spent after the
    # first namespace's erasure.
    statuses = None if wanted is None else list(wanted)
    return [
        erase_review_items(
            namespace=ns, status=statuses, subject=subject, actor=actor, using=using, purge=purge
        )
        for ns in namespaces
    ]


def namespaces_holding(items, *, status: str | None = None, subject: str | None = None):
    """The namespaces, sorted, of the ``items`` a purge of ``status`` and ``subject`` takes.

    ``items`` is a review-item queryset the caller has scoped (the API: to a
    client's grants); :func:`purge` then erases one namespace at a time.
    """
    rows = items.with_status(status).order_by()
    if subject is not None:
        rows = rows.filter(subject=subject)
    return sorted(set(rows.values_list("namespace", flat=True)))


def purged_count(receipts) -> int:
    """How many review items ``receipts`` (of :func:`purge`) removed."""
    return sum(int(r.counts.get(ReviewItem._meta.db_table, 0)) for r in receipts)
