"""Erasure receipts and export records: the proof of what was removed or handed out."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from memoryapp.fields import IsoDateTimeField, now


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
    # The tenant the erasure named (the subject key's, else the namespace's; see
    # compliance.desk_scope): tenant-scoped officers see the receipts of their tenants.
    # NULL: no single tenant (everything, retention, ids across tenants) or unknown.
    tenant = models.CharField(max_length=255, null=True, blank=True)
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
            models.Index(fields=["tenant", "created_at"], name="ix_receipts_tenant"),
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
    # As on a receipt: the tenant exported (NULL: unknown), for tenant-scoped officers.
    tenant = models.CharField(max_length=255, null=True, blank=True)
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
            models.Index(fields=["tenant", "created_at"], name="ix_exports_tenant"),
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


class CopyCheck(models.Model):
    """One server's check of one erasure (docs/compliance.md, "Every copy"): its outcome.

    A row per configured server (the primary, each replica alias) and receipt. It is
    created ``not_checked`` when the primary's purge is verified and written by whoever
    checks that server: the worker (files read locally or through SQL), or
    ``manage.py memory verifier`` run beside it, which reports here, on the primary.
    ``sealed`` holds the fragments of the erased values that this server's scan looks
    for, encrypted under ``MEMORYAPP_ERASURE_KEY`` as the receipt's own, until the
    server is verified; ``lsn`` is the primary's WAL position after the purge, which a
    replica must have replayed before its files prove anything. ``claimed_by`` and
    ``claimed_until`` say which checker is scanning the server for this receipt and until
    when (:func:`memoryapp.compliance.copies.claim`): no two scan it at once, and a claim
    whose checker died expires.
    """

    receipt = models.ForeignKey(
        ErasureReceipt, on_delete=models.CASCADE, related_name="copy_checks"
    )
    server = models.CharField(max_length=64)
    role = models.CharField(max_length=16)
    system_identifier = models.CharField(max_length=32, default="", blank=True)
    outcome = models.CharField(max_length=32)
    reason = models.TextField(default="", blank=True)
    method = models.CharField(max_length=16, default="", blank=True)
    lsn = models.CharField(max_length=32, default="", blank=True)
    facts = models.JSONField(default=dict, blank=True)
    sealed = models.TextField(null=True, blank=True, editable=False)
    attempts = models.IntegerField(default=0)
    requested_at = IsoDateTimeField(default=now)
    checked_at = IsoDateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, default="", blank=True)
    claimed_until = IsoDateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_erasure_copy_checks"
        ordering = ("receipt", "id")
        verbose_name = "erasure copy check"
        verbose_name_plural = "erasure copy checks"
        constraints = [
            models.UniqueConstraint(fields=["receipt", "server"], name="uix_copy_check_server"),
        ]
        indexes = [
            models.Index(fields=["outcome", "requested_at"], name="ix_copy_checks_outcome"),
        ]

    def __str__(self) -> str:
        return f"{self.server} ({self.role}) for erasure {self.receipt_id}: {self.outcome}"
