"""The tables of docs/behaviour.md §1, with Agentao-compatible names and columns, and our own."""

from __future__ import annotations

import json
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

from memoryapp.fields import IsoDateTimeField, now
from memoryapp.permissions import MEMORY_CUSTOM, REVIEW_CUSTOM
from memoryapp.querysets import MemoryObjects, ReviewItemQuerySet, SessionSummaryQuerySet


def new_id() -> str:
    """A short random hex id (16 hex digits: collisions stay negligible at millions of rows)."""
    return secrets.token_hex(8)


class Scope(models.TextChoices):
    """Which store a memory belongs to."""

    USER = "user", "user"
    PROJECT = "project", "project"


class MemoryType(models.TextChoices):
    """What kind of fact a memory is (docs/behaviour.md §2)."""

    PREFERENCE = "preference", "preference"
    PROFILE = "profile", "profile"
    PROJECT_FACT = "project_fact", "project fact"
    WORKFLOW = "workflow", "workflow"
    DECISION = "decision", "decision"
    CONSTRAINT = "constraint", "constraint"
    NOTE = "note", "note"


class Source(models.TextChoices):
    """Who wrote a memory."""

    EXPLICIT = "explicit", "explicit"
    CRYSTALLIZED = "crystallized", "crystallized"
    AUTO = "auto", "auto"


class Confidence(models.TextChoices):
    """How much a memory is trusted."""

    EXPLICIT_USER = "explicit_user", "explicit (user)"
    INFERRED = "inferred", "inferred"
    AUTO_SUMMARY = "auto_summary", "auto summary"


class Sensitivity(models.TextChoices):
    """Sensitivity label of a memory."""

    NORMAL = "normal", "normal"
    SENSITIVE = "sensitive", "sensitive"
    BLOCKED = "blocked", "blocked"


class ReviewStatus(models.TextChoices):
    """State of a crystallizer candidate."""

    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"


def json_list(text: str | None) -> list[str]:
    """The list stored in a ``*_json`` column ([] for anything unreadable)."""
    try:
        value = json.loads(text or "[]")
    except (TypeError, ValueError):
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def dump_list(values) -> str:
    """A list as stored in a ``*_json`` column."""
    # ensure_ascii=False keeps CJK tags searchable as text in the column itself.
    return json.dumps(list(values or ()), ensure_ascii=False)


class _TagsMixin:
    """``tags`` as a list over the ``tags_json`` text column (Agentao's storage form)."""

    @property
    def tags(self) -> list[str]:
        return json_list(self.tags_json)

    @tags.setter
    def tags(self, values) -> None:
        self.tags_json = dump_list(values)


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

    objects = ReviewItemQuerySet.as_manager()

    class Meta:
        db_table = "memory_review_queue"
        ordering = ("-occurrences", "-updated_at", "id")
        verbose_name = "review item"
        verbose_name_plural = "review items"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "scope", "key_normalized"],
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


class SchemaMeta(models.Model):
    """Key/value metadata: ``version`` and the trigger-maintained ``memories_change`` counter."""

    key = models.CharField(primary_key=True, max_length=64)
    value = models.TextField()

    class Meta:
        db_table = "schema_meta"
        ordering = ("key",)
        verbose_name = "schema metadata"
        verbose_name_plural = "schema metadata"

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class SliceChange(models.Model):
    """A change counter per (namespace, scope), bumped by triggers beside ``memories_change``.

    The recall index of one slice is current for its slice's value, so writes in
    other namespaces cost it nothing (not even a delta query); the database-wide
    ``memories_change`` row stays for Agentao and docs/behaviour.md §1. A slice without a row
    has never been written since this table was installed: its value is 0.
    """

    namespace = models.CharField(max_length=255)
    scope = models.CharField(max_length=16)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "memory_slice_changes"
        verbose_name = "slice change counter"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "scope"], name="uix_memory_slice_changes"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.scope}={self.value}"


