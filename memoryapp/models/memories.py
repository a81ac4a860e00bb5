"""Live memories, session summaries and the memory events (docs/behaviour.md §1)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memoryapp.fields import IsoDateTimeField, now
from memoryapp.models.base import (
    Confidence,
    MemoryType,
    Scope,
    Sensitivity,
    Source,
    _TagsMixin,
    dump_list,
    json_list,
    new_id,
)
from memoryapp.permissions import MEMORY_CUSTOM
from memoryapp.querysets import MemoryObjects, SessionSummaryQuerySet


class Memory(_TagsMixin, models.Model):
    """A persistent memory (Agentao's ``MemoryRecord``), soft-deleted through ``deleted_at``."""

    id = models.CharField(primary_key=True, max_length=32, default=new_id, editable=False)
    namespace = models.CharField(max_length=255, default="", db_default="", blank=True)
    subject = models.CharField(max_length=255, null=True, blank=True)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    type = models.CharField(
        max_length=16, choices=MemoryType.choices, default=MemoryType.NOTE, db_default="note"
    )
    key_normalized = models.CharField(max_length=255)
    title = models.CharField(max_length=255)
    content = models.TextField()
    tags_json = models.TextField(default="[]", db_default="[]")
    keywords_json = models.TextField(default="[]", db_default="[]")
    source = models.CharField(
        max_length=16, choices=Source.choices, default=Source.EXPLICIT, db_default="explicit"
    )
    confidence = models.CharField(
        max_length=16,
        choices=Confidence.choices,
        default=Confidence.EXPLICIT_USER,
        db_default="explicit_user",
    )
    sensitivity = models.CharField(
        max_length=16, choices=Sensitivity.choices, default=Sensitivity.NORMAL, db_default="normal"
    )
    created_at = IsoDateTimeField(default=now)
    updated_at = IsoDateTimeField(default=now)
    deleted_at = IsoDateTimeField(null=True, blank=True)
    # The semantic ranking's int8 embedding of the title and content, and the model that
    # made it (memoryapp.recall.core.vectors): derived data, written with the row, left out of
    # exports, recomputed when the model changes. Null where embeddings are off.
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=128, null=True, blank=True, editable=False)

    objects = MemoryObjects()

    class Meta:
        db_table = "memories"
        ordering = ("created_at", "id")
        verbose_name = "memory"
        verbose_name_plural = "memories"
        constraints = [
            # Named as Agentao names its (scope, key) index, so Agentao's
            # "CREATE UNIQUE INDEX IF NOT EXISTS" finds it and leaves ours alone.
            models.UniqueConstraint(
                fields=["namespace", "scope", "key_normalized"],
                condition=Q(deleted_at__isnull=True),
                name="uix_memories_scope_key",
            ),
        ]
        indexes = [
            # The id (and created_at) tie-breakers match the newest-first orderings
            # of the stable block, so ties (one stamp per import chunk) need no sort;
            # type and deleted_at let its filter run on the index alone (one table
            # read per row returned, not per row passed over).
            models.Index(
                fields=["namespace", "scope", "created_at", "id", "type", "deleted_at"],
                name="ix_memories_ns_created",
            ),
            # The stable block's filtered reads take one type at a time, newest first:
            # a range of this index each, not a walk through every row of the slice.
            models.Index(
                fields=["namespace", "scope", "type", "created_at", "id", "deleted_at"],
                name="ix_memories_ns_type",
            ),
            models.Index(
                fields=["namespace", "updated_at", "created_at", "id"],
                name="ix_memories_ns_updated",
            ),
            models.Index(fields=["subject"], name="ix_memories_subject"),
        ]
        permissions = MEMORY_CUSTOM  # codenames: memoryapp.permissions

    def __str__(self) -> str:
        return self.title

    @property
    def keywords(self) -> list[str]:
        """The recall keywords (docs/behaviour.md §2) as a list."""
        return json_list(self.keywords_json)

    @keywords.setter
    def keywords(self, values) -> None:
        self.keywords_json = dump_list(values)

    @property
    def is_live(self) -> bool:
        """True while the row is not soft-deleted."""
        return self.deleted_at is None


class SessionSummary(models.Model):
    """A summary written by the host after a complete context compaction."""

    id = models.CharField(primary_key=True, max_length=32, default=new_id, editable=False)
    session_id = models.CharField(max_length=255)
    summary_text = models.TextField()
    tokens_before = models.IntegerField(default=0, db_default=0)
    messages_summarized = models.IntegerField(default=0, db_default=0)
    created_at = IsoDateTimeField(default=now)
    namespace = models.CharField(max_length=255, default="", db_default="", blank=True)
    subject = models.CharField(max_length=255, null=True, blank=True)

    objects = SessionSummaryQuerySet.as_manager()

    class Meta:
        db_table = "session_summaries"
        ordering = ("created_at", "id")
        verbose_name = "session summary"
        verbose_name_plural = "session summaries"
        indexes = [
            models.Index(fields=["namespace", "created_at"], name="ix_summaries_ns_created"),
            models.Index(fields=["subject"], name="ix_summaries_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} @ {self.created_at:%Y-%m-%d %H:%M:%S}"


EVENT_TYPES = (
    "create",
    "update",
    "soft_delete",
    "restore",
    "rename",
    "adopt",
    "review_approve",
    "review_reject",
    "review_edit",
    "summary_delete",
)


class MemoryEvent(models.Model):
    """Audit log of writes: ids, event type, time, actor — never the content."""

    id = models.AutoField(primary_key=True)
    memory_id = models.CharField(max_length=32)
    event_type = models.CharField(max_length=32)
    timestamp = IsoDateTimeField(default=now)
    detail = models.TextField(null=True, blank=True)
    namespace = models.CharField(max_length=255, default="", db_default="", blank=True)
    actor = models.CharField(max_length=255, default="", db_default="", blank=True)

    class Meta:
        db_table = "memory_events"
        ordering = ("id",)
        verbose_name = "memory event"
        verbose_name_plural = "memory events"
        indexes = [models.Index(fields=["memory_id"], name="ix_events_memory")]

    def __str__(self) -> str:
        return f"{self.event_type} {self.memory_id}"
