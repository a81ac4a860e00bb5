"""A purge whose verification finds erased bytes escalates to a stronger purge (issue 27).

- SQLite: the residue of issue 27 reproduced with real bytes — an erasure whose
  deletions rebalance an index leave copies of erased keys in the unallocated
  space of pages that survive (SQLite's ``rebuildPage`` does not zero it) —,
  found by the old purge, removed by the escalation.
- Both vendors, by fault injection: a verification that fails once, then passes
  after the stronger purge; one that always fails (every step listed, the receipt
  honestly not verified, handed back to the worker); a worker ``kill -9``-ed
  during the stronger purge and restarted.
"""

from __future__ import annotations

import random
import subprocess

import pytest
from django.db import connection

from memoryapp import conf
from memoryapp.compliance import erase, probes, purging, retry_purge, worker
from memoryapp.compliance.escalation import INTERRUPTED, NOT_VERIFIED, RESIDUE, STARTED, VERIFIED
from memoryapp.db import ladder
from memoryapp.db.purge.common import ScanFiles
from memoryapp.db.purge.vendors import for_connection
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, Memory, ReceiptState
from tests._erasure_support import marker, stored_bytes

from .test_erasure_worker import TIMEOUT, _child, _kill, _wait_for_line

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

GONE, KEPT = "esc/gone", "esc/kept"


@pytest.fixture(autouse=True)
def _converted():
    """SQLite: the file in auto_vacuum=INCREMENTAL, as after its first purge (a purge
    that converts it rewrites it with VACUUM, and the ladder has nothing stronger)."""
    if connection.vendor == "sqlite":
        _incremental_file()


def _steps(receipt: ErasureReceipt, alias: str = "default") -> list[dict]:
    return receipt.details["aliases"][alias]["purge_steps"]


def _ladder() -> list[ladder.Step]:
    return ladder.ladder(connection.vendor, conf.erasure_purge_method())


def _seed() -> list[str]:
    from memoryapp import MemoryManager

    secrets = [marker(f"esc{i}") for i in range(3)]
    mm = MemoryManager(project=GONE)
    for i, s in enumerate(secrets):
        mm.save_memory(f"fact {i}", f"the erased fact {s} " + "padding words " * 20)
    MemoryManager(project=KEPT).save_memory("kept fact", "another tenant's fact, kept")
    return secrets


def _residue_at(monkeypatch, calls) -> list[int]:
    """Make the verifications numbered in ``calls`` (0 = the first; or a predicate of the
    number and the purged tables) report 6 erased fragments left; the others are the
    real verification. Returns the numbers of the calls made."""
    real = purging._verify
    made: list[int] = []
    wanted = calls if callable(calls) else (lambda n, tables: n in calls)

    def verify(alias, r, vendor, tables):
        ok, text, facts = real(alias, r, vendor, tables)
        made.append(len(made))
        if wanted(made[-1], tables):
            scan = {**(facts.get("scan") or {}), "found": 6}
            return False, text + "; (injected) 6 fragment(s) found", {**facts, "scan": scan}
        return ok, text, facts

    monkeypatch.setattr(purging, "_verify", verify)
    return made


# ------------------------------------------------------- fault injection, both vendors
def test_a_verification_that_fails_once_passes_after_the_stronger_purge(monkeypatch):
    secrets = _seed()
    made = _residue_at(monkeypatch, {0})
    receipt = erase(namespace=GONE)
    steps = _steps(receipt)
    assert len(made) == 2, steps
    assert [s["outcome"] for s in steps] == [RESIDUE, VERIFIED], steps
    assert steps[0]["level"] < steps[1]["level"]
    assert steps[0]["result"] == "6 fragment(s) of erased values remained"
    assert receipt.verified and receipt.state == ReceiptState.COMPLETE, receipt.verification
    said = receipt.verification.split(" | ")[0]
    assert said.startswith(f"purge steps: {steps[0]['step']} at ")
    assert ": 6 fragment(s) of erased values remained; " in said
    assert said.endswith(f"{steps[1]['step']} at {steps[1]['at'][:19]}: verified")
    assert f"escalated to {steps[1]['step']}" in receipt.purge_method
    assert not any(s.encode() in stored_bytes() for s in secrets)


