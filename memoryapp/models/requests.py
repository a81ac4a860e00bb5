"""Data-subject requests (GDPR Art. 15-21): the request, its history, and what was done for it.

A request names its subject by keyed HMAC (``subject_hmac``, found by
:mod:`memoryapp.compliance.lookup`) and, while it is open, holds the subject key and
the namespaces it covers encrypted (``sealed``, like an unfinished erasure), because
exporting or erasing needs them in clear. Closing it (answered or refused) empties
``sealed``: a closed request and its history hold no subject key.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from memoryapp.fields import IsoDateTimeField, now
from memoryapp.models.compliance import ErasureReceipt, ExportRecord, new_request_id


class SubjectRight(models.TextChoices):
    """The right a data subject exercises."""

    ACCESS = "access", "access (Art. 15)"
    PORTABILITY = "portability", "portability (Art. 20)"
    ERASURE = "erasure", "erasure (Art. 17)"
    RECTIFICATION = "rectification", "rectification (Art. 16)"
    OBJECTION = "objection", "objection or restriction (Art. 18, 21)"


class RequestStatus(models.TextChoices):
    """Where a request stands: open, in progress, then answered or refused (closed)."""

    OPEN = "open", "open"
    IN_PROGRESS = "in_progress", "in progress"
    ANSWERED = "answered", "answered"
    REFUSED = "refused", "refused"


OPEN_STATUSES = (RequestStatus.OPEN, RequestStatus.IN_PROGRESS)
CLOSED_STATUSES = (RequestStatus.ANSWERED, RequestStatus.REFUSED)


class SubjectRequest(models.Model):
    """One data-subject request, from intake to the answer.

    ``due_on`` is the received date plus one month plus ``extension_months``
    (Art. 12(3): at most two more, with ``extension_reason``); the service
    (:mod:`memoryapp.compliance.desk`) keeps it consistent.
    """

    id = models.CharField(primary_key=True, max_length=32, default=new_request_id, editable=False)
    right = models.CharField(max_length=16, choices=SubjectRight.choices)
    status = models.CharField(
        max_length=16, choices=RequestStatus.choices, default=RequestStatus.OPEN
    )
    received_on = models.DateField()
    due_on = models.DateField()
    extension_months = models.PositiveSmallIntegerField(default=0)
    extension_reason = models.TextField(default="", blank=True)
    outcome = models.TextField(default="", blank=True)  # the answer's summary or refusal reason
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    notes = models.TextField(default="", blank=True)
    # Chosen by the officer to tell requests apart without the key (a ticket number, the
    # person's name): searchable in the list; the key is replaced in it, as in notes.
    reference = models.CharField(max_length=200, default="", blank=True)
    # The tenant of the subject key: its namespace up to its last "/" ("acme/" for
    # acme/alice, "" for a key without one). Kept once closed: it names the tenant, not
    # the person, and tenant-scoped officers (DeskGrant) see requests by it.
    tenant = models.CharField(max_length=255, default="", blank=True)
    subject_hmac = models.CharField(max_length=64)
    key_id = models.CharField(max_length=16, default="", blank=True)
    namespace_count = models.PositiveIntegerField(default=0)
    sealed = models.TextField(null=True, blank=True, editable=False)
    exports = models.ManyToManyField(ExportRecord, blank=True, related_name="subject_requests")
    receipts = models.ManyToManyField(ErasureReceipt, blank=True, related_name="subject_requests")
    created_by = models.CharField(max_length=255, default="", blank=True)
    created_at = IsoDateTimeField(default=now)
    updated_at = IsoDateTimeField(default=now)
    closed_at = IsoDateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_subject_requests"
        ordering = ("due_on", "created_at", "id")
        verbose_name = "subject request"
        verbose_name_plural = "subject requests"
        indexes = [
            models.Index(fields=["subject_hmac"], name="ix_requests_subject"),
            models.Index(fields=["status", "due_on"], name="ix_requests_due"),
            models.Index(fields=["tenant", "due_on"], name="ix_requests_tenant"),
        ]

    def __str__(self) -> str:
        return f"{self.get_right_display()} request {self.id} ({self.get_status_display()})"

    @property
    def is_open(self) -> bool:
        """True until the request is answered or refused."""
        return self.status in OPEN_STATUSES


class RequestAction(models.TextChoices):
    """What a history entry records."""

    CREATED = "created", "created"
    ASSIGNED = "assigned", "assigned"
    STARTED = "started", "started"
    EXTENDED = "extended", "deadline extended"
    NOTE = "note", "note added"
    EXPORTED = "exported", "exported"
    ERASED = "erased", "erased"
    ANSWERED = "answered", "answered"
    REFUSED = "refused", "refused"


class SubjectRequestEvent(models.Model):
    """One action on a request, with its actor; the detail never names the subject."""

    request = models.ForeignKey(SubjectRequest, on_delete=models.CASCADE, related_name="history")
    action = models.CharField(max_length=16, choices=RequestAction.choices)
    actor = models.CharField(max_length=255, default="", blank=True)
    detail = models.TextField(default="", blank=True)
    at = IsoDateTimeField(default=now)

    class Meta:
        db_table = "memory_subject_request_events"
        ordering = ("at", "id")
        verbose_name = "subject request event"
        verbose_name_plural = "subject request events"

    def __str__(self) -> str:
        return f"{self.get_action_display()} by {self.actor or '?'}"


class DeskGrant(models.Model):
    """A tenant whose data-subject requests one staff user handles.

    The notion of the API clients' namespace grants, for staff at the desk: ``namespace``
    is an exact tenant or a prefix ending in ``/`` (``acme/`` covers ``acme/`` and
    ``acme/eu/``). A user with no grant row handles every tenant's requests; one with
    grants sees and acts on the requests of the tenants they cover only
    (:func:`memoryapp.compliance.desk_scope.visible_requests`).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="desk_grants"
    )
    namespace = models.CharField(
        max_length=255,
        blank=True,
        help_text="A tenant prefix ending in '/' (acme/), or an exact tenant; "
        "'' is keys without a tenant.",
    )
    created_at = IsoDateTimeField(default=now)

    class Meta:
        db_table = "memory_desk_grants"
        ordering = ("user", "namespace")
        verbose_name = "desk tenant grant"
        verbose_name_plural = "desk tenant grants"
        constraints = [
            models.UniqueConstraint(fields=["user", "namespace"], name="uix_desk_grant_user_ns")
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.namespace or '(no tenant)'}"

    @property
    def is_prefix(self) -> bool:
        """True when the grant covers every tenant starting with it."""
        return self.namespace.endswith("/")
