"""One owner per receipt, always (issue #38): leased from the moment it exists.

The reported bug: the engine committed the receipt ``requested`` with no lease, then
deleted. A worker polling while the request's delete transaction was open (PostgreSQL)
claimed it, re-ran the deletion behind the request's locks, found no row and saved its
copy over the request's record — counts 0, no erased ids, no partitions, no fragments —
so the purge rewrote nothing that held the rows, the byte scan looked for nothing, and
the receipt ended verified while the erased text was still in the partition's files.

Here the worker polls at the worst moment of every round (inside the request's
deletion, held there until the poll is over); a creator whose lease is live is never
taken over, a dead or expired one is; and a resumed deletion adds to what a committed
one recorded, never writes a smaller record over it.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import socket
import subprocess
import threading

import pytest
from django.db import connection, connections
from django.test import Client

from memoryapp import MemoryManager, compliance
from memoryapp.api.testing import token_client
from memoryapp.compliance import engine, merging, sealed, worker
from memoryapp.compliance.leases import process_started, worker_name
from memoryapp.db import partitioning
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, Memory, ReceiptState
from tests._erasure_support import found_in, marker, stored_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

POSTGRES = connection.vendor == "postgresql"
ROUNDS = int(os.environ.get("LEASE_ROUNDS", 100 if POSTGRES else 20))
OTHER_WORKER = "elsewhere:4242"  # the polling worker, as another process would name itself
PARKED = "the-test:1"


def _namespaces(count: int) -> list[str]:
    """``count`` namespaces of one partition (PostgreSQL), so that the final purge rewrites
    one partition per table rather than most of them: the race is the same in any."""
    if not POSTGRES:
        return [f"acme/lease{n}" for n in range(count)]
    with connection.cursor() as cursor:
        wanted = partitioning.remainder_for(cursor, "acme/lease0")
        found = []
        for i in range(count * 200):
            if partitioning.remainder_for(cursor, f"acme/lease{i}") == wanted:
                found.append(f"acme/lease{i}")
                if len(found) == count:
                    return found
    raise AssertionError("not enough namespaces in one partition")


def _seed(namespace: str, rows: int = 2) -> tuple[list[str], list[str]]:
    """``rows`` small memories of ``namespace``, each with a marker: (ids, markers)."""
    mm = MemoryManager(project=namespace)
    markers = [marker("lease") for _ in range(rows)]
    for i, m in enumerate(markers):
        mm.save_memory(f"fact {i}", f"the erased fact {m}")
    ids = list(Memory.objects.filter(namespace=namespace).values_list("pk", flat=True))
    assert len(ids) == rows
    return ids, markers


@pytest.fixture(autouse=True)
def _patient_purge(purge_settings, settings):
    """A purge waits for every older transaction on the server: other test runs sharing
    it can hold one longer than the usual 10 s; here no test expects a purge to time out."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 60


@pytest.fixture
def unthrottled(settings):
    """The race sends more erasures than the ``erase`` scope allows a minute."""
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], "erase": None}
    settings.REST_FRAMEWORK = rest
    settings.MEMORYAPP_ERASURE_WORKER = True  # the request deletes, the worker purges


class _PollInsideTheDeletion:
    """Hold each erasure inside its delete transaction (the targets locked, nothing yet
    deleted) until a worker has polled once: the moment the bug needed.

    On SQLite a poll cannot run while a deletion holds the write lock (it waits for the
    commit), so there the deletion only says it started and goes on.
    """

    def __init__(self, monkeypatch) -> None:
        self.deleting = threading.Event()
        self.polled = threading.Event()
        self.claims: list[list[str]] = []
        real_lock, real_claim = engine._lock_targets, worker.claim

        def lock_then_wait(alias, targets, *, truncate):
            real_lock(alias, targets, truncate=truncate)
            self.deleting.set()
            if POSTGRES:
                assert self.polled.wait(20), "the worker never polled"

        def claim_then_tell(**kwargs):
            try:
                chosen = real_claim(**kwargs)
                self.claims.append([r.pk for r in chosen])
                return chosen
            finally:
                self.polled.set()

        monkeypatch.setattr(engine, "_lock_targets", lock_then_wait)
        monkeypatch.setattr(worker, "claim", claim_then_tell)

    def reset(self) -> None:
        self.deleting.clear()
        self.polled.clear()


def _round(client: Client, namespace: str, hold: _PollInsideTheDeletion):
    """One erasure request and one worker poll, started together behind a barrier."""
    barrier = threading.Barrier(2)
    out: dict[str, object] = {}

    def request() -> None:
        try:
            barrier.wait(30)
            out["response"] = client.post(
                "/api/erasures/", {"namespace": namespace}, content_type="application/json"
            )
        except BaseException as exc:  # reported by the test
            out["response"] = exc
        finally:
            connections.close_all()

    def poll() -> None:
        try:
            barrier.wait(30)
            assert hold.deleting.wait(30), "the request never reached its deletion"
            out["handled"] = worker.run_once(worker=OTHER_WORKER)
        except BaseException as exc:
            out["handled"] = exc
            hold.polled.set()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=request), threading.Thread(target=poll)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a racing thread hung"
    return out["response"], out["handled"]