def test_a_byte_scan_that_cannot_run_now_is_not_taken_as_verified(monkeypatch):
    """Files changing under the scan (another session rewriting them) leave the receipt
    unverified for the worker's next attempt, with no stronger purge; where no scan can
    ever run (a remote server) the receipt says so and completes, as before."""
    _seed()
    vendor_class = type(for_connection(connection))
    busy = ScanFiles([], "relation files do not match the server's sizes", True)
    monkeypatch.setattr(vendor_class, "scan_files", lambda self, conn, tables: busy)
    receipt = erase(namespace=GONE)
    assert not receipt.verified and receipt.state == ReceiptState.DELETED, receipt.verification
    assert "byte scan: could not run now" in receipt.verification
    assert [s["outcome"] for s in _steps(receipt)] == [NOT_VERIFIED]

    monkeypatch.undo()
    done = retry_purge(receipt.pk)
    assert done and done[0].verified and done[0].state == ReceiptState.COMPLETE

    _seed()
    remote = ScanFiles([], "database server 'db.internal' is not on this machine")
    monkeypatch.setattr(vendor_class, "scan_files", lambda self, conn, tables: remote)
    receipt = erase(namespace=GONE)
    assert receipt.verified, receipt.verification
    if for_connection(connection).read_through_sql(connection, [], []) is None:
        assert "byte scan: not possible (database server" in receipt.verification
    else:  # PostgreSQL hands its own files over through SQL (the superuser may read them)
        assert "byte scan through SQL: " in receipt.verification, receipt.verification
        assert "fragment(s) of erased values: none found" in receipt.verification


def test_the_common_case_is_one_purge_and_says_nothing_more():
    _seed()
    receipt = erase(namespace=GONE)
    assert receipt.verified, receipt.verification
    steps = _steps(receipt)
    assert [(s["level"], s["outcome"]) for s in steps] == [(0, VERIFIED)]
    assert steps[0]["step"] == _ladder()[0].name
    assert "purge steps" not in receipt.verification
    assert "escalated" not in receipt.purge_method


def test_a_verification_that_always_fails_lists_every_step_and_needs_attention(monkeypatch):
    """Every step once, upwards; then the receipt needs a person at once (issue #38): the
    strongest step is not repeated at each automatic attempt."""
    _seed()
    made = _residue_at(monkeypatch, lambda n, tables: True)
    receipt = erase(namespace=GONE, purge=False)
    handled = worker.run_once()  # the worker's round: its failure goes back to it
    assert [r.pk for r in handled] == [receipt.pk]
    receipt.refresh_from_db()
    steps = _steps(receipt)
    assert len(made) == len(steps) >= 2, steps
    assert [s["outcome"] for s in steps] == [RESIDUE] * len(steps)
    levels = [s["level"] for s in steps]
    assert levels[0] == 0 and levels == sorted(set(levels)), steps  # each step once, upwards
    assert levels[-1] == len(_ladder()) - 1  # up to the strongest
    assert not receipt.verified and receipt.state == ReceiptState.NEEDS_ATTENTION
    reason = receipt.details["attention"]["reason"]
    assert reason.startswith(f"{steps[-1]['step']} left 6 fragment(s)"), reason
    assert "no stronger purge remains" in reason
    assert "stalled" not in receipt.details and "next_attempt" not in receipt.details
    assert receipt.purge_status == "purged" and receipt.attempts == 1
    assert worker.run_once() == [], "the worker does not repeat the strongest purge"
    assert receipt.sealed, "what a retry needs is kept"
    said = receipt.verification.split(" | ")[0]
    assert said.count("6 fragment(s) of erased values remained") == len(steps)
    for s in steps:
        assert f"{s['step']} at {s['at'][:19]}" in said
    assert receipt.claimed_by == ""  # released to the worker's retry logic

    # A person's retry does not start again from the weak purge: the strongest only.
    made.clear()
    monkeypatch.undo()
    retry_purge(receipt.pk)
    receipt.refresh_from_db()
    assert receipt.verified and receipt.state == ReceiptState.COMPLETE, receipt.verification
    last = _steps(receipt)[len(steps) :]
    assert [(s["level"], s["outcome"]) for s in last] == [(len(_ladder()) - 1, VERIFIED)]


