"""The review queue on the database: write crystallizer proposals (folded) and decide them.

Purging is erasure: :func:`memoryapp.compliance.erase_review_items`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from django.db import transaction

from memoryapp.db import locks
from memoryapp.fields import now
from memoryapp.models import Confidence, ReviewItem, ReviewStatus, dump_list
from memoryapp.rules.crystallizer import Proposal

# Occurrences from which a folded candidate counts as inferred (docs/behaviour.md §6).
INFERRED_FROM = 2
MAX_OCCURRENCES = 2**31 - 1  # memory_review_queue.occurrences is a 32-bit integer


def queue_proposals(
    proposals: Iterable[Proposal],
    *,
    using: str,
    namespace: str,
    subject: str | None,
    session_id: str,
) -> list[ReviewItem]:
    """Write proposals to ``memory_review_queue``, folding into pending rows of the same key.

    A pending row of the same ``(namespace, scope, subject, key)`` keeps its ``id`` and
    ``created_at``; occurrences add up; the latest title, content, evidence and
    session win; confidence becomes ``inferred`` from two occurrences. All
    proposals of one call are written in one transaction.
    """
    written: list[ReviewItem] = []
    with transaction.atomic(using=using):
        # An erasure of the namespace or the subject runs wholly before or after.
        locks.for_write(using, namespaces=[namespace], subjects=[subject])
        for p in proposals:
            written.append(_fold_one(p, using, namespace, subject, session_id))
    return written


def _fold_one(p: Proposal, using, namespace, subject, session_id) -> ReviewItem:
    item = ReviewItem(
        namespace=namespace,
        subject=subject,
        scope=p.scope,
        type=p.type,
        key_normalized=p.key_normalized,
        title=p.title,
        content=p.content,
        tags_json=dump_list(p.tags),
        evidence=p.evidence,
        source_session=session_id,
        occurrences=p.occurrences,
        confidence=_confidence(p.occurrences),
    )
    return fold(item, using=using, insert=partial(_insert_unless_pending, using=using))


def _insert_unless_pending(
    item: ReviewItem, pending_match: Callable[[], ReviewItem | None], *, using: str
) -> ReviewItem | None:
    """Insert ``item``; the pending item of its key that a concurrent writer queued first,
    or None.

    ON CONFLICT DO NOTHING: losing that race is no error (the server would log the key
    in a unique violation's DETAIL).
    """
    ReviewItem.objects.using(using).bulk_create([item], ignore_conflicts=True)
    winner = pending_match()
    return None if winner is None or winner.pk == item.pk else winner


def fold(
    item: ReviewItem,
    *,
    using: str,
    insert: Callable[[ReviewItem, Callable[[], ReviewItem | None]], ReviewItem | None],
    saturating: bool = False,
) -> ReviewItem:
    """Insert ``item`` (unsaved), or fold it into the pending item of its (namespace, scope,
    subject, key); the row written. Must run inside a transaction.

    A fold keeps the pending item's id, scope, subject, key, ``created_at`` and status;
    adds the occurrences; takes the new type, title, content, tags, evidence and
    session; and raises the confidence to ``inferred`` from :data:`INFERRED_FROM`
    occurrences (else the new item's). Items without a subject fold together; an item
    never folds into another subject's (its evidence would be exported and erased
    with the wrong person: constraint ``uix_review_scope_key``).

    Args:
        insert: inserts ``item`` and returns the pending item that won a race for its
            key (it is given a function that finds it), or None when ``item`` went in.
        saturating: Agentao's store semantics: a fold counts at least one occurrence,
            and the sum stops at the column's 32-bit bound instead of failing.
    """
    pending = same_subject(
        ReviewItem.objects.using(using).filter(
            namespace=item.namespace,
            scope=item.scope,
            key_normalized=item.key_normalized,
            status=ReviewStatus.PENDING,
        ),
        item.subject,
    )

    def pending_match() -> ReviewItem | None:
        return pending.select_for_update().first()

    existing = pending_match()
    if existing is None:
        # Only a pending item can lose a race for the pending (scope, key).
        match = pending_match if item.status == ReviewStatus.PENDING else (lambda: None)
        existing = insert(item, match)
        if existing is None:
            return item
    added = int(item.occurrences or 0)
    total = int(existing.occurrences) + added
    if saturating:
        total = min(int(existing.occurrences) + max(added, 1), MAX_OCCURRENCES)
    changed = ["type", "title", "content", "tags_json", "evidence", "source_session"]
    for name in changed:
        setattr(existing, name, getattr(item, name))
    existing.occurrences = total
    existing.confidence = Confidence.INFERRED if total >= INFERRED_FROM else item.confidence
    existing.updated_at = item.updated_at
    changed += ["occurrences", "confidence", "updated_at"]
    existing.save(using=using, update_fields=changed)
    return existing


def same_subject(items, subject: str | None):
    """``items`` of ``subject`` (of none when it is None): the fold's notion of one subject."""
    return items.filter(subject__isnull=True) if subject is None else items.filter(subject=subject)


def _confidence(occurrences: int) -> str:
    return Confidence.INFERRED if occurrences >= INFERRED_FROM else Confidence.AUTO_SUMMARY


def decide(using: str, namespace: str, item_id: str, status: str) -> ReviewItem | None:
    """Move a *pending* item of ``namespace`` to ``status`` (locked); None if not pending."""
    item = (
        ReviewItem.objects.using(using)
        .select_for_update()
        .filter(namespace=namespace, pk=item_id, status=ReviewStatus.PENDING)
        .first()
    )
    if item is None:
        return None
    item.status = status
    item.updated_at = now()
    item.save(using=using, update_fields=["status", "updated_at"])
    return item
