"""The review queue of the facade (docs/behaviour.md §6)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction

from .. import bulk, crystallizer, guards, review, store, validation
from ..fields import now
from ..models import Memory, MemoryEvent, ReviewItem, ReviewStatus, Source

if TYPE_CHECKING:
    from .core import MemoryManager
    from .types import StoreSlice

DECISION_CHUNK = 500  # review items decided per transaction (and per IN list)

logger = logging.getLogger(__name__)


class ReviewQueue:
    """Mixin of :class:`~memoryapp.manager.MemoryManager`: crystallize, approve, reject, purge."""

    if TYPE_CHECKING:  # what it uses of MemoryManager (core.py), for the type checker only
        project: str
        user: str | None
        using: str
        user_using: str
        session_id: str
        guard: guards.MemoryGuard
        _user_store: StoreSlice | None

        def _store_for(self, scope: str) -> StoreSlice: ...
        def _wrote(self) -> None: ...
        def _facade(self, **binding: Any) -> MemoryManager: ...

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
        self._wrote()  # this facade's cached blocks may show the new memory too
        return self._facade(
            project=self.project,
            user=item.subject,
            using=self.using,
            user_using=self.user_using,
            session_id=self.session_id,
            guard=self.guard,
        )

    def approve_review_items(
        self, item_ids, *, actor: str = ""
    ) -> tuple[int, list[tuple[ReviewItem, str]]]:
        """Approve many pending items of this namespace at once: ``(approved, refused)``.

        The bulk path of :meth:`approve_review_item` for an operator's "select all":
        the same guard and classification (through :mod:`memoryapp.bulk`), the same
        namespace, scope and subject taken from each item, the same events, but a
        few statements per chunk of items instead of a dozen per item. An item the
        guard refuses now stays pending and is returned with the reason.
        """
        approved = 0
        refused: list[tuple[ReviewItem, str]] = []
        # Where the memories land: the project, and each subject's user namespace
        # (the default one for an item without a subject).
        written: set[str] = {self.project, ""}
        for pending in self._pending_chunks(item_ids):
            with transaction.atomic(using=self.using):
                items = list(pending.select_for_update().order_by("created_at", "id"))
                by_subject: dict[str | None, list[ReviewItem]] = {}
                for item in items:
                    by_subject.setdefault(item.subject, []).append(item)
                    written.add(item.subject or "")
                done: list[tuple[ReviewItem, str]] = []
                for group in by_subject.values():
                    ok, bad = self._approve_group(group, actor)
                    done += ok
                    refused += bad
                stamp = now()
                ReviewItem.objects.using(self.using).filter(
                    pk__in=[item.pk for item, _ in done]
                ).update(status=ReviewStatus.APPROVED, updated_at=stamp)
                MemoryEvent.objects.using(self.using).bulk_create(
                    MemoryEvent(
                        memory_id=item.pk,
                        event_type="review_approve",
                        namespace=self.project,
                        actor=actor,
                        detail=json.dumps({"memory": memory_id}, sort_keys=True),
                    )
                    for item, memory_id in done
                )
                approved += len(done)
        if approved >= DECISION_CHUNK:  # many new rows: the planner should know (as an import)
            for alias in {self.using, self.user_using}:
                bulk.refresh_statistics(alias, written)
        return approved, refused

    def _pending_chunks(self, item_ids):
        """This namespace's pending items among ``item_ids``, as one queryset per chunk
        (each decided in its own transaction, its IN list far below SQLite's limit)."""
        ids = list(dict.fromkeys(item_ids))
        for start in range(0, len(ids), DECISION_CHUNK):
            chunk = ids[start : start + DECISION_CHUNK]
            yield self._review_items().filter(pk__in=chunk, status=ReviewStatus.PENDING)

    def _approve_group(self, items: list[ReviewItem], actor: str):
        """Write the memories of one subject's items; ``(item, memory id)`` pairs and refusals."""
        writer = self._writer_for(items[0])
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
                },
            )
            for n, item in enumerate(items, start=1)
        ]
        report = writer.import_memories(records, actor=actor, skip_invalid=True, analyze=False)
        bad_lines = dict(report.invalid)
        refused = [(items[n - 1], reason) for n, reason in bad_lines.items()]
        written = [item for n, item in enumerate(items, start=1) if n not in bad_lines]
        ids = writer._memory_ids_for(written)
        return [(item, ids[item.pk]) for item in written], refused

    def _memory_ids_for(self, items: list[ReviewItem]) -> dict[str, str]:
        """Item id → the live memory it became (where an upsert of it lands), few queries."""
        by_target: dict[tuple[str, str, str], dict[str, str]] = {}
        for item in items:
            scope = item.scope if item.scope != "user" or self._user_store else "project"
            target = self._store_for(scope)
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

    def reject_review_items(self, item_ids, *, actor: str = "") -> int:
        """Reject many pending items of this namespace at once; how many were pending."""
        rejected = 0
        for pending in self._pending_chunks(item_ids):
            with transaction.atomic(using=self.using):
                chosen = list(pending.select_for_update().values_list("pk", flat=True))
                ReviewItem.objects.using(self.using).filter(pk__in=chosen).update(
                    status=ReviewStatus.REJECTED, updated_at=now()
                )
                MemoryEvent.objects.using(self.using).bulk_create(
                    MemoryEvent(
                        memory_id=pk,
                        event_type="review_reject",
                        namespace=self.project,
                        actor=actor,
                    )
                    for pk in chosen
                )
                rejected += len(chosen)
        return rejected

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
