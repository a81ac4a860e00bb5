"""The review queue on the database: write crystallizer proposals (folded) and decide them.

Purging is erasure: :func:`memoryapp.compliance.erase_review_items`.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from memoryapp.db import locks
from memoryapp.fields import now
from memoryapp.models import Confidence, ReviewItem, ReviewStatus, dump_list
from memoryapp.rules.crystallizer import Proposal

# Occurrences from which a folded candidate counts as inferred (docs/behaviour.md §6).
INFERRED_FROM = 2


def queue_proposals(
    proposals: Iterable[Proposal],
    *,
    using: str,
    namespace: str,
    subject: str | None,
    session_id: str,
) -> list[ReviewItem]:
    """Write proposals to ``memory_review_queue``, folding into pending rows of the same key.

    A pending row of the same ``(namespace, scope, key)`` keeps its ``id`` and
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
    pending = (
        ReviewItem.objects.using(using)
        .pending()
        .filter(namespace=namespace, scope=p.scope, key_normalized=p.key_normalized)
    )
    existing = pending.select_for_update().first()
    if existing is None:
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
        # ON CONFLICT DO NOTHING: a concurrent writer that queued the same key first
        # is no error (the server would log the key in a unique violation's DETAIL).
        ReviewItem.objects.using(using).bulk_create([item], ignore_conflicts=True)
        existing = pending.select_for_update().get()
        if existing.pk == item.pk:
            return existing
    existing.occurrences += p.occurrences
    existing.title, existing.content, existing.evidence = p.title, p.content, p.evidence
    existing.source_session = session_id
    existing.confidence = _confidence(existing.occurrences)
    existing.subject = subject if subject is not None else existing.subject
    existing.updated_at = now()
    existing.save(using=using)
    return existing


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