def test_a_worker_polling_during_the_deletion_never_takes_the_receipt(monkeypatch, unthrottled):
    """The judged race, every round at its worst point: each receipt counts every row it
    deleted and records every erased id; once purged, no partition file holds the text."""
    client = Client(
        HTTP_AUTHORIZATION=f"Token {token_client('leaser', ['acme/'], erase=True).token}"
    )
    hold = _PollInsideTheDeletion(monkeypatch)
    receipts, every_marker = [], []
    for n, namespace in enumerate(_namespaces(ROUNDS)):
        ids, markers = _seed(namespace)
        every_marker += markers
        hold.reset()
        response, handled = _round(client, namespace, hold)
        assert not isinstance(response, BaseException), response
        assert not isinstance(handled, BaseException), handled
        assert response.status_code == 202, response.content
        receipt = ErasureReceipt.objects.get(pk=response.json()["id"])
        if POSTGRES:  # the poll ran inside the deletion: the live lease kept it off
            assert hold.claims[-1] == [], n
            assert handled == []
        assert not Memory.objects.filter(namespace=namespace).exists()
        assert receipt.counts["memories"] == len(ids), (n, receipt.counts)
        assert sorted(receipt.erased_ids["memories"]) == sorted(ids), n
        assert receipt.state in (ReceiptState.DELETED, ReceiptState.COMPLETE), n
        if receipt.state == ReceiptState.DELETED:
            # Handed to the worker: nobody holds it, so the next poll takes it.
            assert receipt.claimed_by == "" and receipt.claimed_until is None
            opened = sealed.unseal(receipt.sealed)
            assert opened is not None and opened[1][connection.alias], n  # fragments
            if POSTGRES:
                assert receipt.details["aliases"][connection.alias]["partitions"], n
        receipts.append(receipt)
        # Parked until the end, so that the next rounds' polls find only their own receipt
        # (and no round purges): one purge for all of them below.
        _lease_to(receipt, PARKED, 3600)
    ErasureReceipt.objects.filter(claimed_by=PARKED).update(claimed_by="", claimed_until=None)
    engine.retry()  # what the worker does next: one purge for all, then the byte scans
    for r in receipts:
        r.refresh_from_db()
        assert r.state == ReceiptState.COMPLETE and r.verified, (r.pk, r.verification)
        assert "fragment(s) of erased values: none found" in r.verification, r.verification
    assert found_in(stored_bytes(checkpoint=True), every_marker) == []


def _failed_request(monkeypatch, namespace: str) -> ErasureReceipt:
    """A receipt left ``requested`` with its rows still there (its deletion failed)."""
    real_apply = engine.apply

    def broken(*args, **kwargs):
        raise RuntimeError("the connection dropped")

    monkeypatch.setattr(engine, "apply", broken)
    with pytest.raises(RuntimeError):
        compliance.erase(namespace=namespace)
    monkeypatch.setattr(engine, "apply", real_apply)
    return ErasureReceipt.objects.get()


def _lease_to(receipt: ErasureReceipt, holder: str, seconds: float) -> None:
    ErasureReceipt.objects.filter(pk=receipt.pk).update(
        claimed_by=holder, claimed_until=now() + dt.timedelta(seconds=seconds)
    )


def test_the_lease_is_written_with_the_receipt(monkeypatch):
    """Inside the deletion the receipt is already leased to the creating process."""
    _seed("lease/first")
    seen = []
    real_apply = engine.apply

    def look(*args, **kwargs):
        stored = ErasureReceipt.objects.values_list("claimed_by", "claimed_until").get()
        seen.append(stored)
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(engine, "apply", look)
    receipt = compliance.erase(namespace="lease/first", purge=False)
    holder, until = seen[0]
    assert holder == worker_name() and until > now() + dt.timedelta(seconds=60)
    # Deleted and handed to the worker: the lease is dropped in one update.
    assert ErasureReceipt.objects.values_list("claimed_by", "claimed_until").get() == ("", None)
    assert [r.pk for r in worker.run_once(worker=OTHER_WORKER)] == [receipt.pk]