@pytest.mark.postgres_only
def test_postgres_residue_twice_reaches_the_whole_tables(monkeypatch):
    """The last step rewrites every partition and the byte scan then reads them all."""
    _seed()
    # Residue until the purge covers every partition (64 per table).
    made = _residue_at(monkeypatch, lambda n, tables: len(tables) < 64)
    receipt = erase(namespace=GONE)
    steps = _steps(receipt)
    assert len(made) == len(steps) >= 2 and receipt.verified, receipt.verification
    assert [s["outcome"] for s in steps] == [RESIDUE] * (len(steps) - 1) + [VERIFIED]
    assert steps[-1]["step"] == "rewrite of the whole tables (VACUUM FULL)"
    purge = receipt.details["aliases"]["default"]["purge"]
    assert purge["rewrite"] == "VACUUM FULL"
    assert len(purge["tables"]) > 64  # every partition of the tables, not one per table
    files = receipt.details["aliases"]["default"]["verification"]["scan"]["files"]
    assert files > 64 * 2


def test_ladders():
    """The ladders as chosen: stronger at each step, none under "rewrite" on SQLite,
    no table lock under PostgreSQL's "online"."""
    sqlite = ladder.ladder("sqlite", "auto")
    assert [s.name for s in sqlite] == ["incremental purge", "full rewrite (VACUUM)"]
    assert [s.method for s in ladder.ladder("sqlite", "rewrite")] == ["rewrite"]
    online = ladder.ladder("postgresql", "online")
    assert {s.method for s in online} == {"online"} and online[-1].whole_tables
    auto = ladder.ladder("postgresql", "auto")
    assert [s.method for s in auto] == ["auto", "rewrite", "rewrite"] and auto[-1].whole_tables
    fallback = {"rewrite": "VACUUM FULL"}
    from memoryapp.db.purge.common import PurgeOutcome

    assert auto[1].repeats(PurgeOutcome("purged", details=fallback))
    assert not auto[2].repeats(PurgeOutcome("purged", details=fallback))
    converted = {"reclaim": "VACUUM (conversion to auto_vacuum=INCREMENTAL)"}
    assert sqlite[1].repeats(PurgeOutcome("purged", details=converted))
    assert not sqlite[1].repeats(PurgeOutcome("purged", details={"reclaim": "incremental_vacuum"}))


# ------------------------------------------------------- SQLite: the residue of issue 27
def _build(seed: int) -> list[str]:
    """40 neighbouring namespaces of 50 memories with long keys of random lengths, ids
    from ``seed``; returns the ids of the even namespaces' rows (1,000: all probed).

    The ``uix_memories_scope_key`` index splits into several levels; erasing every
    other namespace, rows in id order (random against the key order), rebalances
    its pages while erased keys are still in them.
    """
    rng = random.Random(seed)
    rows, erased = [], []
    stamp = now()
    for k in range(40):
        kept = k % 2
        for i in range(50):
            pad = ("q" if kept else "p") * rng.randrange(200)
            key = f"{'kept' if kept else 'telemetry'}_event_{k}_{i}_{pad}"
            memory = Memory(
                id=f"{rng.getrandbits(128):032x}",
                namespace=f"acme/telemetry{k:02d}",
                scope="project",
                key_normalized=key,
                title=f"Telemetry event {k} {i}",
                content=f"event {k} {i} payload",
                created_at=stamp,
                updated_at=stamp,
            )
            rows.append(memory)
            if not kept:
                erased.append(memory.id)
    Memory.objects.bulk_create(rows)
    return erased


