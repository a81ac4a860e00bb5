"""The API's own tables: namespace grants of API clients, their tokens and idempotent
erasure requests."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import Q

KEY_BYTES = 20
"""Random bytes of a token: 40 hex characters, as DRF's tokens were (existing keys stay valid)."""
PREFIX_LENGTH = 8
"""Leading characters of a token kept in clear, to tell tokens apart in the admin."""
LAST_USED_RESOLUTION = dt.timedelta(seconds=60)
"""``ApiToken.last_used_at`` is written at most this often per token."""


def new_key() -> str:
    """A fresh clear token (160 random bits, hexadecimal)."""
    return secrets.token_hex(KEY_BYTES)


def digest_of(key: str) -> str:
    """The stored form of a clear token: its SHA-256, hexadecimal.

    A fast unsalted hash suffices here, unlike for passwords: a token is 160 random
    bits, so a stolen digest cannot be reversed by guessing, and slow hashing
    would cost every API request its time. Unsalted, the digest is the lookup key.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


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

    ``receipt_id`` is chosen when the request is claimed, before the erasure
    records its receipt under that id: a crash at any later point leaves the key
    bound to the one receipt its erasure records (or will record), never to none.
    ``holder`` (``host:pid``) and ``held_until`` say which process runs the request
    and until when its claim holds; a retry finding the receipt missing waits (409)
    only while that process lives, and takes the request over once it is gone.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="erasure_requests"
    )
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    fingerprint = models.CharField(max_length=128)
    receipt_id = models.CharField(max_length=64, blank=True, default="")
    holder = models.CharField(max_length=255, blank=True, default="")
    held_until = models.DateTimeField(null=True, blank=True)
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
        return f"erasure by {self.user} → receipt {self.receipt_id or '(none)'}"


class ApiClient(get_user_model()):  # type: ignore[misc]
    """An API client as the admin shows it: a non-staff user, its grants and its tokens.

    A proxy of the user model (no table of its own): :mod:`memoryapp.api.admin` lists
    only non-staff users here, one page each.
    """

    class Meta:
        proxy = True
        verbose_name = "API client"
        verbose_name_plural = "API clients"


class ApiToken(models.Model):
    """One API token of a client: only its SHA-256 digest and a short prefix are stored.

    The clear token is shown once, when :meth:`issue` makes it; afterwards the
    prefix tells tokens apart. ``last_used_at`` is refreshed at most once a
    :data:`LAST_USED_RESOLUTION` (a write per request would double the statements
    of the hot path). Revoking a token deletes its row.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ("user", "-created_at", "-id")
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user) -> tuple[ApiToken, str]:
        """Create a token for ``user``; return the row and the clear token (shown once)."""
        key = new_key()
        token = cls.objects.create(user=user, digest=digest_of(key), prefix=key[:PREFIX_LENGTH])
        return token, key
