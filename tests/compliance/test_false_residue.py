"""A receipt never claims residue it cannot show, nor loops on it (issue #38, part 2).

- False residue: a subject erasure whose erased summary text is a value another
  person's kept row holds in a key column (their subject key, a namespace, a
  session id, a review item's session, an audit event's actor) verifies in one
  attempt, with the configured purge only — the byte scan finds the bytes, the
  kept rows explain them.
- Residue no kept row explains and no purge removes: every step of the ladder
  runs once, the step that leaves the same fragments says so, and the receipt
  needs attention at once; the worker does not repeat the strongest purge.
- ``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL``: a second erasure that would
  rewrite every tenant's rows within the interval waits (deferred, retried when
  the interval ends) rather than rewriting; the slot is taken by one of several
  racing connections only.
"""

from __future__ import annotations

import secrets
import threading
import time

import pytest
from django.db import connection, connections

from memoryapp import MemoryManager, conf
from memoryapp.compliance import erase, probes, purging, retry_purge, worker
from memoryapp.compliance.escalation import DEFERRED, RESIDUE, VERIFIED
from memoryapp.db import ladder, meta
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ReceiptState,
    ReviewItem,
    SessionSummary,
)
from tests._erasure_support import marker, namespace_beside, stored_bytes

from .test_escalation import _converted  # noqa: F401  (autouse: SQLite in incremental mode)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

ALICE = "acme/alice"
BOB = "acme/bob"


@pytest.fixture(autouse=True)
def _patient(settings, purge_settings):
    """A purge waits for transactions of *any* database older than the erasure
    (PostgreSQL's VACUUM FULL keeps what they may see): on a server shared with other
    test runs, 10 s is too short to be sure none is open."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 120


def _steps(receipt: ErasureReceipt) -> list[dict]:
    return receipt.details["aliases"]["default"]["purge_steps"]


def _scan(receipt: ErasureReceipt) -> dict:
    return receipt.details["aliases"]["default"]["verification"]["scan"]


def _keep(kind: str, namespace: str, value: str) -> None:
    """Another person's kept row holding ``value`` in a key column (never in content)."""
    if kind == "subject":  # a project memory the colleague wrote, beside the summary
        Memory.objects.create(
            namespace=namespace,
            subject=value,
            scope="project",
            type="project_fact",
            key_normalized="colleague_note",
            title="colleague note",
            content="kept",
        )
    elif kind == "namespace":
        MemoryManager(project=value).upsert("team fact", "kept fact", scope="project")
    elif kind == "session id":
        SessionSummary.objects.create(
            namespace=namespace, subject=BOB, session_id=value, summary_text="bob's own summary"
        )
    elif kind == "review item session":
        ReviewItem.objects.create(
            namespace=namespace,
            subject=BOB,
            scope="user",
            type="preference",
            key_normalized="preference_tabs",
            title="Preference: tabs",
            content="likes tabs",
            source_session=value,
        )
    elif kind == "audit event actor":
        MemoryEvent.objects.create(
            memory_id="bobs-memory-id", event_type="update", namespace=namespace, actor=value
        )


@pytest.mark.parametrize(
    "kind", ["subject", "namespace", "session id", "review item session", "audit event actor"]
)
def test_an_erased_summary_equal_to_a_kept_key_verifies_in_one_attempt(kind):
    value = f"acme/colleague-{secrets.token_hex(6)}"
    # Alice's summary lives in the namespace whose partition holds the kept row.
    namespace = value if kind == "namespace" else "acme/web"
    _keep(kind, namespace, value)
    SessionSummary.objects.create(
        namespace=namespace, subject=ALICE, session_id="alice-s1", summary_text=value
    )
    receipt = erase(subject=ALICE)
    said = f"{receipt.purge_status}: {receipt.verification}"
    assert receipt.verified and receipt.state == ReceiptState.COMPLETE, said
    assert receipt.attempts == 1
    scan = _scan(receipt)
    # The scan did find the erased text (a kept row's bytes), and the kept rows explain it.
    assert scan["found"] == 0 and scan["found_in_kept_rows"] >= 1, scan
    assert "occur in rows that were kept" in receipt.verification
    steps = _steps(receipt)
    assert [(s["level"], s["outcome"]) for s in steps] == [(0, VERIFIED)], steps
    assert "escalated" not in receipt.purge_method and "purge steps" not in receipt.verification
    purge = receipt.details["aliases"]["default"]["purge"]
    if connection.vendor == "postgresql":  # the partitions that held the rows, not all 64
        assert 0 < len([t for t in purge["tables"] if t.startswith("session_summaries")]) < 64
    assert value.encode() in stored_bytes(), "control: the kept row's bytes are still stored"


# ------------------------------------------------------------ residue that stays
def _across_two_values(row: Memory) -> bytes:
    """Stored bytes no one value of ``row`` holds (its title's end and its content's start,
    adjacent in the record; PostgreSQL puts the content's one-byte header between)."""
    title, content = row.title.encode(), row.content.encode()
    stored = stored_bytes(checkpoint=True)
    for between in (b"", bytes([((len(content) + 1) << 1) | 1])):
        candidate = title[-14:] + between + content[:14]
        if candidate in stored:
            return candidate
    raise AssertionError("control: the title and content are stored side by side")


