"""The contributors of a project-scope review key: decided together, owned by the sole one.

The queue folds per subject (``uix_review_scope_key``), so alice's and dave's identical
project-scope message are two pending items of one key, one per contributor: each is
exported and erased with its own subject. They stand for one project memory, so they
are decided together — approving or rejecting one decides all its pending siblings in
the same transaction — and the memory's owner (its ``subject``) is the sole
contributor among the key's approved items, else NULL (no single person owns it: an
erasure of one contributor keeps it while another's approved item supports it,
:func:`memoryapp.compliance.selection.contributed_filter`).

Locks: the erasure locks of every sibling's subject before any row lock, then the
rows themselves in one order (by id), so two approvals of sibling rows never deadlock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from django.db.models import Q

from memoryapp.db import locks
from memoryapp.fields import now
from memoryapp.models import Memory, MemoryEvent, ReviewItem, ReviewStatus, Scope

KEYS_PER_QUERY = 500  # keys per IN list: far below SQLite's bound-parameter limit

__all__ = ["lock_for_decision", "locked_rows", "owner_of", "settle", "decide_siblings"]


def _with_siblings(using: str, namespace: str, pks: Sequence[str]) -> Q:
    """Pending rows of ``namespace``: ``pks`` and the project-scope siblings of their keys."""
    keys = list(
        ReviewItem.objects.using(using)
        .filter(namespace=namespace, pk__in=list(pks), scope=Scope.PROJECT)
        .order_by()
        .values_list("key_normalized", flat=True)
        .distinct()
    )
    q = Q(pk__in=list(pks))
    for start in range(0, len(keys), KEYS_PER_QUERY):
        q |= Q(scope=Scope.PROJECT, key_normalized__in=keys[start : start + KEYS_PER_QUERY])
    return Q(namespace=namespace, status=ReviewStatus.PENDING) & q


def lock_for_decision(using: str, namespace: str, pks: Sequence[str]) -> set[str | None] | None:
    """Share the erasure locks of what deciding ``pks`` (and their siblings) writes.

    Returns the subjects covered (None: this vendor takes no such locks, every
    subject is covered). A sibling queued by another subject after this read is not
    covered: :func:`locked_rows` leaves it pending (a later proposal, decided later).
    """
    if not locks.needed(using):
        return None
    found = (
        ReviewItem.objects.using(using)
        .filter(_with_siblings(using, namespace, pks))
        .order_by()
        .values_list("subject", flat=True)
        .distinct()
    )
    subjects = set(found)
    named = {s for s in subjects if s is not None}
    # An approved memory lands in the project namespace or a subject's user namespace.
    locks.for_write(using, namespaces={namespace} | named, subjects=named)
    return subjects


def locked_rows(
    using: str, namespace: str, pks: Sequence[str], covered: set[str | None] | None
) -> list[ReviewItem]:
    """The pending items ``pks`` and their siblings, row-locked in one order (by id).

    Siblings of a subject outside ``covered`` are left out (see
    :func:`lock_for_decision`); the items ``pks`` themselves are always returned.
    """
    rows = (
        ReviewItem.objects.using(using)
        .select_for_update()
        .filter(_with_siblings(using, namespace, pks))
        .order_by("id")
    )
    wanted = set(pks)
    return [r for r in rows if r.pk in wanted or covered is None or r.subject in covered]


def owner_of(subjects: Iterable[str | None]) -> str | None:
    """The owner of a project memory whose approved items have these subjects: the sole
    named contributor, else None (several people, or one without a user key)."""
    distinct = set(subjects)
    return next(iter(distinct)) if len(distinct) == 1 else None


def decide_siblings(decided: Iterable[ReviewItem], rows: Iterable[ReviewItem]) -> list[ReviewItem]:
    """The pending project-scope ``rows`` that share a key with a ``decided`` item (not
    themselves decided): they take the same decision."""
    done = {item.pk for item in decided}
    keys = {item.key_normalized for item in decided if item.scope == Scope.PROJECT}
    return [
        r
        for r in rows
        if r.pk not in done and r.scope == Scope.PROJECT and r.key_normalized in keys
    ]


def settle(
    using: str,
    namespace: str,
    approved: Sequence[tuple[ReviewItem, str]],
    rows: Iterable[ReviewItem],
    *,
    actor: str = "",
) -> list[tuple[ReviewItem, str]]:
    """After ``approved`` (``(item, memory id)`` pairs) were written: approve their pending
    project siblings among ``rows`` (the locked rows) into the same memory, log a
    ``review_approve`` event for each, and set each project memory's owner.

    Returns the siblings approved here. Must run in the approval's transaction.
    """
    project = [(item, memory_id) for item, memory_id in approved if item.scope == Scope.PROJECT]
    memory_of = {item.key_normalized: memory_id for item, memory_id in project}
    siblings = decide_siblings([item for item, _ in approved], rows)
    pairs = [(s, memory_of[s.key_normalized]) for s in siblings]
    mark_approved(using, namespace, pairs, actor=actor)
    _set_owners(using, namespace, memory_of)
    return pairs


def mark_approved(
    using: str, namespace: str, pairs: Sequence[tuple[ReviewItem, str]], *, actor: str
) -> None:
    """Mark ``(item, memory id)`` pairs approved, with a ``review_approve`` event each."""
    if not pairs:
        return
    ReviewItem.objects.using(using).filter(
        namespace=namespace, pk__in=[item.pk for item, _ in pairs]
    ).update(status=ReviewStatus.APPROVED, updated_at=now())
    MemoryEvent.objects.using(using).bulk_create(
        MemoryEvent(
            memory_id=item.pk,
            event_type="review_approve",
            namespace=namespace,
            actor=actor,
            detail=json.dumps({"memory": memory_id}, sort_keys=True),
        )
        for item, memory_id in pairs
    )


def _set_owners(using: str, namespace: str, memory_of: dict[str, str]) -> None:
    """Each project memory's subject: the owner of its key's approved items."""
    keys = list(memory_of)
    contributors: dict[str, set[str | None]] = {}
    for start in range(0, len(keys), KEYS_PER_QUERY):
        chunk = keys[start : start + KEYS_PER_QUERY]
        for key, subject in (
            ReviewItem.objects.using(using)
            .filter(namespace=namespace, scope=Scope.PROJECT, status=ReviewStatus.APPROVED)
            .filter(key_normalized__in=chunk)
            .order_by()
            .values_list("key_normalized", "subject")
            .distinct()
        ):
            contributors.setdefault(key, set()).add(subject)
    by_owner: dict[str | None, list[str]] = {}
    for key, memory_id in memory_of.items():
        by_owner.setdefault(owner_of(contributors.get(key, {None})), []).append(memory_id)
    memories = Memory.objects.using(using).filter(namespace=namespace, scope=Scope.PROJECT)
    for owner, ids in by_owner.items():
        for start in range(0, len(ids), KEYS_PER_QUERY):
            rows = memories.filter(pk__in=ids[start : start + KEYS_PER_QUERY])
            # Only rows whose owner changes are rewritten.
            if owner is None:
                rows.filter(subject__isnull=False).update(subject=None)
            else:
                rows.exclude(subject=owner).update(subject=owner)
