"""The erasure worker: completes unfinished receipts off the request path.

``manage.py memory worker`` runs :func:`run`. Each round claims the receipts that
are due (:func:`claim`), finishes the deletion of those a dead process left
``requested``, then purges and verifies all of them with one vendor purge per
database — many erasures, one rewrite. Several workers may run, on several
machines: a claim is a lease written in the receipt (``claimed_by``,
``claimed_until``), taken under ``SELECT … FOR UPDATE SKIP LOCKED`` on
PostgreSQL (SQLite serialises writers anyway). A worker killed at any moment
leaves its receipts claimed until the lease ends — at once for a worker
restarted on the same host, which sees the old process is gone. A receipt that
could not be completed is retried later, backing off with its attempts.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Q

from .. import conf
from ..fields import now
from ..models import UNFINISHED_STATES, ErasureReceipt, ReceiptState
from .engine import resume, worker_name
from .purging import finish, unfinished

logger = logging.getLogger(__name__)

CLAIM_LIMIT = 50  # receipts purged together in one round
MAX_BACKOFF = 600.0


def holder_gone(claimed_by: str) -> bool:
    """True when the claim was made by a process of this host that no longer runs."""
    host, _, pid = claimed_by.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def backoff(attempts: int) -> float:
    """Seconds to wait before attempt ``attempts + 1``: 0, then 5 s doubling up to 10 min."""
    return 0.0 if attempts <= 0 else min(5.0 * 2 ** (attempts - 1), MAX_BACKOFF)


def _taken_over(using: str, at: dt.datetime) -> list[str]:
    """Receipts still leased to a process of this host that has died (kill -9, a crash)."""
    leased = ErasureReceipt.objects.using(using).filter(
        state__in=UNFINISHED_STATES, claimed_until__gt=at
    )
    rows = leased.exclude(claimed_by="").values_list("pk", "claimed_by")
    return [pk for pk, holder in rows if holder_gone(holder)]


def claim(
    *, using: str = DEFAULT_DB_ALIAS, worker: str | None = None, limit: int = CLAIM_LIMIT
) -> list[ErasureReceipt]:
    """Lease up to ``limit`` due unfinished receipts to ``worker``, oldest first.

    Due: never claimed, or ``claimed_until`` has passed — the end of a lease or of
    a failed attempt's backoff — or leased to a dead process of this host.
    """
    worker = worker or worker_name()
    at = now()
    lease = dt.timedelta(seconds=conf.erasure_worker_lease())
    due = Q(claimed_until__isnull=True) | Q(claimed_until__lte=at)
    dead = _taken_over(using, at)
    if dead:
        due |= Q(pk__in=dead)
    with transaction.atomic(using=using):
        qs = unfinished(using).filter(due)
        if connections[using].features.has_select_for_update_skip_locked:
            # Rows another worker is claiming this instant are skipped, not waited for.
            qs = qs.select_for_update(skip_locked=True)
        chosen = list(qs[:limit])
        for r in chosen:
            r.claimed_by, r.claimed_until = worker, at + lease
        ErasureReceipt.objects.using(using).filter(pk__in=[r.pk for r in chosen]).update(
            claimed_by=worker, claimed_until=at + lease
        )
    return chosen


def release(receipts: list[ErasureReceipt], *, using: str, worker: str) -> None:
    """Drop this worker's claim on receipts it could not complete.

    Each is retried once its backoff is over (``claimed_until`` marks the moment).
    """
    at = now()
    for r in receipts:
        ErasureReceipt.objects.using(using).filter(pk=r.pk, claimed_by=worker).update(
            claimed_by="", claimed_until=at + dt.timedelta(seconds=backoff(r.attempts))
        )


def run_once(
    *, using: str | None = None, worker: str | None = None, limit: int = CLAIM_LIMIT
) -> list[ErasureReceipt]:
    """One round: claim what is due, finish deletions, purge and verify. The receipts handled."""
    alias = using or DEFAULT_DB_ALIAS
    worker = worker or worker_name()
    claimed = claim(using=alias, worker=worker, limit=limit)
    if not claimed:
        return []
    ready: list[ErasureReceipt] = []
    try:
        for r in claimed:
            if r.state == ReceiptState.REQUESTED:
                try:
                    resume(r, purge=False)
                except Exception:  # recorded on the receipt; the others go on
                    logger.warning("erasure %s: deletion failed", r.pk, exc_info=True)
                    continue
            if r.state == ReceiptState.DELETED:
                ready.append(r)
        finish(ready, using=alias)
    finally:
        # Completed receipts dropped their claim when recorded; the rest back off.
        release(
            [r for r in claimed if r.state != ReceiptState.COMPLETE], using=alias, worker=worker
        )
    return claimed


def run(
    *,
    using: str | None = None,
    poll: float = 2.0,
    once: bool = False,
    stop: threading.Event | None = None,
    report: Callable[[ErasureReceipt], None] | None = None,
) -> int:
    """Complete receipts until ``stop`` is set (``once``: until none is due). The count done."""
    stop = stop or threading.Event()
    worker = worker_name()
    total = 0
    while not stop.is_set():
        try:
            handled = run_once(using=using, worker=worker)
        except Exception:  # a lost connection, a locked database: try again next round
            logger.warning("erasure worker round failed", exc_info=True)
            handled = []
            for alias in connections:
                connections[alias].close_if_unusable_or_obsolete()
        for r in handled:
            total += 1
            if report is not None:
                report(r)
        if not handled:
            if once:
                break
            stop.wait(poll)
    return total
