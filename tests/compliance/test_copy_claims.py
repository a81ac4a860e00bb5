"""Copy checks are claimed before a server is scanned: never two checkers on one (receipt, server).

Both vendors. The scan itself is replaced by a recorder (what it checks is the business of
tests/replicas/test_erasure_copies.py, on a real standby); the rows and the claims are the
real ones, taken by concurrent threads released together by a barrier.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connection

from memoryapp.compliance import copies, copy_scan
from memoryapp.models import CopyCheck, ErasureReceipt, ErasureTarget
from memoryapp.rules.outcomes import Outcome

pytestmark = pytest.mark.django_db(transaction=True)

REPLICA = "replica_claims"


@pytest.fixture
def pending(settings):
    """Three erasures, each with its replica's check not done yet."""
    settings.MEMORYAPP_REPLICA_DATABASES = [REPLICA]
    rows = []
    for _ in range(3):
        receipt = ErasureReceipt.objects.create(
            target_kind=ErasureTarget.NAMESPACE, purge_status="done", verified=True
        )
        rows.append(
            CopyCheck.objects.create(
                receipt=receipt, server=REPLICA, role="replica", outcome=Outcome.NOT_CHECKED
            )
        )
    return rows


class RecordingScan:
    """Stands in for :func:`copy_scan.check`: records each scan, takes a while, verifies."""

    def __init__(self, seconds: float = 0.3):
        self.seconds = seconds
        self.scans: list[tuple[str, int]] = []  # (thread, erased_ids marker)
        self.lock = threading.Lock()

    def __call__(self, alias, **kwargs):
        with self.lock:
            self.scans.append((threading.current_thread().name, alias))
        time.sleep(self.seconds)
        return copy_scan.Check(Outcome.VERIFIED_BY_SCAN, method="sql", role="replica")


