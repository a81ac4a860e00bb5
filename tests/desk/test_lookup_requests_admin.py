"""The admin's lookup page lists a key's data-subject requests to those who may view them."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryapp.compliance import desk
from tests._admin_support import ALICE, BOB, RECEIPTS, client_for, make_staff

pytestmark = pytest.mark.django_db

LOOKUP = RECEIPTS + "lookup/"
REQUESTS = "/admin/memoryapp/subjectrequest/"


@pytest.fixture
def made():
    """Alice: an overdue open request (assigned) and an answered one; Bob: one open."""
    long_ago = desk.today() - dt.timedelta(days=60)
    overdue = desk.open_request(
        subject=ALICE,
        right="access",
        actor="dpo",
        received_on=long_ago,
        assignee=make_staff("handler"),
    )
    answered = desk.open_request(subject=ALICE, right="erasure", actor="dpo")
    desk.close(answered, refused=False, outcome="erased", actor="dpo")
    desk.open_request(subject=BOB, right="access", actor="dpo")
    return overdue, answered


def test_the_officer_sees_the_keys_requests_linked_to_their_pages(made, group_officer):
    overdue, answered = made
    r = group_officer.post(LOOKUP, {"subject": ALICE})
    assert r.status_code == 200 and "no-store" in r["Cache-Control"]
    assert r.context["show_requests"] is True
    assert [row["request"].pk for row in r.context["requests"]] == [overdue.pk, answered.pk]
    assert [row["urgency"] for row in r.context["requests"]] == ["overdue", ""]
    page = r.content.decode()
    assert "Data-subject requests (2)" in page
    assert f'href="{REQUESTS}{overdue.pk}/change/"' in page
    assert f'href="{REQUESTS}{answered.pk}/change/"' in page
    assert '<span class="mem-badge mem-tone-problem">overdue</span>' in page
    assert "handler" in page and "answered" in page
    # The linked page opens for the group_officer.
    assert group_officer.get(f"{REQUESTS}{answered.pk}/change/").status_code == 200


def test_another_key_finds_no_request(made, group_officer):
    r = group_officer.post(LOOKUP, {"subject": "acme/alicia"})
    assert r.context["requests"] == []
    assert "No data-subject request names this user key." in r.content.decode()


def test_a_receipt_reader_without_the_request_permission_sees_no_requests(made):
    reader = client_for(make_staff("auditor", ("view_erasurereceipt",)))
    r = reader.post(LOOKUP, {"subject": ALICE})
    assert r.status_code == 200
    assert r.context["show_requests"] is False and r.context["requests"] == []
    page = r.content.decode()
    assert "Data-subject requests" not in page and REQUESTS not in page


def test_the_request_permission_alone_opens_the_lookup_for_requests_only(made):
    viewer = client_for(make_staff("desk", ("view_subjectrequest",)))
    r = viewer.post(LOOKUP, {"subject": ALICE})
    assert r.status_code == 200
    assert len(r.context["requests"]) == 2
    assert r.context["show_receipts"] is False and r.context["show_exports"] is False
    nobody = client_for(make_staff("ops", ("view_memory",)))
    assert nobody.post(LOOKUP, {"subject": ALICE}).status_code == 403
