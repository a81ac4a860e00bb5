"""The erasure worker: completes unfinished receipts off the request path.

``manage.py memory worker`` runs :func:`run`. Each round claims the receipts that
are due (:func:`claim`), finishes the deletion of those a dead process left
``requested``, then purges and verifies all of them with one vendor purge per
database — many erasures, one rewrite. A receipt is leased to the process that
records it from its first insert (:func:`memoryapp.compliance.engine.execute`), so
a worker never takes one whose creator is still deleting it; a creator that hands
it over (erasure worker on) drops the lease once its deletion has committed.
Several workers may run, on several machines: a claim is a lease written in the
receipt (``claimed_by``, ``claimed_until``), taken under ``SELECT … FOR UPDATE SKIP LOCKED`` on
PostgreSQL (SQLite serialises writers anyway). A worker killed at any moment
leaves its receipts claimed until the lease ends — at once for a worker
restarted on the same host, which sees the old process is gone (its pid no longer
runs, or runs a process started later: a restarted container reuses the pid). A receipt that
could not be completed is retried later, backing off with its attempts.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Q

from memoryapp import conf
from memoryapp.compliance import attention, copies
from memoryapp.compliance.engine import resume
from memoryapp.compliance.leases import holder_gone, worker_name
from memoryapp.compliance.purging import finish, unfinished
from memoryapp.compliance.receipts import outcome_words
from memoryapp.fields import now
from memoryapp.models import UNFINISHED_STATES, ErasureReceipt, ReceiptState
from memoryapp.rules.wording import plural

logger = logging.getLogger(__name__)

CLAIM_LIMIT = 50  # receipts purged together in one round


def backoff(attempts: int) -> float:
    """Seconds to wait before attempt ``attempts + 1``: 0, then ``MEMORYAPP_ERASURE_RETRY_DELAY``
    doubling up to ``MEMORYAPP_ERASURE_RETRY_MAX_DELAY``, jittered
    (:mod:`memoryapp.rules.retries`)."""
    return attention.next_delay(attempts)


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
        qs = unfinished(using, automatic=True).filter(due)
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


def release(
    receipts: list[ErasureReceipt],
    *,
    using: str,
    worker: str,
    tried: dict[str, int] | None = None,
) -> None:
    """Drop this worker's claim on receipts it could not complete, scheduling their retry.

    A receipt whose attempt was recorded (:func:`purging.finish` scheduled it and
    dropped the claim) is left as it is. One whose attempt ended in an exception
    before anything was recorded counts that attempt here (``tried``: its attempts
    when claimed), so an error that repeats still reaches the limit: it backs off,
    then needs attention.
    """
    at = now()
    for r in receipts:
        if r.claimed_by != worker:
            continue  # its attempt was recorded, and its retry scheduled with it
        if tried is not None and r.attempts == tried.get(r.pk, r.attempts):
            r.attempts += 1  # the attempt ended before anything recorded it
        attention.schedule(r, at)
        ErasureReceipt.objects.using(using).filter(pk=r.pk, claimed_by=worker).update(
            claimed_by=r.claimed_by,
            claimed_until=r.claimed_until,
            attempts=r.attempts,
            state=r.state,
            details=r.details,
        )


@dataclass(frozen=True)
class Change:
    """What one round did to one receipt, for the worker's log: one line per change."""

    receipt: ErasureReceipt
    before: str  # its state when claimed
    failed: bool  # the attempt did not complete it

    @property
    def needs_attention(self) -> bool:
        """This round stopped the automatic retries: a person must act."""
        return self.receipt.state == ReceiptState.NEEDS_ATTENTION

    def line(self) -> str:
        """The log line: ids, states, counts and statuses — never an erased value."""
        r = self.receipt
        was = f" (was {self.before})" if str(r.state) != self.before else ""
        if r.state == ReceiptState.COMPLETE:
            return f"receipt {r.pk}: complete{was}, {outcome_words(r)}"
        why = r.purge_status if not r.purged else "purged, not verified"
        if self.needs_attention:
            return (
                f"receipt {r.pk}: needs_attention{was} after "
                f"{plural(r.attempts, 'attempt', 'attempts')} ({why}); automatic retries "
                f"stopped: run 'manage.py memory erase --retry {r.pk}' "
                '(or with --method rewrite), or the receipt\'s "Retry now" in the admin'
            )
        wait = ""
        if r.claimed_until is not None:
            seconds = max(0.0, (r.claimed_until - now()).total_seconds())
            wait = f"; attempt {r.attempts + 1} in {seconds:.0f} s"
        return f"receipt {r.pk}: {r.state}{was}, attempt {r.attempts} failed ({why}){wait}"