def in_threads(n: int, body) -> list:
    """Run ``body()`` in ``n`` threads released at once; their results (or exceptions)."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def run(i):
        try:
            barrier.wait(timeout=30)
            results[i] = body()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,), name=f"checker-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_racing_claims_let_exactly_one_checker_through(pending):
    row = pending[0]
    for round_ in range(5):
        won = in_threads(4, lambda: copies.claim(row, copies.checker_name()))
        assert all(isinstance(w, bool) for w in won), won
        assert won.count(True) == 1, (round_, won)
        CopyCheck.objects.filter(pk=row.pk).update(claimed_by="", claimed_until=None)


def test_two_workers_racing_scan_each_copy_once(pending, monkeypatch):
    scan = RecordingScan()
    monkeypatch.setattr(copy_scan, "check", scan)
    settled = in_threads(2, copies.check_pending)
    assert all(isinstance(n, int) for n in settled), settled
    assert sum(settled) == len(pending)
    assert len(scan.scans) == len(pending), scan.scans  # never the same row twice
    for row in CopyCheck.objects.filter(pk__in=[r.pk for r in pending]):
        assert row.outcome == Outcome.VERIFIED_BY_SCAN and row.attempts == 1
        assert (row.claimed_by, row.claimed_until) == ("", None)  # released with the result


def test_a_claimed_row_is_skipped_until_its_claim_expires_then_taken_over(
    pending, monkeypatch, settings
):
    settings.MEMORYAPP_COPY_CLAIM_SECONDS = 1
    scan = RecordingScan(seconds=0)
    monkeypatch.setattr(copy_scan, "check", scan)
    row = pending[0]
    # A worker claimed it and was killed mid-scan: its claim stays behind.
    dead = "host:4242:killed"
    assert copies.claim(row, dead)
    assert not copies.claim(row, "host:1:another")  # held: nobody else takes it
    assert copies.check_pending() == len(pending) - 1
    assert [alias for _, alias in scan.scans] == [REPLICA] * (len(pending) - 1)
    row.refresh_from_db()
    assert row.outcome == Outcome.NOT_CHECKED and row.claimed_by == dead
    # Once the claim has expired, the next round takes the row over and settles it.
    time.sleep(1.1)
    assert copies.check_pending() == 1
    row.refresh_from_db()
    assert row.outcome == Outcome.VERIFIED_BY_SCAN and row.attempts == 1
    assert row.claimed_by == ""


def test_a_result_scanned_under_a_lost_claim_is_not_written(pending):
    row = pending[0]
    slow = "host:7:slow"
    assert copies.claim(row, slow)
    # Its claim expires while it scans; another checker takes the row over.
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    CopyCheck.objects.filter(pk=row.pk).update(claimed_until=past)
    fresh = CopyCheck.objects.get(pk=row.pk)
    assert copies.claim(fresh, "host:8:next")
    late = copy_scan.Check(Outcome.NOT_VERIFIED, reason="what the slow scan found")
    assert copies.save(row, late, using="default", checker=slow) == 0
    fresh.refresh_from_db()
    assert fresh.outcome == Outcome.NOT_CHECKED and fresh.claimed_by == "host:8:next"
    done = copy_scan.Check(Outcome.VERIFIED_BY_SCAN, method="sql")
    assert copies.save(fresh, done, using="default", checker="host:8:next") == 1
    fresh.refresh_from_db()
    assert (fresh.outcome, fresh.claimed_by, fresh.attempts) == (Outcome.VERIFIED_BY_SCAN, "", 1)


def test_a_settled_row_cannot_be_claimed(pending):
    row = pending[0]
    CopyCheck.objects.filter(pk=row.pk).update(outcome=Outcome.VERIFIED_BY_SCAN)
    assert not copies.claim(row, copies.checker_name())


def test_a_scan_that_raises_unexpectedly_gives_its_claim_back(pending, monkeypatch):
    def broken(alias, **kwargs):
        raise RuntimeError("a bug in the scan")

    monkeypatch.setattr(copy_scan, "check", broken)
    with pytest.raises(RuntimeError):
        copies.check_pending()
    held = CopyCheck.objects.filter(claimed_by__gt="").count()
    assert held == 0  # the next round may take it at once, not after the claim's term
    assert CopyCheck.objects.filter(outcome=Outcome.NOT_CHECKED).count() == 3


def test_a_new_result_for_a_copy_clears_an_old_scanners_claim():
    receipt = ErasureReceipt.objects.create(
        target_kind=ErasureTarget.NAMESPACE, purge_status="done", verified=True
    )
    row = CopyCheck.objects.create(
        receipt=receipt, server="default", role="primary", outcome=Outcome.NOT_CHECKED
    )
    assert copies.claim(row, "old-scanner")
    receipt.details = {
        "aliases": {"default": {"verification": {"outcome": Outcome.UNSCANNED.value}}}
    }
    copies._record_primary(receipt, "default", [], "default")  # the copy's result, again
    fresh = CopyCheck.objects.get(pk=row.pk)
    assert (fresh.claimed_by, fresh.claimed_until, fresh.outcome) == ("", None, Outcome.UNSCANNED)
    late = copy_scan.Check(Outcome.VERIFIED_BY_SCAN, method="sql", role="primary")
    assert copies.save(row, late, using="default", checker="old-scanner") == 0
    assert CopyCheck.objects.get(pk=row.pk).outcome == Outcome.UNSCANNED  # not overwritten


def test_a_scan_longer_than_its_claim_renews_it_and_nobody_takes_the_row(
    pending, settings, monkeypatch
):
    settings.MEMORYAPP_COPY_CLAIM_SECONDS = 1
    row = pending[0]
    tries: list[bool] = []

    def long_scan(alias, *, heartbeat, **kwargs):
        for _ in range(12):  # 2.4 s: more than two terms of the claim
            time.sleep(0.2)
            heartbeat()
            tries.append(copies.claim(CopyCheck.objects.get(pk=row.pk), "host:9:another"))
        return copy_scan.Check(Outcome.VERIFIED_BY_SCAN, method="sql", role="replica")

    monkeypatch.setattr(copy_scan, "check", long_scan)
    assert copies.check_pending(receipt=row.receipt) == 1
    assert tries == [False] * 12  # held from the first read to the last
    row.refresh_from_db()
    assert (row.outcome, row.attempts, row.claimed_by) == (Outcome.VERIFIED_BY_SCAN, 1, "")


def test_a_scan_whose_claim_was_taken_over_stops_at_its_next_heartbeat(
    pending, settings, monkeypatch
):
    settings.MEMORYAPP_COPY_CLAIM_SECONDS = 1
    row = pending[0]
    reads_after: list[int] = []

    def stalled_scan(alias, *, heartbeat, **kwargs):
        # This process stalled past its claim's term; another checker took the row over.
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
        CopyCheck.objects.filter(pk=row.pk).update(claimed_until=past)
        assert copies.claim(CopyCheck.objects.get(pk=row.pk), "host:8:next")
        time.sleep(0.4)  # past a third of the term: the next heartbeat renews, or finds it lost
        heartbeat()
        reads_after.append(1)  # never reached
        return copy_scan.Check(Outcome.NOT_VERIFIED, reason="what the stalled scan found")

    monkeypatch.setattr(copy_scan, "check", stalled_scan)
    assert copies.check_pending(receipt=row.receipt) == 0
    assert reads_after == []
    row.refresh_from_db()
    assert (row.outcome, row.claimed_by, row.attempts) == (Outcome.NOT_CHECKED, "host:8:next", 0)


def test_a_renewal_the_primary_fails_stops_the_scan_without_a_result_for_the_copy(
    pending, settings, monkeypatch
):
    """The heartbeat runs inside the scan's reads: a database error of the primary there
    must not be taken for the scanned server's (an "unscanned" result is final)."""
    from django.db import OperationalError

    settings.MEMORYAPP_COPY_CLAIM_SECONDS = 1
    row = pending[0]

    def primary_down():
        raise OperationalError("server closed the connection unexpectedly")

    def scan(alias, *, heartbeat, **kwargs):
        time.sleep(0.4)
        monkeypatch.setattr(copies, "now", primary_down)
        heartbeat()
        return copy_scan.Check(Outcome.UNSCANNED, reason="never reached")

    monkeypatch.setattr(copy_scan, "check", scan)
    assert copies.check_pending(receipt=row.receipt) == 0
    monkeypatch.undo()
    row.refresh_from_db()
    assert row.outcome == Outcome.NOT_CHECKED and row.attempts == 0
    assert row.claimed_by  # still ours until it expires; the next round scans it again