def test_a_live_creators_lease_is_kept_and_a_dead_or_expired_one_is_taken_over(monkeypatch):
    ids, _ = _seed("lease/crash")
    receipt = _failed_request(monkeypatch, "lease/crash")
    live = subprocess.Popen(["sleep", "60"])
    try:
        started = process_started(live.pid)
        _lease_to(receipt, f"{socket.gethostname()}:{live.pid}@{started}", 300)
        assert worker.run_once(worker=OTHER_WORKER) == []  # its creator still runs
        assert Memory.objects.filter(namespace="lease/crash").count() == len(ids)
        _lease_to(receipt, "another-host:77", 300)  # alive as far as this host can tell
        assert worker.run_once(worker=OTHER_WORKER) == []
    finally:
        live.kill()
        live.wait()
    # The creator is gone (its pid no longer runs): taken over at once.
    _lease_to(receipt, f"{socket.gethostname()}:{live.pid}@{started}", 300)
    assert [r.pk for r in worker.run_once(worker=OTHER_WORKER)] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert receipt.counts["memories"] == len(ids)
    assert sorted(receipt.erased_ids["memories"]) == sorted(ids)


def test_an_expired_lease_of_another_host_is_taken_over(monkeypatch):
    ids, _ = _seed("lease/expired")
    receipt = _failed_request(monkeypatch, "lease/expired")
    _lease_to(receipt, "another-host:77", -1)
    assert [r.pk for r in worker.run_once(worker=OTHER_WORKER)] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.counts["memories"] == len(ids)


def test_a_resume_after_a_committed_deletion_keeps_the_first_record(monkeypatch):
    """A process resuming from a copy read before the deletion committed (the bug's
    worker) finds nothing to delete and must leave the first record as it is."""
    ids, markers = _seed("lease/twice", rows=3)
    stale: list[ErasureReceipt] = []
    real_delete = engine.delete

    def keep_a_copy(receipt, targets):
        stale.append(copy.deepcopy(receipt))  # as read before the deletion committed
        return real_delete(receipt, targets)

    monkeypatch.setattr(engine, "delete", keep_a_copy)
    first = compliance.erase(namespace="lease/twice", purge=False)
    monkeypatch.setattr(engine, "delete", real_delete)
    recorded = ErasureReceipt.objects.get(pk=first.pk)
    again = stale[0]
    assert again.state == ReceiptState.REQUESTED and not again.counts
    again.claimed_by = OTHER_WORKER
    engine.resume(again, purge=False)

    after = ErasureReceipt.objects.get(pk=first.pk)
    assert after.counts == recorded.counts and after.counts["memories"] == 3
    assert after.erased_ids == recorded.erased_ids
    assert sorted(after.erased_ids["memories"]) == sorted(ids)
    alias = connection.alias
    assert after.details["aliases"][alias] == recorded.details["aliases"][alias]
    assert sealed.unseal(after.sealed)[1] == sealed.unseal(recorded.sealed)[1]
    assert again.counts == recorded.counts  # the resumer's copy now says what is stored
    handled = worker.run_once(worker=OTHER_WORKER)
    assert [r.pk for r in handled] == [first.pk]
    after.refresh_from_db()
    assert after.state == ReceiptState.COMPLETE and after.verified, after.verification
    assert "fragment(s) of erased values: none found" in after.verification
    assert found_in(stored_bytes(checkpoint=True), markers) == []


def test_a_second_pass_adds_to_the_record_and_one_that_removed_nothing_changes_nothing():
    _seed("lease/merge", rows=1)
    receipt = compliance.erase(namespace="lease/merge", purge=False)
    alias = connection.alias
    before = ErasureReceipt.objects.get(pk=receipt.pk)
    targets = sealed.unseal(before.sealed)[0] if before.sealed else []

    # A pass that found nothing records what _alias_info records then: no table, no partition.
    empty = {"tables": [], "partitions": [], "deleted_at": "later"}
    merging.add(receipt, alias, merging.Removed(info=empty), targets=targets, holder="")
    nothing = ErasureReceipt.objects.get(pk=receipt.pk)
    assert nothing.counts == before.counts and nothing.erased_ids == before.erased_ids
    assert nothing.details["aliases"][alias]["tables"] == before.details["aliases"][alias]["tables"]

    more = merging.Removed(
        info={"tables": ["memory_events"], "partitions": [99], "deleted_at": "later"},
        pieces=[b"another fragment"],
    )
    more.counts.update({"memories": 2})
    more.ids["memories"] = ["extra-1", before.erased_ids["memories"][0], "extra-2"]
    merging.add(receipt, alias, more, targets=targets, holder="")
    added = ErasureReceipt.objects.get(pk=receipt.pk)
    assert added.counts["memories"] == before.counts["memories"] + 2
    assert added.erased_ids["memories"] == [*before.erased_ids["memories"], "extra-1", "extra-2"]
    info = added.details["aliases"][alias]
    assert info["deleted_at"] == before.details["aliases"][alias]["deleted_at"]
    assert "memory_events" in info["tables"]
    if "partitions" in before.details["aliases"][alias]:
        assert 99 in info["partitions"]
        assert set(before.details["aliases"][alias]["partitions"]) <= set(info["partitions"])
    pieces = sealed.unseal(added.sealed)[1][alias]
    assert b"another fragment" in pieces
    assert set(sealed.unseal(before.sealed)[1][alias]) <= set(pieces)
