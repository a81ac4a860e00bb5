"""The review queue's table: crystallizer proposals waiting for a decision (§6)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from memoryapp.fields import IsoDateTimeField, now
from memoryapp.models.base import Confidence, MemoryType, ReviewStatus, Scope, _TagsMixin, new_id
from memoryapp.permissions import REVIEW_CUSTOM
from memoryapp.querysets import ReviewItemQuerySet


class ReviewItem(_TagsMixin, models.Model):
    """A crystallizer candidate waiting for approval (``memory_review_queue``)."""

    id = models.CharField(primary_key=True, max_length=32, default=new_id, editable=False)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    type = models.CharField(max_length=16, choices=MemoryType.choices)
    key_normalized = models.CharField(max_length=255)
    title = models.CharField(max_length=255)
    content = models.TextField()
    tags_json = models.TextField(default="[]", db_default="[]")
    evidence = models.TextField(default="", db_default="", blank=True)
    source_session = models.CharField(max_length=255, default="", db_default="", blank=True)
    occurrences = models.IntegerField(default=1, db_default=1)
    confidence = models.CharField(
        max_length=16,
        choices=Confidence.choices,
        default=Confidence.AUTO_SUMMARY,
        db_default="auto_summary",
    )
    status = models.CharField(
        max_length=16,
        choices=ReviewStatus.choices,
        default=ReviewStatus.PENDING,
        db_default="pending",
    )
    created_at = IsoDateTimeField(default=now)
    updated_at = IsoDateTimeField(default=now)
    namespace = models.CharField(max_length=255, default="", db_default="", blank=True)
    subject = models.CharField(max_length=255, null=True, blank=True)
    # A pending item folded from several subjects before migration 0013 folded per
    # subject: its evidence keeps only the latest message, so it cannot be split
    # honestly; a reviewer decides whose it is.
    subjects_uncertain = models.BooleanField(default=False, db_default=False)

    objects = ReviewItemQuerySet.as_manager()

    class Meta:
        db_table = "memory_review_queue"
        ordering = ("-occurrences", "-updated_at", "id")
        verbose_name = "review item"
        verbose_name_plural = "review items"
        constraints = [
            # One pending item per subject and key: alice's and dave's identical
            # message stay two items (each exported and erased with its subject).
            # Items without a subject (no user key) still fold together.
            models.UniqueConstraint(
                F("namespace"),
                F("scope"),
                Coalesce(F("subject"), Value("")),
                F("key_normalized"),
                condition=Q(status="pending"),
                name="uix_review_scope_key",
            ),
        ]
        indexes = [
            models.Index(fields=["namespace", "status"], name="ix_review_ns_status"),
            models.Index(fields=["subject"], name="ix_review_subject"),
        ]
        permissions = REVIEW_CUSTOM

    def __str__(self) -> str:
        return self.title


#: The event types written to ``memory_events`` (by this app and by Agentao's store).