class RecallSnapshot(models.Model):
    """A slice's recall index as bytes, so that a cold process loads it instead of rebuilding.

    ``counter`` is the slice's change-counter value the index was current for and
    ``watermark`` (POSIX seconds, the writer's clock) when it began reading rows; a
    loader whose slice counter differs catches up with the rows changed since, as a
    warm process does. The payload holds tokens of memory text, so it is personal
    data: a trigger deletes a slice's snapshot whenever a row of the slice is
    hard-deleted (erasure, raw SQL, another writer), and the erasure purge and byte
    scan cover this table. See :mod:`memoryapp.snapshots`.
    """

    namespace = models.CharField(max_length=255)
    scope = models.CharField(max_length=16)
    counter = models.BigIntegerField()
    watermark = models.FloatField()
    rows = models.IntegerField()
    payload = models.BinaryField()
    written_at = models.FloatField()

    class Meta:
        db_table = "memory_recall_snapshots"
        verbose_name = "recall snapshot"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "scope"], name="uix_memory_recall_snapshots"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.scope}@{self.counter} ({self.rows} rows)"


def new_request_id() -> str:
    """An erasure request id: 32 random hex digits."""
    return secrets.token_hex(16)


class ErasureTarget(models.TextChoices):
    """What an erasure was asked to remove."""

    IDS = "ids", "ids"
    SUBJECT = "subject", "subject"
    NAMESPACE = "namespace", "namespace"
    EVERYTHING = "everything", "everything"
    REVIEW_ITEMS = "review_items", "review items"
    RETENTION = "retention", "retention (expired)"
    REPLAY = "replay", "replay after restore"


class ReceiptState(models.TextChoices):
    """How far an erasure has gone: recorded, rows deleted, or purged and verified — or
    stopped after its automatic attempts, waiting for a person (``needs_attention``)."""

    REQUESTED = "requested", "requested (no row deleted yet)"
    DELETED = "deleted", "deleted (purge or verification to come)"
    COMPLETE = "complete", "complete (purged and verified)"
    NEEDS_ATTENTION = "needs_attention", "needs attention (automatic attempts exhausted)"


# The states the worker retries by itself; a receipt needing attention is retried
# only when a person asks (``memory erase --retry``, the admin's "Retry now").
RETRIED_STATES = (ReceiptState.REQUESTED, ReceiptState.DELETED)
UNFINISHED_STATES = (*RETRIED_STATES, ReceiptState.NEEDS_ATTENTION)