def _failed_once(r: ErasureReceipt, exc: BaseException, seen: set[tuple[str, str]]) -> None:
    """Log an unexpected exception once per receipt and kind: its class and where it was
    raised, never its message (it may quote SQL values) nor a traceback per round."""
    key = (r.pk, type(exc).__name__)
    if key in seen:
        return
    seen.add(key)
    logger.warning(
        "erasure %s: attempt failed unexpectedly (%s at %s); backing off",
        r.pk,
        type(exc).__name__,
        _origin(exc),
    )


def _origin(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of ``exc``'s traceback (no values)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "unknown"
    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"


def run_once(
    *,
    using: str | None = None,
    worker: str | None = None,
    limit: int = CLAIM_LIMIT,
    report: Callable[[Change], None] | None = None,
    seen: set[tuple[str, str]] | None = None,
) -> list[ErasureReceipt]:
    """One round: claim what is due, finish deletions, purge and verify. The receipts handled.

    ``report`` hears of each receipt whose state changed or whose attempt failed;
    ``seen`` remembers which unexpected errors were already logged (per worker).
    """
    alias = using or DEFAULT_DB_ALIAS
    worker = worker or worker_name()
    seen = set() if seen is None else seen
    claimed = claim(using=alias, worker=worker, limit=limit)
    if not claimed:
        return []
    before = {r.pk: str(r.state) for r in claimed}
    tried = {r.pk: r.attempts for r in claimed}
    try:
        _work_on(claimed, alias, seen)
    finally:
        # Completed receipts dropped their claim when recorded; the rest back off.
        release(
            [r for r in claimed if r.state != ReceiptState.COMPLETE],
            using=alias,
            worker=worker,
            tried=tried,
        )
    if report is not None:
        _report_changes(claimed, before, report)
    return claimed


def _work_on(claimed: list[ErasureReceipt], alias: str, seen: set[tuple[str, str]]) -> None:
    """Finish the claimed receipts' deletions, then purge and verify those deleted.

    A failure is recorded on its receipt (each logged once per worker) and the
    others go on.
    """
    ready: list[ErasureReceipt] = []
    for r in claimed:
        if r.state == ReceiptState.REQUESTED:
            try:
                resume(r, purge=False)
            except Exception as exc:  # recorded on the receipt; the others go on
                _failed_once(r, exc, seen)
                continue
        if r.state == ReceiptState.DELETED:
            ready.append(r)
    try:
        finish(ready, using=alias)
    except Exception as exc:  # each receipt backs off (see release); one line each
        for r in ready:
            _failed_once(r, exc, seen)


def _report_changes(claimed, before: dict[str, str], report: Callable[[Change], None]) -> None:
    """Tell ``report`` of each receipt whose state changed or that is still unfinished."""
    for r in claimed:
        failed = r.state != ReceiptState.COMPLETE
        if failed or str(r.state) != before[r.pk]:
            report(Change(r, before[r.pk], failed))


def run(
    *,
    using: str | None = None,
    poll: float = 2.0,
    once: bool = False,
    stop: threading.Event | None = None,
    report: Callable[[Change], None] | None = None,
) -> int:
    """Complete receipts until ``stop`` is set (``once``: until none is due). The count done.

    A round that fails as a whole (a lost connection, a locked database) is logged
    once when it starts failing and once when it recovers — not at every round — and
    the rounds back off meanwhile, up to a minute apart.
    """
    stop = stop or threading.Event()
    worker = worker_name()
    total = 0
    seen: set[tuple[str, str]] = set()
    failing: str | None = None
    failures = 0
    while not stop.is_set():
        try:
            handled = run_once(using=using, worker=worker, report=report, seen=seen)
            # The copies on other servers not checked yet (a replica that had not replayed).
            copies.check_pending(using=using or DEFAULT_DB_ALIAS)
        except Exception as exc:
            failures += 1
            kind = type(exc).__name__
            if kind != failing:
                logger.warning(
                    "erasure worker round failed (%s at %s); retrying with backoff",
                    kind,
                    _origin(exc),
                )
                failing = kind
            for alias in connections:
                connections[alias].close_if_unusable_or_obsolete()
            if once:
                break
            stop.wait(min(poll * 2 ** min(failures, 5), max(poll, 60.0)))
            continue
        if failing is not None:
            logger.warning("erasure worker rounds work again after %d failed", failures)
            failing, failures = None, 0
        total += len(handled)
        if not handled:
            if once:
                break
            stop.wait(poll)
    return total
