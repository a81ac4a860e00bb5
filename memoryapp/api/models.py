"""The API's own tables: namespace grants of API clients and idempotent erasure requests."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class NamespaceGrant(models.Model):
    """What one API user may do in a namespace (an exact key, or a prefix ending in ``/``).

    A non-staff user sees only the namespaces some grant of theirs covers; any
    other namespace answers 404, as if it did not exist. ``acme/`` covers
    ``acme/web`` and ``acme/alice`` (not ``acme`` itself); ``acme/web`` covers
    only itself; ``""`` is the single-tenant namespace.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="namespace_grants"
    )
    namespace = models.CharField(
        max_length=255,
        blank=True,
        help_text="An exact namespace, or a prefix ending in '/'.",
    )
    can_read = models.BooleanField(default=True, help_text="List, read, recall and export.")
    can_write = models.BooleanField(
        default=False, help_text="Save and delete memories, summaries, crystallize, review."
    )
    can_erase = models.BooleanField(
        default=False, help_text="Erase for good, purge the review queue, wipe."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("user", "namespace")
        verbose_name = "namespace grant"
        verbose_name_plural = "namespace grants"
        constraints = [
            models.UniqueConstraint(fields=["user", "namespace"], name="uix_grant_user_namespace")
        ]

    def __str__(self) -> str:
        rights = [r for r, on in self.rights().items() if on]
        return f"{self.user} → {self.namespace or '(default)'}: {', '.join(rights) or 'none'}"

    @property
    def is_prefix(self) -> bool:
        """True when the grant covers every namespace starting with it."""
        return self.namespace.endswith("/")

    def covers(self, namespace: str) -> bool:
        """Whether this grant applies to ``namespace``."""
        if self.is_prefix:
            return namespace.startswith(self.namespace)
        return namespace == self.namespace

    def rights(self) -> dict[str, bool]:
        """The grant's rights by name (``read``, ``write``, ``erase``)."""
        return {"read": self.can_read, "write": self.can_write, "erase": self.can_erase}


class ErasureRequest(models.Model):
    """An erasure asked for through the API, so a retry with the same key replays its receipt.

    ``fingerprint`` is a keyed HMAC of the request (it names a subject, which is
    personal data): never the request in clear, never an unkeyed hash of it.
    ``receipt_id`` stays empty while the erasure runs.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="erasure_requests"
    )
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    fingerprint = models.CharField(max_length=128)
    receipt_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")
        verbose_name = "API erasure request"
        verbose_name_plural = "API erasure requests"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="uix_erasure_request_key",
            )
        ]
        indexes = [models.Index(fields=["receipt_id"], name="ix_erasure_request_receipt")]

    def __str__(self) -> str:
        return f"erasure by {self.user} → receipt {self.receipt_id or '(running)'}"