class ErasureReceipt(models.Model):
    """Proof of one erasure (docs/behaviour.md §9): who, when, what, counts, purge and verification.

    The receipt is written before any row goes (``state`` ``requested``), so an
    erasure interrupted at any moment leaves a record that the worker or
    ``memory erase --retry`` completes. Until it is complete, ``sealed`` holds
    what finishing it needs — the request and the byte-scan fragments —
    encrypted with a key derived from ``MEMORYAPP_ERASURE_KEY`` (never in the
    database); it is emptied once the purge is verified.

    Never holds erased text in clear nor an unkeyed hash of it: the subject and
    namespace are kept as keyed HMACs (``MEMORYAPP_ERASURE_KEY``), the rows as
    their random ids and counts.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_request_id, editable=False)
    actor = models.CharField(max_length=255, default="", blank=True)
    target_kind = models.CharField(max_length=16, choices=ErasureTarget.choices)
    subject_hmac = models.CharField(max_length=64, null=True, blank=True)
    namespace_hmac = models.CharField(max_length=64, null=True, blank=True)
    key_id = models.CharField(max_length=16, default="", blank=True)
    include_authored = models.BooleanField(default=False)
    criteria = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    erased_ids = models.JSONField(default=dict, blank=True)
    authored = models.JSONField(default=dict, blank=True)
    databases = models.JSONField(default=list, blank=True)
    purge_method = models.CharField(max_length=255, default="", blank=True)
    purge_status = models.CharField(max_length=255, default="pending")
    vacuumed = models.BooleanField(default=False)
    verified = models.BooleanField(default=False)
    verification = models.TextField(default="", blank=True)
    caveats = models.TextField(default="", blank=True)
    details = models.JSONField(default=dict, blank=True)
    attempts = models.IntegerField(default=0)
    state = models.CharField(
        max_length=16, choices=ReceiptState.choices, default=ReceiptState.REQUESTED
    )
    sealed = models.TextField(null=True, blank=True, editable=False)
    claimed_by = models.CharField(max_length=128, default="", blank=True, editable=False)
    claimed_until = IsoDateTimeField(null=True, blank=True, editable=False)
    created_at = IsoDateTimeField(default=now)
    updated_at = IsoDateTimeField(default=now)
    purged_at = IsoDateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_erasure_receipts"
        ordering = ("created_at", "id")
        verbose_name = "erasure receipt"
        verbose_name_plural = "erasure receipts"
        indexes = [
            models.Index(fields=["subject_hmac"], name="ix_receipts_subject"),
            models.Index(fields=["namespace_hmac"], name="ix_receipts_namespace"),
            models.Index(fields=["purge_status"], name="ix_receipts_status"),
            models.Index(fields=["state", "created_at"], name="ix_receipts_state"),
        ]

    def __str__(self) -> str:
        # The state, not the purge status: "purged" alone read as done on an unverified receipt.
        return f"{self.target_kind} erasure {self.id} ({self.get_state_display()})"

    @property
    def purged(self) -> bool:
        """True once the vendor purge completed."""
        return self.purge_status == "purged"


class ExportVia(models.TextChoices):
    """Which interface an export was made through."""

    ADMIN = "admin", "admin"
    API = "api", "API"
    CLI = "cli", "command line"
    PYTHON = "python", "Python"


class ExportRecord(models.Model):
    """Audit record of one export (GDPR access or portability): who exported what, when.

    Like an erasure receipt, it names the subject and the namespace only as
    keyed HMACs (``MEMORYAPP_ERASURE_KEY``; ``key_id`` says which key), so a
    lookup by key finds it (:mod:`memoryapp.compliance.lookup`) while the table
    holds no subject key nor any exported text: the counts per part, the actor,
    the interface and the request id (API) are all it keeps.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_request_id, editable=False)
    actor = models.CharField(max_length=255, default="", blank=True)
    via = models.CharField(max_length=16, choices=ExportVia.choices)
    target_kind = models.CharField(max_length=32)  # subject, namespace, or subject+namespace
    subject_hmac = models.CharField(max_length=64, null=True, blank=True)
    namespace_hmac = models.CharField(max_length=64, null=True, blank=True)
    key_id = models.CharField(max_length=16, default="", blank=True)
    limited_to_grants = models.BooleanField(default=False)
    counts = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=64, default="", blank=True)
    # The account that exported (API clients): whose records a client may read back. A
    # name is reusable once its account is deleted; the foreign key is not (it is
    # cleared then, and the record stays for the audit).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = IsoDateTimeField(default=now)

    class Meta:
        db_table = "memory_export_records"
        ordering = ("created_at", "id")
        verbose_name = "export record"
        verbose_name_plural = "export records"
        indexes = [
            models.Index(fields=["subject_hmac"], name="ix_exports_subject"),
            models.Index(fields=["namespace_hmac"], name="ix_exports_namespace"),
            models.Index(fields=["created_at"], name="ix_exports_created"),
        ]

    def __str__(self) -> str:
        return f"{self.target_kind} export {self.id} ({self.via})"

    @property
    def total(self) -> int:
        """Rows the document held (memories, summaries, review items, events)."""
        return sum(
            n
            for part, n in (self.counts or {}).items()
            if part != "erasure_receipts" and isinstance(n, int) and not isinstance(n, bool)
        )
