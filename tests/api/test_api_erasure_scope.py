"""A client's erasures and exports through the API: scope, records, receipts, caching.

Review findings on the integrated API:

1. A client's subject erasure is limited by its *grants* (exact names and
   case-sensitive prefixes), evaluated when the rows are selected — under the
   erasure locks, and again by a resumed erasure from its sealed request — not by
   the namespaces that held the subject's rows when the request was authorised:
   a row written meanwhile in a namespace no row of the subject lived in before
   goes too, and a row no erase grant covers is never touched.
2. Export records belong to the account that exported, not to its name: a later
   client reusing a deleted client's name reads none of its records.
3. A review-queue purge's receipts are readable by the client that asked for it.
4. ``GET /api/exports/`` answers ``Cache-Control: no-store``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from memoryapp import MemoryManager
from memoryapp.api import idempotency
from memoryapp.api.models import NamespaceGrant
from memoryapp.api.testing import token_client
from memoryapp.compliance import engine, erase, sealed
from memoryapp.compliance.selection import Target
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    Memory,
    ReceiptState,
    ReviewItem,
    SessionSummary,
)

pytestmark = pytest.mark.django_db

ALICE = "acme/alice"
SECRET = "ALICE SECRET"


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


def _summary(namespace: str, text: str = SECRET) -> SessionSummary:
    return SessionSummary.objects.create(
        namespace=namespace, subject=ALICE, session_id="s1", summary_text=text
    )


def _review_item(namespace: str, *, subject: str = ALICE, status: str = "pending"):
    return ReviewItem.objects.create(
        namespace=namespace,
        subject=subject,
        scope="project",
        type="note",
        key_normalized=f"k {namespace}",
        title="t",
        content=SECRET,
        status=status,
    )


def _write_between_check_and_erase(monkeypatch, write) -> None:
    """Run ``write`` after the request was authorised, just before the erasure runs."""
    real = idempotency._erase

    def racing(data, actor, receipt_id):
        write()
        return real(data, actor, receipt_id)

    monkeypatch.setattr(idempotency, "_erase", racing)


# ------------------------------------------------------------ 1. grants, not a list
def test_a_row_written_in_a_new_granted_namespace_during_the_request_is_erased(monkeypatch):
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    MemoryManager(project="acme/web", user=ALICE).upsert("pref", "alice likes tea", scope="user")

    def write():
        _summary("acme/other")  # no row of alice lived in acme/other at check time
        _review_item("acme/third")
        _summary("globex/web", "GLOBEX KEPT")  # another tenant's: never touched
        _summary("ACME/other", "CASE KEPT")  # not covered by acme/ (case-sensitive)

    _write_between_check_and_erase(monkeypatch, write)
    r = acme.post("/api/erasures/", {"subject": ALICE}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["criteria"]["limited_to_grants"] is True
    assert body["counts"]["session_summaries"] == 1
    assert body["counts"]["memory_review_queue"] == 1
    assert not Memory.objects.filter(subject=ALICE).exists()
    assert not ReviewItem.objects.filter(subject=ALICE).exists()
    left = set(SessionSummary.objects.filter(subject=ALICE).values_list("namespace", flat=True))
    assert left == {"globex/web", "ACME/other"}


def test_only_grants_with_the_erase_right_limit_the_erasure(monkeypatch):
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    # Read (and write) without erase in shared/, an exact grant with erase on "team".
    NamespaceGrant.objects.create(
        user=acme.user, namespace="shared/", can_read=True, can_write=True
    )
    NamespaceGrant.objects.create(user=acme.user, namespace="team", can_erase=True)
    _summary("acme/web")

    def write():
        _summary("shared/x", "SHARED KEPT")
        _summary("team")
        _summary("team/sub", "EXACT GRANT KEPT")  # "team" is exact: not a prefix

    _write_between_check_and_erase(monkeypatch, write)
    dry = acme.post("/api/erasures/", {"subject": ALICE, "dry_run": True}, format="json")
    assert dry.status_code == 200 and dry.json()["counts"]["session_summaries"] == 1
    r = acme.post("/api/erasures/", {"subject": ALICE}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["counts"]["session_summaries"] == 2  # acme/web and team
    left = set(SessionSummary.objects.values_list("namespace", flat=True))
    assert left == {"shared/x", "team/sub"}


def test_a_subject_outside_the_erase_grants_is_still_refused():
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    NamespaceGrant.objects.create(user=acme.user, namespace="shared/", can_read=True)
    _summary("acme/web")
    assert acme.post("/api/erasures/", {"subject": "globex/bob"}, format="json").status_code == 404
    assert acme.post("/api/erasures/", {"subject": "shared/bob"}, format="json").status_code == 403
    assert SessionSummary.objects.count() == 1


def test_a_resumed_erasure_keeps_the_grants_it_was_sealed_with(monkeypatch, settings):
    """The worker (or a retry) reads the request back from the receipt: the grants are in it."""
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    _summary("acme/web")

    def crash(receipt, targets):
        raise RuntimeError("the process died before deleting")

    monkeypatch.setattr(engine, "delete", crash)
    acme.raise_request_exception = False
    r = acme.post("/api/erasures/", {"subject": ALICE}, format="json")
    assert r.status_code == 500
    monkeypatch.undo()
    receipt = ErasureReceipt.objects.get()
    assert receipt.state == ReceiptState.REQUESTED
    opened = sealed.unseal(receipt.sealed)
    assert opened is not None and opened[0][0].grants == (("acme/", True),)
    # Written after the crash: a new acme namespace (erased), another tenant (kept).
    _summary("acme/later")
    _summary("globex/web", "GLOBEX KEPT")
    engine.retry(receipt)
    receipt.refresh_from_db()
    assert receipt.state != ReceiptState.REQUESTED  # deleted (purged once committed)
    assert list(SessionSummary.objects.values_list("namespace", flat=True)) == ["globex/web"]


def test_sealed_grants_round_trip():
    target = Target("subject", subject=ALICE, grants=(("", False), ("acme/", True)))
    assert sealed.target_from_dict(sealed.target_to_dict(target)) == target
    plain = Target("subject", subject=ALICE)
    assert sealed.target_from_dict(sealed.target_to_dict(plain)).grants is None


def test_python_erasure_by_grants_is_case_sensitive():
    for ns in ("acme/web", "Acme/web", "acme", "acmex/web"):
        _summary(ns)
    receipt = erase(subject=ALICE, grants=[("acme/", True), ("acme", False)])
    assert receipt.criteria["limited_to_grants"] is True
    left = sorted(SessionSummary.objects.values_list("namespace", flat=True))
    assert left == ["Acme/web", "acmex/web"]


def test_a_subject_export_by_a_client_follows_its_grants():
    acme = token_client("acme-app", ["acme/"])
    _summary("acme/web")
    _summary("globex/web", "GLOBEX")
    r = acme.get("/api/exports/", {"subject": ALICE})
    assert r.status_code == 200, r.content
    doc = r.json()
    assert doc["limited_to_grants"] is True
    assert [s["namespace"] for s in doc["session_summaries"]] == ["acme/web"]


# ------------------------------------------------------- 2. records by account
def test_export_records_do_not_follow_a_reused_client_name():
    bob = token_client("bob", ["acme/"], write=True, erase=True)
    _summary("acme/web")
    assert bob.get("/api/exports/", {"subject": ALICE}).status_code == 200
    record = ExportRecord.objects.get()
    assert record.user == bob.user
    found = bob.post("/api/erasures/lookup/", {"subject": ALICE}, format="json")
    assert [e["id"] for e in found.json()["exports"]] == [record.id]

    get_user_model().objects.filter(username="bob").delete()
    record.refresh_from_db()
    assert record.user is None  # kept for the audit, owned by no one
    bob2 = token_client("bob", ["globex/"])
    r = bob2.post("/api/erasures/lookup/", {"subject": ALICE}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["exports"] == []


# ----------------------------------------------- 3. purge receipts for the asker
def test_a_review_purge_receipt_is_readable_by_the_client_that_asked():
    acme = token_client("acme-p", ["acme/"], write=True, erase=True)
    other = token_client("acme-q", ["acme/"], write=True, erase=True)
    _review_item("acme/web", status="rejected")
    _review_item("acme/app", status="rejected")
    r = acme.post("/api/review-items/purge/", {"status": "rejected"}, format="json")
    assert r.status_code == 200, r.content
    ids = r.json()["receipts"]
    assert len(ids) == 2 and r.json()["purged"] == 2
    for rid in ids:
        got = acme.get(f"/api/erasures/{rid}/")
        assert got.status_code == 200 and got.json()["id"] == rid
        assert other.get(f"/api/erasures/{rid}/").status_code == 404
    listed = acme.get("/api/erasures/").json()
    assert sorted(x["id"] for x in listed["results"]) == sorted(ids)
    assert other.get("/api/erasures/").json()["count"] == 0
    one = acme.post("/api/review-items/purge/", {"namespace": "acme/web"}, format="json")
    assert acme.get(f"/api/erasures/{one.json()['receipts'][0]}/").status_code == 200


# ----------------------------------------------------------- 4. never cached
def test_an_export_is_never_cached():
    acme = token_client("acme-app", ["acme/"])
    _summary("acme/web")
    r = acme.get("/api/exports/", {"subject": ALICE})
    assert r.status_code == 200
    assert "no-store" in r["Cache-Control"]
    assert "private" in r["Cache-Control"]
