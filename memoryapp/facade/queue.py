"""The review queue of the facade (docs/behaviour.md §6): the namespace it is bound to.

Every decision is :mod:`memoryapp.services.review`'s, so the admin, the API and
the command line decide exactly as an agent does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryapp.models import Memory, ReviewItem, ReviewStatus
from memoryapp.rules import validation
from memoryapp.services import review
from memoryapp.services.review import DECISION_CHUNK

if TYPE_CHECKING:
    from memoryapp.rules.guard import MemoryGuard

__all__ = ["DECISION_CHUNK", "ReviewQueue"]


class ReviewQueue:
    """Mixin of :class:`~memoryapp.facade.MemoryManager`: crystallize, approve, reject, purge."""

    if TYPE_CHECKING:  # what it uses of MemoryManager (core.py), for the type checker only
        project: str
        user: str | None
        using: str
        user_using: str
        session_id: str
        guard: MemoryGuard

        def _wrote(self) -> None: ...

    def crystallize_user_messages(self, messages) -> list[ReviewItem]:
        """Queue the crystallizer's proposals (docs/behaviour.md §6); never memories."""
        return review.queue(
            messages=messages,
            guard=self.guard,
            using=self.using,
            namespace=self.project,
            subject=self.user,
            session_id=self.session_id,
        )

    def list_review_items(self, status: str | None = "pending") -> list[ReviewItem]:
        """Review items of this namespace: most occurrences first, then the newest.

        Raises:
            MemoryValidationError: ``status`` is not a review status (nor a list of them).
        """
        statuses = validation.check_choices(status, ReviewStatus.values, "review status")
        return list(
            ReviewItem.objects.using(self.using)
            .in_namespace(self.project)
            .with_status(statuses)
            .order_by("-occurrences", "-updated_at", "-created_at", "id")
        )

    def approve_review_item(self, item_id: str, *, actor: str = "") -> Memory | None:
        """Promote a pending item of this namespace to a memory (source ``crystallized``).

        None if it is not pending. The memory lands in the item's own namespace,
        scope and subject (:func:`memoryapp.services.review.approve`), with a
        ``review_approve`` event in the same transaction.
        """
        memory = review.approve(
            item_id=item_id,
            namespace=self.project,
            using=self.using,
            user_using=self.user_using,
            guard=self.guard,
            actor=actor,
        )
        if memory is not None:
            self._wrote()  # this manager's cached blocks may show the new memory
        return memory

    def approve_review_items(
        self, item_ids, *, actor: str = ""
    ) -> tuple[int, list[tuple[ReviewItem, str]]]:
        """Approve many pending items of this namespace at once: ``(approved, refused)``.

        The bulk path of :meth:`approve_review_item`
        (:func:`memoryapp.services.review.approve_many`); an item the guard
        refuses stays pending and is returned with the reason.
        """
        approved, refused = review.approve_many(
            item_ids=item_ids,
            namespace=self.project,
            using=self.using,
            user_using=self.user_using,
            guard=self.guard,
            actor=actor,
        )
        if approved:
            self._wrote()
        return approved, refused

    def reject_review_items(self, item_ids, *, actor: str = "") -> int:
        """Reject many pending items of this namespace at once; how many were pending."""
        return review.reject_many(
            item_ids=item_ids, namespace=self.project, using=self.using, actor=actor
        )

    def reject_review_item(self, item_id: str, *, actor: str = "") -> bool:
        """Mark a pending item rejected; False if it is not pending (or not ours)."""
        return review.reject(item_id=item_id, namespace=self.project, using=self.using, actor=actor)

    def purge_review_queue(self, status: str | None = None, *, actor: str = "") -> int:
        """Erase this namespace's review items (optionally one status); the count.

        A real erasure (hard delete, vendor purge, receipt), not just a ``DELETE``
        (:func:`memoryapp.services.review.purge`).
        """
        receipts = review.purge(
            namespaces=[self.project], status=status, actor=actor, using=self.using
        )
        return review.purged_count(receipts)
