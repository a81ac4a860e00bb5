"""Erasure off the request: recorded before any row goes, 202 + worker, resumable after kill -9.

The processes killed here are real: a child erases (or runs ``memory worker``)
on the test database and is sent SIGKILL at a known point; then another process
completes the receipt from what the receipt itself holds.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, connections

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import erase, retry_purge, sealed, worker
from memoryapp.models import ErasureReceipt, Memory, ReceiptState
from tests._erasure_support import marker
from tests._processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
GONE, KEPT = "wk/gone", "wk/kept"
TIMEOUT = 60.0


def _child(args: list[str], log: Path, **env) -> subprocess.Popen:
    from django.conf import settings

    environment = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(REPO),
        "SECRET_KEY": settings.SECRET_KEY,  # the sealed request is keyed from it
        "MEMORYAPP_ERASURE_PURGE_TIMEOUT": "60",
        **env,
    }
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )


def _wait_for_line(proc: subprocess.Popen, text: str, log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if text in line:
                return
            if not line and proc.poll() is not None:
                break
    proc.kill()
    raise AssertionError(f"child never said {text!r}; its stderr:\n{log.read_text()}")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL, as an operator's ``kill -9`` (a no-op for a process already gone)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


def _seed() -> list[str]:
    secrets = [marker(f"worker{i}") for i in range(3)]
    mm = MemoryManager(project=GONE)
    for i, s in enumerate(secrets):
        mm.save_memory(f"fact {i}", f"the erased fact {s} " + "padding words " * 20)
    MemoryManager(project=KEPT).save_memory("kept fact", "another tenant's fact, kept")
    return secrets


def _scan_done(r: ErasureReceipt) -> bool:
    return "fragment(s) of erased values: none found" in r.verification


# ------------------------------------------------------------------ in process
def test_the_request_is_recorded_before_any_row_goes(monkeypatch):
    """A deletion that fails leaves a ``requested`` receipt; the worker completes it."""
    from memoryapp.compliance import engine

    _seed()
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("the database went away")

    monkeypatch.setattr(engine, "apply", broken)
    with pytest.raises(RuntimeError):
        erase(namespace=GONE)
    monkeypatch.undo()
    receipt = ErasureReceipt.objects.get()
    assert calls and receipt.state == ReceiptState.REQUESTED
    assert receipt.sealed and GONE not in receipt.sealed  # the request, encrypted
    assert Memory.objects.filter(namespace=GONE).count() == 3  # nothing deleted
    assert receipt.purge_status.startswith("not purged: erasure on database")

    assert [r.pk for r in worker.run_once()] == [receipt.pk]
    receipt.refresh_from_db()
    assert Memory.objects.filter(namespace=GONE).count() == 0
    assert Memory.objects.filter(namespace=KEPT).count() == 1
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert receipt.counts["memories"] == 3 and receipt.sealed is None


def test_a_deferred_purge_is_completed_by_the_worker_with_a_byte_scan():
    secrets = _seed()
    receipt = erase(namespace=GONE, purge=False)
    assert receipt.state == ReceiptState.DELETED and not receipt.purged
    opened = sealed.unseal(ErasureReceipt.objects.get(pk=receipt.pk).sealed)
    assert opened is not None and opened[1][connection.alias]  # fragments, sealed
    stored = ErasureReceipt.objects.filter(pk=receipt.pk).values_list("sealed", flat=True)[0]
    assert not any(s in stored for s in secrets)

    from memoryapp.compliance import probes

    probes.forget(receipt.pk)  # as in another process: only the receipt knows them
    handled = worker.run_once()
    assert [r.pk for r in handled] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert _scan_done(receipt), receipt.verification
    phases = receipt.details["phases"]
    assert phases["requested"] <= phases["deleted"] <= phases["purge_started"] <= phases["purged"]
    assert worker.run_once() == []  # nothing left


def test_an_unreadable_request_is_reported_not_guessed(settings):
    _seed()
    receipt = erase(namespace=GONE, purge=False)
    ErasureReceipt.objects.filter(pk=receipt.pk).update(
        state=ReceiptState.REQUESTED, sealed="not a token"
    )
    retry_purge(receipt.pk)
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.REQUESTED
    assert "cannot be read back" in receipt.purge_status


def test_a_live_workers_claim_is_respected_and_a_dead_ones_is_taken_over():
    _seed()
    receipt = erase(namespace=GONE, purge=False)
    mine = worker.claim(worker="elsewhere:1")
    assert [r.pk for r in mine] == [receipt.pk]
    assert worker.claim(worker="other:2") == []  # leased to a live worker elsewhere
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = worker.worker_name().rpartition(":")[0]
    ErasureReceipt.objects.filter(pk=receipt.pk).update(claimed_by=f"{host}:{dead.pid}")
    assert [r.pk for r in worker.claim(worker="other:2")] == [receipt.pk]


def test_a_holder_is_told_apart_from_a_later_process_reusing_its_pid():
    """A restarted container repeats host and pid: the start time tells the holders apart."""
    from memoryapp.compliance.leases import process_started

    host, pid = worker.worker_name().rpartition(":")[0], os.getpid()
    mine = process_started(pid)
    assert mine is not None and worker.worker_name() == f"{host}:{pid}@{mine}"
    assert not worker.holder_gone(worker.worker_name())  # this very process
    assert worker.holder_gone(f"{host}:{pid}@{int(mine) + 1}")  # this pid, started later
    assert not worker.holder_gone(f"{host}:{pid}")  # the old form: as before, alive
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_started(other.pid)
        assert started is not None
        assert not worker.holder_gone(f"{host}:{other.pid}@{started}")
        assert worker.holder_gone(f"{host}:{other.pid}@{int(started) - 1}")
        assert not worker.holder_gone(f"{host}:{other.pid}")
    finally:
        other.kill()
        other.wait()
    assert worker.holder_gone(f"{host}:{other.pid}@{started}")  # exited
    assert not worker.holder_gone(f"elsewhere:{pid}@1")  # another host: its lease decides


def test_the_worker_takes_over_a_lease_of_a_crashed_process_whose_pid_repeats():
    _seed()
    receipt = erase(namespace=GONE, purge=False)
    host, pid = worker.worker_name().rpartition(":")[0], os.getpid()
    # The old form names no start time: a running pid holds its lease, as before.
    assert [r.pk for r in worker.claim(worker=f"{host}:{pid}")] == [receipt.pk]
    assert worker.claim(worker="other:2") == []
    # This pid, but a process started long before this one: it crashed; taken over.
    ErasureReceipt.objects.filter(pk=receipt.pk).update(claimed_by=f"{host}:{pid}@1")
    assert [r.pk for r in worker.claim()] == [receipt.pk]


def test_failed_attempts_back_off(monkeypatch):
    assert (
        worker.backoff(0) == 0 and 2.5 <= worker.backoff(1) <= 5 and 10 <= worker.backoff(3) <= 20
    )
    assert 300 <= worker.backoff(50) <= 600  # capped (test_erasure_retries: the rest)
    _seed()
    receipt = erase(namespace=GONE, purge=False)
    monkeypatch.setattr(worker, "finish", lambda receipts, using: None)  # a purge that failed
    ErasureReceipt.objects.filter(pk=receipt.pk).update(attempts=2)
    assert [r.pk for r in worker.run_once()] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.claimed_by == "" and receipt.claimed_until is not None
    assert worker.run_once() == []  # backing off for 10 s
    ErasureReceipt.objects.filter(pk=receipt.pk).update(claimed_until=receipt.created_at)
    assert [r.pk for r in worker.run_once()] == [receipt.pk]


@pytest.mark.postgres_only
def test_concurrent_claims_never_share_a_receipt():
    """SKIP LOCKED: two workers claiming at once split the receipts between them."""
    for i in range(6):
        MemoryManager(project=f"wk/many{i}").save_memory("fact", f"fact {i} {marker('c')}")
        erase(namespace=f"wk/many{i}", purge=False)
    got: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def take(name: str) -> None:
        try:
            barrier.wait()
            got[name] = [r.pk for r in worker.claim(worker=f"{name}:1", limit=3)]
        finally:
            connections.close_all()

    threads = [threading.Thread(target=take, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(got["a"]) & set(got["b"])
    assert len(got["a"]) + len(got["b"]) == 6


# ------------------------------------------------------------------ HTTP
def test_http_erasure_answers_202_and_the_worker_completes_it(settings):
    settings.MEMORYAPP_ERASURE_WORKER = True
    _seed()
    client = token_client("wk-app", ["wk/"], write=True, erase=True)
    r = client.post("/api/erasures/", {"namespace": GONE}, format="json")
    assert r.status_code == 202, r.content
    body = r.json()
    assert body["state"] == "deleted" and not body["verified"]
    assert Memory.objects.filter(namespace=GONE).count() == 0
    assert "sealed" not in body and "claimed_by" not in body
    location = r["Location"]
    assert client.get(location).json()["state"] == "deleted"
    assert worker.run(once=True) == 1
    done = client.get(location).json()
    assert done["state"] == "complete" and done["verified"], done["verification"]
    assert "purged" in done["details"]["phases"]


# ------------------------------------------------------------------ kill -9
_ERASE_AND_HANG = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from memoryapp.compliance import engine, erase
real = engine.apply
def hang(*a, **k):
    work = real(*a, **k)          # rows deleted inside the open transaction
    print("deleting", flush=True)
    time.sleep(600)               # killed here, before the commit
    return work
engine.apply = hang
erase(namespace=sys.argv[1])
"""