def _incremental_file() -> None:
    """The file in auto_vacuum=INCREMENTAL, as after any first purge (which converts it)."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
        cursor.execute("VACUUM")  # applies the mode to a file that has tables
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA auto_vacuum")
        assert cursor.fetchone()[0] == 2


def _erased_in_file(values: list[str]) -> list[bytes]:
    """The byte-scan fragments of ``values`` (whole short values, 48-byte slices of long
    ones) that the database files hold: the byte scan's own test, on every fragment."""
    data = stored_bytes()
    return [p for p in probes.pieces_of(values) if p in data]


def _values(ids: list[str]) -> list[str]:
    rows = Memory.objects.filter(pk__in=ids).values_list("key_normalized", "title", "content")
    return [v for row in rows for v in row]


@pytest.mark.sqlite_only
def test_sqlite_index_residue_is_found_by_the_old_purge_and_removed_by_escalation(monkeypatch):
    real_ladder = ladder.ladder
    monkeypatch.setattr(ladder, "ladder", lambda vendor, method: real_ladder(vendor, method)[:1])
    for seed in range(12):  # deterministic layouts; most leave residue on SQLite 3.40
        ids = _build(seed)
        values = _values(ids)
        receipt = erase(ids=ids)  # the purge before issue 27: incremental only
        if not receipt.verified:
            break
        Memory.objects.all().delete()
        ErasureReceipt.objects.all().delete()
    else:
        pytest.fail("no layout left residue after the incremental purge")
    steps = _steps(receipt)
    assert [(s["level"], s["outcome"]) for s in steps] == [(0, RESIDUE)], receipt.verification
    found = receipt.details["aliases"]["default"]["verification"]["scan"]["found"]
    assert found > 0 and f": {found} found" in receipt.verification
    assert receipt.verification.count("SQL: 0 erased row(s) remain; freelist 0 page(s)")
    left = _erased_in_file(values)
    assert len(left) >= found, "control: the erased bytes are in the file"
    assert "uix_memories_scope_key" in _owners(left)  # in the pages of an index

    # The same receipt, completed by the code with the ladder: it starts above the
    # purge that already failed, rewrites the file, and verifies.
    monkeypatch.undo()
    done = retry_purge(receipt.pk)
    assert [r.pk for r in done] == [receipt.pk]
    receipt.refresh_from_db()
    assert receipt.verified and receipt.state == ReceiptState.COMPLETE, receipt.verification
    steps = _steps(receipt)
    assert steps[0]["outcome"] == RESIDUE and steps[-1]["outcome"] == VERIFIED
    assert [s["step"] for s in steps] == ["incremental purge", "full rewrite (VACUUM)"]
    assert receipt.verification.startswith(
        f"purge steps: incremental purge at {steps[0]['at'][:19]}: "
        f"{found} fragment(s) of erased values remained; full rewrite (VACUUM) at "
        f"{steps[1]['at'][:19]}: verified | SQL: 0 erased row(s) remain"
    )
    assert _erased_in_file(values) == []
    assert Memory.objects.filter(namespace="acme/telemetry01").count() == 50  # kept


