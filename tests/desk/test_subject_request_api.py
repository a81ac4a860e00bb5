"""``/api/subject-requests/`` and the compliance role: who may, and what the answers hold."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from memoryapp import permissions as perms
from memoryapp.api.testing import token_client
from memoryapp.compliance.desk import open_request
from memoryapp.models import ErasureReceipt, ExportRecord, Memory, ReceiptState, SubjectRequest
from tests._admin_support import ALICE, BOB, OPERATOR_PERMS, make_staff, seed_tenant
from tests.factories import make_staff_api

pytestmark = pytest.mark.django_db

URL = "/api/subject-requests/"


def test_the_compliance_group_can_see_export_erase_but_not_edit_memories():
    group = Group.objects.get(name=perms.COMPLIANCE_GROUP)
    held = {f"memoryapp.{p.codename}" for p in group.permissions.all()}
    assert held == set(perms.COMPLIANCE_PERMS)
    assert perms.CHANGE_MEMORY not in held and perms.CHANGE_REVIEWITEM not in held
    assert perms.WIPE_MEMORY not in held
    # Created before Django's own pass: with the labels that pass would have given.
    names = {p.codename: p.name for p in group.permissions.all()}
    assert names["erase_memory"] == "Can erase memories permanently"
    assert names["view_subjectrequest"] == "Can view subject request"
    operator = make_staff("op", perms=OPERATOR_PERMS)
    assert not operator.has_perm(perms.VIEW_SUBJECTREQUEST)
    assert not operator.has_perm(perms.ERASE_MEMORY)


def test_the_officers_path_over_the_api_never_echoes_the_key(api_officer):
    seed_tenant()
    made = api_officer.post(URL, {"subject": ALICE, "right": "erasure"}, format="json")
    assert made.status_code == 201, made.content
    rid = made.json()["id"]
    assert made.json()["status"] == "open" and made.json()["history"][0]["action"] == "created"

    found = api_officer.post(URL + "lookup/", {"subject": ALICE}, format="json")
    assert [r["id"] for r in found.json()["requests"]] == [rid]
    assert found.json()["holdings"]["memories"]
    assert found["Cache-Control"] == "no-store"
    assert (
        api_officer.post(URL + "lookup/", {"subject": BOB}, format="json").json()["requests"] == []
    )

    exported = api_officer.post(f"{URL}{rid}/export/", format="json")
    assert exported.status_code == 200 and exported.json()["documents"][0]["counts"]["memories"]
    erased = api_officer.post(f"{URL}{rid}/erase/", format="json")
    assert erased.status_code == 200
    (receipt_id,) = erased.json()["receipts"]

    extended = api_officer.post(
        f"{URL}{rid}/act/", {"action": "extend", "months": 1, "text": "backups"}, format="json"
    )
    assert extended.json()["extension_months"] == 1
    refused = api_officer.post(f"{URL}{rid}/act/", {"action": "refuse", "text": ""}, format="json")
    assert refused.status_code == 400
    answered = api_officer.post(
        f"{URL}{rid}/act/", {"action": "answer", "text": "export sent"}, format="json"
    )
    body = answered.json()
    assert body["status"] == "answered" and body["receipts"] == [receipt_id]
    assert body["exports"] == list(ExportRecord.objects.values_list("id", flat=True))
    assert [h["action"] for h in body["history"]] == [
        "created",
        "started",
        "exported",
        "erased",
        "extended",
        "answered",
    ]
    assert {h["actor"] for h in body["history"]} == {"api:dpo"}
    for response in (
        made,
        extended,
        answered,
        api_officer.get(URL),
        api_officer.get(f"{URL}{rid}/"),
    ):
        assert ALICE.encode() not in response.content
    again = api_officer.post(f"{URL}{rid}/export/", format="json")
    assert again.status_code == 400 and b"closed" in again.content
    assert ErasureReceipt.objects.get(pk=receipt_id).subject_requests.get().pk == rid


def test_list_is_by_due_date_and_filters_refuse_unknown_values(api_officer):
    late = api_officer.post(
        URL, {"subject": BOB, "right": "access", "received_on": "2026-01-02"}, format="json"
    ).json()
    fresh = api_officer.post(URL, {"subject": ALICE, "right": "access"}, format="json").json()
    listed = api_officer.get(URL).json()["results"]
    assert [r["id"] for r in listed] == [late["id"], fresh["id"]]
    assert listed[0]["urgency"] == "overdue"
    assert api_officer.get(URL, {"status": "answered"}).json()["results"] == []
    assert api_officer.get(URL, {"status": "lost"}).status_code == 400


@pytest.mark.parametrize(
    "who",
    [
        "client",  # an API client with erase grants, not staff
        "operator",  # staff without the desk's permissions
        "viewer",  # may see requests, not act on them
    ],
)
def test_who_may_not(who):
    request = open_request(subject=ALICE, right="erasure", actor="dpo")
    if who == "client":
        client = token_client("app", ["acme/"], write=True, erase=True)
    elif who == "operator":
        client = make_staff_api("op", OPERATOR_PERMS)
    else:
        client = make_staff_api("viewer", ["view_subjectrequest"])
    if who == "viewer":
        assert client.get(URL).status_code == 200
    else:
        assert client.get(URL).status_code == 403
        assert client.post(URL + "lookup/", {"subject": ALICE}, format="json").status_code == 403
    assert client.post(URL, {"subject": BOB, "right": "access"}, format="json").status_code == 403
    assert client.post(f"{URL}{request.id}/erase/", format="json").status_code == 403
    act = client.post(f"{URL}{request.id}/act/", {"action": "start"}, format="json")
    assert act.status_code == 403
    request.refresh_from_db()
    assert request.status == "open" and not ErasureReceipt.objects.exists()
    assert SubjectRequest.objects.count() == 1


def test_erase_needs_the_erase_permission_too():
    request = open_request(subject=ALICE, right="erasure", actor="dpo")
    desk_only = make_staff_api(
        "clerk", ["view_subjectrequest", "add_subjectrequest", "change_subjectrequest"]
    )
    assert desk_only.post(f"{URL}{request.id}/erase/", format="json").status_code == 403
    assert desk_only.post(f"{URL}{request.id}/export/", format="json").status_code == 403
    ok = desk_only.post(f"{URL}{request.id}/act/", {"action": "note", "text": "ok"}, format="json")
    assert ok.status_code == 200


# A purge (VACUUM) runs only outside a transaction: a transactional test database.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("worker", [True, False])
def test_erase_for_a_request_leaves_the_purge_to_the_worker_when_it_runs(settings, worker):
    """As ``POST /api/erasures/``: with the erasure worker on, the request deletes the rows and
    answers; the worker purges and verifies. Without it, the request purges and verifies."""
    settings.MEMORYAPP_ERASURE_WORKER = worker
    # The flushed database has no Compliance group (a migration makes it): its permissions.
    officer = make_staff_api("dpo", [perms.codename(p) for p in perms.COMPLIANCE_PERMS])
    seed_tenant()
    rid = officer.post(URL, {"subject": ALICE, "right": "erasure"}, format="json").json()["id"]
    erased = officer.post(f"{URL}{rid}/erase/", format="json")
    assert erased.status_code == 200, erased.content
    (receipt_id,) = erased.json()["receipts"]
    receipt = ErasureReceipt.objects.get(pk=receipt_id)
    expected = ReceiptState.DELETED if worker else ReceiptState.COMPLETE
    assert receipt.state == expected
    assert not Memory.objects.filter(subject=ALICE).exists()


def test_what_we_hold_is_only_for_who_may_export_or_erase(api_officer):
    """A request handler (view only) finds the key's requests, not where its data lies."""
    seed_tenant()
    viewer = make_staff_api("viewer", ["view_subjectrequest"])
    seen = viewer.post(URL + "lookup/", {"subject": ALICE}, format="json").json()
    assert (seen["holdings"], seen["kept"]) == ({}, {})
    exporter = make_staff_api("exporter", ["view_subjectrequest", "export_memory"])
    full = exporter.post(URL + "lookup/", {"subject": ALICE}, format="json").json()
    assert full["holdings"]["memories"] and full["kept"]
    assert full == api_officer.post(URL + "lookup/", {"subject": ALICE}, format="json").json()
