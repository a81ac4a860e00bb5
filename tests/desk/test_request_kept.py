""" "What do we hold about this person?" counts the project memories an erasure keeps.

The desk's holdings are what an erasure removes; the project memories the subject wrote
or contributed to (through an approved review item of a key others proposed too) are
kept by it but listed by its export. The erase page, the API's lookup and the CLI show
them apart, so an officer is told of them before answering.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.compliance import desk, erase, export
from memoryapp.compliance.holdings import KEPT_AUTHORED, KEPT_CONTRIBUTED, holdings, kept
from memoryapp.models import Memory, ReviewItem
from tests._admin_support import ALICE, PROJECT, client_for, make_staff, seed_tenant
from tests.factories import make_staff_api

pytestmark = pytest.mark.django_db

NS = "acme/support"
DAVE, ERIN = "acme/dave", "acme/erin"
DECISION = {"role": "user", "content": "We decided to use Postgres for the ledger."}


def _shared_memory() -> Memory:
    """dave and erin propose the same project decision; approving it approves both."""
    for subject in (DAVE, ERIN):
        MemoryManager(project=NS, user=subject).crystallize_user_messages([DECISION])
    item = ReviewItem.objects.pending().filter(scope="project", subject=DAVE).get()
    memory = MemoryManager(project=NS).approve_review_item(item.pk, actor="root")
    assert memory is not None and memory.subject is None
    return memory


def test_kept_lists_what_they_wrote_and_what_they_contributed_to_and_holdings_do_not():
    seed_tenant()
    shared = _shared_memory()
    assert kept(ERIN) == {KEPT_CONTRIBUTED: {NS: 1}}
    assert kept(ALICE) == {KEPT_AUTHORED: {PROJECT: 1}}
    # The erasure removes erin's review item, never the memory dave still supports.
    held = holdings(ERIN)
    assert held.get("memories", {}) == {} and held["memory_review_queue"] == {NS: 1}
    # Within the request's namespaces only; the export lists exactly what kept() counts.
    assert kept(ERIN, ["acme/web"]) == {}
    document = export(subject=ERIN)
    assert [m["id"] for m in document["project_memories_contributed"]] == [shared.pk]


def test_the_memory_is_kept_while_contributed_and_goes_with_its_last_supporter():
    shared = _shared_memory()
    erase(subject=DAVE, include_authored=True, actor="dpo")
    # dave's evidence is gone: erin is its last supporter, an erasure of erin would remove it.
    assert Memory.objects.filter(pk=shared.pk, deleted_at__isnull=True).exists()
    assert kept(ERIN) == {KEPT_CONTRIBUTED: {NS: 1}}
    erase(subject=ERIN, include_authored=True, actor="dpo")
    assert not Memory.objects.filter(pk=shared.pk).exists()
    assert kept(ERIN) == {}


def test_the_erase_page_shows_the_kept_project_memories_apart_from_the_total():
    _shared_memory()
    made = desk.open_request(subject=ERIN, right="erasure", actor="intake")
    officer = client_for(
        make_staff("dpo", perms=("view_subjectrequest", "change_subjectrequest", "erase_memory"))
    )
    r = officer.post(f"/admin/memoryapp/subjectrequest/{made.pk}/act/erase/")
    page = r.content.decode()
    assert r.status_code == 200 and 'id="kept"' in page
    assert "Project memories others also proposed" in page and ERIN not in page
    # The total counts what the erasure removes: erin's review item and its events only.
    held = holdings(ERIN)
    assert set(held) == {"memory_review_queue", "memory_events"}
    assert f">{sum(sum(per.values()) for per in held.values())}</td></tr></tfoot>" in page


def test_the_api_lookup_returns_kept_beside_holdings():
    seed_tenant()
    client = make_staff_api("dpo", ["view_subjectrequest", "export_memory"])
    body = client.post("/api/subject-requests/lookup/", {"subject": ALICE}, format="json").json()
    assert body["kept"] == {KEPT_AUTHORED: {PROJECT: 1}}
    assert "memories" in body["holdings"]


def test_the_cli_erase_names_what_it_keeps(monkeypatch, settings):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    _shared_memory()
    made = desk.open_request(subject=ERIN, right="erasure", actor="intake")
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    out = io.StringIO()
    with pytest.raises(CommandError, match="Aborted"):
        call_command("memory", "requests", "erase", made.pk, stdout=out, stderr=io.StringIO())
    assert "kept (project memories, not erased): project_memories_contributed 1" in out.getvalue()
