"""Bounded retries of unfinished erasures, and the receipts a person must look at.

After each attempt that did not end verified, :func:`schedule` either sets when
the worker may try again (capped exponential backoff with jitter,
:mod:`memoryapp.rules.retries`) or — once ``MEMORYAPP_ERASURE_MAX_ATTEMPTS`` attempts
were made, or at once when the strongest purge left residue (repeating it
would only rewrite again what it rewrote) — moves the receipt to
``needs_attention``, which the worker no longer claims; a purge deferred by
``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL`` is due when the interval ends.
:func:`reopen` gives such a receipt back its phase when a person retries it.
:func:`status` counts what ``/healthz``, ``/metrics`` and the admin overview report.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Min, Q
from django.utils.dateparse import parse_datetime

from memoryapp import conf
from memoryapp.fields import now
from memoryapp.models import RETRIED_STATES, ErasureReceipt, ReceiptState
from memoryapp.rules import retries

_random = random.Random()


def next_delay(attempts: int) -> float:
    """Seconds before the attempt after ``attempts`` failed ones (jittered, capped)."""
    return retries.delay(
        attempts,
        base=conf.erasure_retry_delay(),
        cap=conf.erasure_retry_max_delay(),
        jitter=_random.random(),
    )


def schedule(r: ErasureReceipt, stamp: dt.datetime) -> str:
    """After a failed attempt (``r.attempts`` already counts it): back off, or stop.

    Sets the receipt's fields (the caller saves them) and answers ``"retry"`` or
    ``"attention"``. The claim is dropped either way: the receipt is due again at
    ``claimed_until``, or — needing attention — never automatically.
    """
    r.claimed_by = ""
    details = r.details if isinstance(r.details, dict) else {}
    r.details = details
    # The escalation's verdicts on this attempt (compliance/escalation.py): its
    # strongest purge left residue (retrying would repeat it), or a rewrite of every
    # tenant's rows must wait for the interval (a wait, not a failure: no backoff).
    stalled = details.pop("stalled", None)
    deferred = parse_datetime(str(details.pop("deferred_until", "") or ""))
    if deferred is not None and not stalled and r.state != ReceiptState.NEEDS_ATTENTION:
        r.claimed_until = max(deferred, stamp)
        details["next_attempt"] = r.claimed_until.isoformat()
        return "retry"
    if (
        stalled
        or r.state == ReceiptState.NEEDS_ATTENTION
        or retries.exhausted(r.attempts, limit=conf.erasure_max_attempts())
    ):
        if r.state != ReceiptState.NEEDS_ATTENTION:
            details["attention"] = {
                "since": stamp.isoformat(),
                "attempts": r.attempts,
                # What finishing it still needs: the deletion, or the purge.
                "phase": str(r.state),
            }
            if stalled:
                details["attention"]["reason"] = stalled.get("reason", "")
            r.state = ReceiptState.NEEDS_ATTENTION
        else:
            details.setdefault("attention", {})["attempts"] = r.attempts
        r.claimed_until = None
        details.pop("next_attempt", None)
        return "attention"
    r.claimed_until = stamp + dt.timedelta(seconds=next_delay(r.attempts))
    details["next_attempt"] = r.claimed_until.isoformat()
    return "retry"


def reopen(r: ErasureReceipt) -> None:
    """A person retries ``r``: a receipt needing attention goes back to its phase.

    Its attempts are kept (a further failure leaves it needing attention at once);
    the episode is kept in ``details["attention_history"]``.
    """
    if r.state != ReceiptState.NEEDS_ATTENTION:
        return
    details = r.details if isinstance(r.details, dict) else {}
    episode = details.pop("attention", {}) or {}
    phase = episode.get("phase")
    if phase not in RETRIED_STATES:
        done = all((details.get("aliases", {}).get(a) or {}).get("deleted_at") for a in r.databases)
        phase = ReceiptState.DELETED if done else ReceiptState.REQUESTED
    details.setdefault("attention_history", []).append({**episode, "reopened": now().isoformat()})
    r.details = details
    r.state = ReceiptState(phase)


@dataclass(frozen=True)
class Status:
    """What an operator must know about unfinished erasures (counts and ages only)."""

    pending: int  # requested or deleted: the worker still tries them
    needs_attention: int  # waiting for a person
    stale: int  # pending for longer than MEMORYAPP_ERASURE_STALE_AFTER
    oldest_pending: dt.datetime | None
    stale_after: float

    @property
    def problems(self) -> int:
        """Receipts someone should look at."""
        return self.needs_attention + self.stale

    def oldest_pending_age(self, at: dt.datetime | None = None) -> float:
        """Seconds since the oldest pending erasure was asked for (0 when none is)."""
        if self.oldest_pending is None:
            return 0.0
        return max(0.0, ((at or now()) - self.oldest_pending).total_seconds())


def status(using: str | None = None, *, receipts=None) -> Status:
    """One aggregate query over the receipts (its cost does not grow with their number
    beyond the index on ``state``); ``receipts`` narrows them (a scoped officer's)."""
    stale_after = conf.erasure_stale_after()
    cutoff = now() - dt.timedelta(seconds=stale_after)
    retried = Q(state__in=RETRIED_STATES)
    if receipts is None:
        receipts = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS)
    row = receipts.exclude(target_kind="").aggregate(
        pending=Count("pk", filter=retried),
        needs_attention=Count("pk", filter=Q(state=ReceiptState.NEEDS_ATTENTION)),
        stale=Count("pk", filter=retried & Q(created_at__lt=cutoff)),
        oldest=Min("created_at", filter=retried),
    )
    return Status(
        pending=row["pending"] or 0,
        needs_attention=row["needs_attention"] or 0,
        stale=row["stale"] or 0,
        oldest_pending=row["oldest"],
        stale_after=stale_after,
    )


def needing_attention(using: str | None = None, *, receipts=None):
    """The receipts a person must look at: needing attention, or pending too long
    (of ``receipts`` when given: a scoped officer's)."""
    cutoff = now() - dt.timedelta(seconds=conf.erasure_stale_after())
    if receipts is None:
        receipts = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS)
    qs = receipts.exclude(target_kind="")
    return qs.filter(
        Q(state=ReceiptState.NEEDS_ATTENTION) | Q(state__in=RETRIED_STATES, created_at__lt=cutoff)
    ).order_by("created_at", "id")


def is_stale(r: ErasureReceipt, at: dt.datetime | None = None) -> bool:
    """``r`` is still pending longer than ``MEMORYAPP_ERASURE_STALE_AFTER`` after it was asked."""
    if r.state not in RETRIED_STATES:
        return False
    return ((at or now()) - r.created_at).total_seconds() > conf.erasure_stale_after()