def test_killed_before_the_delete_commits_the_request_survives(tmp_path):
    secrets = _seed()
    log = tmp_path / "eraser.log"
    proc = _child(["-c", _ERASE_AND_HANG, GONE], log)
    try:
        _wait_for_line(proc, "deleting", log)
    finally:
        _kill(proc)
    receipt = ErasureReceipt.objects.get()
    assert receipt.state == ReceiptState.REQUESTED  # the trace an operator can act on
    assert Memory.objects.filter(namespace=GONE).count() == 3  # rolled back with the process

    done = retry_purge()  # `memory erase --retry` completes it in another process
    assert [r.pk for r in done] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert _scan_done(receipt), receipt.verification
    assert Memory.objects.filter(namespace=GONE).count() == 0
    assert not any(s.encode() in _stored_bytes() for s in secrets)


def _stored_bytes() -> bytes:
    from tests._erasure_support import stored_bytes

    return stored_bytes()


class _Blocker:
    """Something the purge must wait for: a reader (SQLite) or an older transaction (PG)."""

    def __init__(self) -> None:
        from django.db import connections as handlers

        self.conn = handlers.create_connection("default")
        self.conn.ensure_connection()
        self.raw = self.conn.connection
        if self.conn.vendor == "sqlite":
            self.raw.isolation_level = None
        self.cursor = self.raw.cursor()  # Django's connections are in autocommit: BEGIN
        self.cursor.execute("BEGIN")
        if self.conn.vendor == "sqlite":
            self.cursor.execute("SELECT count(*) FROM memories")
        else:
            self.cursor.execute("SELECT pg_current_xact_id()")
        self.cursor.fetchall()

    def release(self) -> None:
        self.cursor.execute("ROLLBACK")
        self.conn.close()