def _owners(pieces: list[bytes]) -> set[str]:
    """The b-trees whose pages hold ``pieces`` in the main file (SQLite's dbstat)."""
    path = connection.settings_dict["NAME"]
    # Read by another process: closing a descriptor of the file here would drop this
    # process's SQLite locks (memoryapp/db/scan_child.py).
    data = subprocess.run(["cat", path], capture_output=True, check=True).stdout
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_size")
        size = cursor.fetchone()[0]
        cursor.execute("SELECT pageno, name FROM dbstat")
        owner = dict(cursor.fetchall())
    return {owner.get(data.find(p) // size + 1, "?") for p in pieces if p in data}


@pytest.mark.sqlite_only
def test_sqlite_a_fresh_erasure_of_that_layout_verifies_first_time_or_by_escalation():
    for seed in range(3):
        ids = _build(seed)
        values = _values(ids)
        receipt = erase(ids=ids)
        steps = _steps(receipt)
        assert receipt.verified, receipt.verification
        assert steps[-1]["outcome"] == VERIFIED
        assert all(s["outcome"] == RESIDUE for s in steps[:-1])
        if len(steps) > 1:
            assert receipt.verification.startswith("purge steps: incremental purge at ")
        assert _erased_in_file(values) == []
        Memory.objects.all().delete()


# ------------------------------------------------------- kill -9 during the stronger purge
_ESCALATE_AND_HANG = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from django.db import connection, transaction
from memoryapp.db import ladder
from memoryapp.compliance import purging, worker
real_verify, real_run = purging._verify, ladder.run
def verify(alias, r, vendor, tables):          # the first verification finds residue
    ok, text, facts = real_verify(alias, r, vendor, tables)
    return False, text, {**facts, "scan": {"found": 6}}
purging._verify = verify
calls = []
def run(step, vendor, conn, tables, **kw):
    calls.append(step)
    if len(calls) == 1:
        return real_run(step, vendor, conn, tables, **kw)
    # The stronger purge under way, not committed, when the kill comes (a rebuild in an
    # open transaction stands for it: a VACUUM of this small file is over too soon).
    word = "REINDEX TABLE" if connection.vendor == "postgresql" else "REINDEX"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"{word} {connection.ops.quote_name(tables[0])}")
        print("escalating", flush=True)
        time.sleep(600)
ladder.run = run
print("started", flush=True)
worker.run_once()
"""


def test_a_worker_killed_during_the_stronger_purge_is_completed_after_restart(tmp_path):
    secrets = _seed()
    receipt = erase(namespace=GONE, purge=False)
    log = tmp_path / "worker1.log"
    first = _child(["-c", _ESCALATE_AND_HANG], log)
    try:
        _wait_for_line(first, "escalating", log)
        receipt.refresh_from_db()
        steps = _steps(receipt)  # written before the stronger purge began
        assert [s["outcome"] for s in steps] == [RESIDUE, STARTED], steps
        assert steps[1]["level"] > steps[0]["level"] == 0
        _kill(first)
    finally:
        if first.poll() is None:
            _kill(first)
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.DELETED and not receipt.verified
    assert f":{first.pid}@" in receipt.claimed_by  # the dead worker's lease

    log = tmp_path / "worker2.log"
    # (The killed purge had taken the full-rewrite slot: with the interval, the restart
    # would wait for it; tests/compliance/test_false_residue.py covers that wait.)
    no_wait = {"MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL": "0"}
    second = _child(["manage.py", "memory", "worker", "--once"], log, **no_wait)
    out, _ = second.communicate(timeout=TIMEOUT)
    assert second.returncode == 0, log.read_text()
    assert f"receipt {receipt.pk}: complete" in out, out + log.read_text()
    receipt.refresh_from_db()
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    steps = _steps(receipt)
    assert [s["outcome"] for s in steps] == [RESIDUE, INTERRUPTED, VERIFIED], steps
    assert steps[2]["level"] == steps[1]["level"]  # resumed at the step it was stopped in
    assert "interrupted (the process stopped during it)" in receipt.verification
    assert receipt.verification.startswith("purge steps: ")
    assert receipt.sealed is None and receipt.claimed_by == ""
    assert not any(s.encode() in stored_bytes() for s in secrets)


# ------------------------------------------------------- the operator's path (issue 27)
def test_admin_erase_selected_ends_verified_by_escalation_and_the_receipt_page_says_how(
    monkeypatch,
):
    """Admin → Memories → select → "Erase selected memories permanently" → confirm."""
    from tests._admin_support import MEMORIES, act, client_for, make_staff

    _seed()
    _residue_at(monkeypatch, {0})
    ids = list(Memory.objects.filter(namespace=GONE).values_list("pk", flat=True))
    admin = client_for(make_staff("root", superuser=True))
    r = act(admin, MEMORIES, "erase_selected", ids, confirm=True)
    assert r.status_code == 302, r.content
    receipt = ErasureReceipt.objects.get()
    assert receipt.verified and receipt.state == ReceiptState.COMPLETE, receipt.verification
    page = admin.get(r["Location"]).content.decode()
    first, last = _steps(receipt)
    assert f"purge steps: {first['step']} at {first['at'][:19]}: 6 fragment(s)" in page
    assert f"{last['step']} at {last['at'][:19]}: verified" in page