def test_identical_residue_is_not_purged_again_the_same_way(monkeypatch):
    gone = "esc/gone"
    kept_ns = namespace_beside(gone, "esc/kept-")
    row = MemoryManager(project=kept_ns).upsert(f"title {marker('t')}", f"{marker('c')} text")
    MemoryManager(project=gone).upsert("fact", "erased fact " + marker("gone"))
    across = _across_two_values(row)
    recall = probes.recall
    monkeypatch.setattr(probes, "recall", lambda rid, alias: [*recall(rid, alias), across])
    runs: list[str] = []
    real_run = ladder.run

    def run(step, *args, **kwargs):
        runs.append(step.name)
        return real_run(step, *args, **kwargs)

    monkeypatch.setattr(ladder, "run", run)

    receipt = erase(namespace=gone, purge=False)
    assert [r.pk for r in worker.run_once()] == [receipt.pk]
    receipt.refresh_from_db()
    steps = _steps(receipt)
    assert [s["outcome"] for s in steps] == [RESIDUE] * len(steps) and len(steps) >= 2, steps
    assert runs == [s["step"] for s in steps] and len(set(runs)) == len(runs), runs
    assert all(s["found"] == 1 for s in steps)
    # The same fragment after each stronger step: said so, and the strongest is not repeated.
    for before, after in zip(steps, steps[1:], strict=False):
        assert after["same_as"] == before["step"], steps
        assert f"(the same as after {before['step']})" in receipt.verification
    assert receipt.state == ReceiptState.NEEDS_ATTENTION and not receipt.verified
    assert receipt.attempts == 1
    reason = receipt.details["attention"]["reason"]
    assert f"the same as after {steps[-2]['step']}" in reason and "no stronger purge" in reason
    runs.clear()
    assert worker.run_once() == [] and runs == [], "no automatic attempt repeats a step"


# ------------------------------------------------------------ the full-rewrite interval
def _residue_until_everything(monkeypatch) -> list[ladder.Step]:
    """Verifications report residue until a step that rewrites every tenant's rows ran."""
    runs: list[ladder.Step] = []
    real_run, real_verify = ladder.run, purging._verify

    def run(step, *args, **kwargs):
        runs.append(step)
        return real_run(step, *args, **kwargs)

    def verify(alias, r, vendor, tables):
        ok, text, facts = real_verify(alias, r, vendor, tables)
        if runs and runs[-1].everything:
            return ok, text, facts
        scan = {**(facts.get("scan") or {}), "found": 3, "residue": "injected"}
        return False, text + "; (injected) 3 found", {**facts, "scan": scan}

    monkeypatch.setattr(ladder, "run", run)
    monkeypatch.setattr(purging, "_verify", verify)
    return runs


def test_a_second_full_rewrite_within_the_interval_waits_then_proceeds(settings, monkeypatch):
    settings.MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL = 3600
    runs = _residue_until_everything(monkeypatch)
    for ns in ("int/a", "int/b"):
        MemoryManager(project=ns).upsert("fact", f"fact of {ns} " + marker("i"))

    first = erase(namespace="int/a")
    assert first.verified, first.verification
    assert _steps(first)[-1]["outcome"] == VERIFIED and runs[-1].everything

    runs.clear()
    before = time.time()
    second = erase(namespace="int/b")
    assert not second.verified and second.state == ReceiptState.DELETED, second.verification
    assert not any(step.everything for step in runs), "no second rewrite of every tenant's rows"
    last = _steps(second)[-1]
    assert last["outcome"] == DEFERRED and last["result"].startswith("deferred until "), last
    assert "MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL" in second.verification
    due = second.claimed_until.timestamp()
    assert before + 3500 < due <= time.time() + 3600, "due when the interval ends"
    assert second.details["next_attempt"] and "deferred_until" not in second.details
    assert worker.run_once() == [], "not due before the interval ends"

    # The interval passes (the last start moved back by it): the retry rewrites, verified.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE schema_meta SET value = %s WHERE key = %s",
            [repr(time.time() - 3601), meta.FULL_REWRITE_KEY],
        )
    runs.clear()
    done = retry_purge(second.pk)[0]
    assert done.verified and done.state == ReceiptState.COMPLETE, done.verification
    assert [s.everything for s in runs] == [True], "it starts at the deferred step"
    assert _steps(done)[-1]["level"] == last["level"]


@pytest.mark.postgres_only
def test_one_of_several_racing_connections_takes_the_rewrite_slot():
    """Four processes' connections claim the slot at once: the database lets one have it."""
    barrier = threading.Barrier(4)
    answers: list[float] = []
    lock = threading.Lock()

    def claim() -> None:
        try:
            barrier.wait(timeout=30)
            opens = meta.claim_interval("test_slot", time.time(), 3600)
            with lock:
                answers.append(opens)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 4
    assert sorted(a == 0.0 for a in answers) == [False, False, False, True], answers
    assert all(a == 0.0 or a > time.time() + 3500 for a in answers)


def test_the_slot_opens_again_after_the_interval():
    assert meta.claim_interval("test_slot", 1000.0, 60) == 0.0
    assert meta.claim_interval("test_slot", 1030.0, 60) == 1060.0
    assert meta.claim_interval("test_slot", 1059.0, 60) == 1060.0
    assert meta.claim_interval("test_slot", 1060.0, 60) == 0.0  # taken again, from 1060
    assert meta.claim_interval("test_slot", 1100.0, 60) == 1120.0
    assert meta.claim_interval("test_slot", 1100.0, 0) == 0.0  # 0: no limit
    assert conf.erasure_full_rewrite_interval() == 0  # purge_settings: the other tests'