def test_a_worker_killed_mid_purge_is_taken_over_after_restart(tmp_path):
    secrets = _seed()
    blocker = _Blocker()  # opened before the erasure: the purge waits for it
    children: list[subprocess.Popen] = []
    try:
        receipt = erase(namespace=GONE, purge=False)
        log = tmp_path / "worker1.log"
        first = _child(["manage.py", "memory", "worker", "--poll", "0.2"], log)
        children.append(first)
        _wait_for_line(first, "started", log)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:  # wait until it has claimed and is purging
            receipt.refresh_from_db()
            if "purge_started" in receipt.details.get("phases", {}):
                break
            time.sleep(0.1)
        assert f":{first.pid}@" in receipt.claimed_by, "the worker never claimed it"
        assert "purge_started" in receipt.details["phases"], "the worker never purged"
        time.sleep(0.3)  # it waits for the blocker now
        _kill(first)
    finally:
        blocker.release()
        for child in children:  # a failed assertion above must not leave a worker behind
            if child.poll() is None:
                _kill(child)
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.DELETED and not receipt.verified
    assert receipt.claimed_until is not None  # the dead worker's lease is still written

    log = tmp_path / "worker2.log"
    second = _child(["manage.py", "memory", "worker", "--once"], log)
    out, _ = second.communicate(timeout=TIMEOUT)
    assert second.returncode == 0, log.read_text()
    assert f"receipt {receipt.pk}: complete" in out, out + log.read_text()
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert _scan_done(receipt), receipt.verification  # fragments read back from the receipt
    assert receipt.sealed is None and receipt.claimed_by == ""
    assert not any(s.encode() in _stored_bytes() for s in secrets)


# ------------------------------------------------------------------ admin
def test_admin_subject_erasure_leaves_the_purge_to_the_worker(settings):
    from tests._admin_support import ERASE_SUBJECT, client_for, make_staff

    settings.MEMORYAPP_ERASURE_WORKER = True
    subject = "wk/alice"
    MemoryManager(project=GONE, user=subject).save_memory(
        "city", f"lives in {marker('city')}", scope="user"
    )
    admin = client_for(make_staff("root", superuser=True))
    r = admin.post(ERASE_SUBJECT, {"subject": subject, "post": "yes"})
    receipt = ErasureReceipt.objects.get()
    assert r.status_code == 302, r.content
    assert receipt.state == ReceiptState.DELETED and not receipt.purged
    assert not Memory.objects.filter(subject=subject).exists()
    page = admin.get(r["Location"]).content.decode()
    assert "The erasure worker purges the files" in page
    worker.run(once=True)
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification


def test_a_worker_never_purges_a_receipt_its_own_process_is_purging(monkeypatch):
    """An inline erasure holds its receipt: a worker polling meanwhile skips it."""
    from memoryapp.compliance import phases

    _seed()
    seen: list[list] = []

    def during(phase: str) -> None:
        if phase == "purging":
            seen.append(worker.claim(worker="elsewhere:1"))

    with phases.observe(during):
        receipt = erase(namespace=GONE)
    assert seen == [[]]
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.claimed_by == ""
