"""Lookup by subject key without storing it: the receipts, export records and requests naming it.

Receipts, export records and data-subject requests name a subject only by its keyed HMAC
(:func:`~.receipts.keyed_hmac`). A lookup computes the HMAC of the typed key
under the current key and every fallback (``MEMORYAPP_ERASURE_KEY_FALLBACKS``,
so records written before a key rotation are found too) and matches on those;
the key itself is never stored, logged, nor put in a URL by the interfaces
that call this (admin POST form, API POST body, ``manage.py memory lookup``).
A closed request has dropped its sealed key but keeps its HMAC, so it is found too.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from memoryapp.compliance.receipts import keyed_hmac, known_keys
from memoryapp.models import ErasureReceipt, ExportRecord, SubjectRequest


@dataclass(frozen=True)
class Found:
    """What a lookup found: receipts and export records oldest first, requests by
    received date (open and closed alike)."""

    receipts: QuerySet[ErasureReceipt]
    exports: QuerySet[ExportRecord]
    requests: QuerySet[SubjectRequest]

    @property
    def empty(self) -> bool:
        """True when nothing names the key."""
        return not (self.receipts.exists() or self.exports.exists() or self.requests.exists())


def hmacs_of(value: str) -> list[str]:
    """The keyed HMACs of ``value`` under the current key and each fallback key."""
    return [keyed_hmac(value, key) for key in known_keys().values()]


def lookup(
    subject: str,
    *,
    receipts: QuerySet[ErasureReceipt] | None = None,
    exports: QuerySet[ExportRecord] | None = None,
    requests: QuerySet[SubjectRequest] | None = None,
    using: str | None = None,
) -> Found:
    """Every erasure receipt, export record and subject request naming ``subject`` (by HMAC).

    Args:
        subject: a subject (user) key, as typed. Never stored.
        receipts, exports, requests: the querysets to search (a caller narrows
            them to what its user may see, e.g. an API client's own erasures, or
            ``SubjectRequest.objects.none()`` for a user who may not see requests);
            default: all of them.
        using: the database alias (receipts, records and requests live on the default).

    Raises:
        ValueError: an empty key (it would match nothing meaningful).
    """
    if not subject or not subject.strip():
        raise ValueError("a subject key is needed")
    alias = using or "default"
    wanted = hmacs_of(subject)
    if receipts is None:
        receipts = ErasureReceipt.objects.using(alias).all()
    if exports is None:
        exports = ExportRecord.objects.using(alias).all()
    if requests is None:
        requests = SubjectRequest.objects.using(alias).all()
    return Found(
        receipts=receipts.filter(subject_hmac__in=wanted).order_by("created_at", "id"),
        exports=exports.filter(subject_hmac__in=wanted).order_by("created_at", "id"),
        requests=requests.filter(subject_hmac__in=wanted)
        .select_related("assignee")
        .order_by("received_on", "created_at", "id"),
    )
