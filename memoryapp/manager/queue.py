"""The review queue of the facade (docs/behaviour.md §6)."""

from __future__ import annotations

import logging

from django.db import transaction

from .. import crystallizer, guards, review, store, validation
from ..models import Memory, ReviewItem, ReviewStatus, Source

logger = logging.getLogger(__name__)


class ReviewQueue:
    """Mixin of :class:`~memoryapp.manager.MemoryManager`: crystallize, approve, reject, purge."""

    # ------------------------------------------------------------ review queue
    def _review_items(self):
        return ReviewItem.objects.using(self.using).in_namespace(self.project)

    def crystallize_user_messages(self, messages) -> list[ReviewItem]:
        """Queue the crystallizer's proposals (docs/behaviour.md §6); never memories."""
        proposals = [p for p in crystallizer.propose(messages or []) if self._storable(p)]
        if not proposals:
            return []
        return review.queue_proposals(
            proposals,
            using=self.using,
            namespace=self.project,
            subject=self.user,
            session_id=self.session_id,
        )

    def _storable(self, proposal) -> bool:
        """Whether a proposal may be queued: valid text, and no credential in any field.

        A refused proposal is dropped, never queued: the review queue is stored and
        shown in the admin and the API like memories are (the reason is logged, the
        text never).
        """
        fields = (proposal.key_normalized, proposal.title, proposal.content, proposal.evidence)
        try:
            for text in fields:
                validation.check_text(text, "Review item")
                self.guard.detect_sensitive(text)
        except guards.SensitiveMemoryError:
            logger.info("crystallizer proposal dropped: it looks like a credential")
            return False
        except guards.MemoryValidationError as exc:
            logger.info("crystallizer proposal dropped: %s", exc)
            return False
        return True

    def list_review_items(self, status: str | None = "pending") -> list[ReviewItem]:
        """Review items of this namespace: most occurrences first, then the newest."""
        return list(
            self._review_items()
            .with_status(status)
            .order_by("-occurrences", "-updated_at", "-created_at", "id")
        )

    def approve_review_item(self, item_id: str, *, actor: str = "") -> Memory | None:
        """Promote a pending item to a memory (source ``crystallized``); None if not pending.

        Logs a ``review_approve`` event (the item's id, the memory's id, ``actor``) in the
        same transaction as the decision, whoever calls: admin, API or an agent.
        """
        with transaction.atomic(using=self.using):
            item = review.decide(self.using, self.project, item_id, ReviewStatus.APPROVED)
            if item is None:
                return None
            memory = self._writer_for(item).upsert(
                item.key_normalized,
                item.content,
                item.tags,
                scope=item.scope,
                type=item.type,
                source=Source.CRYSTALLIZED,
                actor=actor,
            )
            store.log_event(
                self.using,
                item.pk,
                "review_approve",
                namespace=self.project,
                actor=actor,
                memory=memory.pk,
            )
            return memory

    def _writer_for(self, item: ReviewItem):
        """The facade that writes ``item``'s memory: bound to the item's own subject.

        Namespace, scope and subject come from the item, never from the caller's
        binding: an item proposed in ``acme/bob``'s session becomes a memory of
        ``acme/bob`` (and goes with ``erase(subject="acme/bob")``) whether the admin,
        the API or ``memory review --approve`` without ``--user`` approves it.
        """
        if item.subject == self.user:
            return self
        from .core import MemoryManager  # the facade this mixin is part of

        self._wrote()  # this facade's cached blocks may show the new memory too
        return MemoryManager(
            project=self.project,
            user=item.subject,
            using=self.using,
            user_using=self.user_using,
            session_id=self.session_id,
            guard=self.guard,
        )

    def reject_review_item(self, item_id: str, *, actor: str = "") -> bool:
        """Mark a pending item rejected; False if it is not pending (or not ours).

        Logs a ``review_reject`` event with ``actor`` in the same transaction.
        """
        with transaction.atomic(using=self.using):
            item = review.decide(self.using, self.project, item_id, ReviewStatus.REJECTED)
            if item is None:
                return False
            store.log_event(
                self.using, item.pk, "review_reject", namespace=self.project, actor=actor
            )
            return True

    def purge_review_queue(self, status: str | None = None, *, actor: str = "") -> int:
        """Erase this namespace's review items (optionally one status); the count.

        The remedy the seed lacks: ``wipe_all`` leaves the queue, and its
        excerpts of user messages, in place. This is a real erasure (hard
        delete, vendor purge, receipt), not just a ``DELETE``.
        """
        if status is not None and status not in ReviewStatus.values:
            raise guards.MemoryValidationError(
                f"Unknown review status {status!r}: "
                f"expected one of {', '.join(ReviewStatus.values)}"
            )
        from ..erasure import erase_review_items

        receipt = erase_review_items(
            namespace=self.project, status=status, actor=actor, using=self.using
        )
        return int(receipt.counts.get("memory_review_queue", 0))
