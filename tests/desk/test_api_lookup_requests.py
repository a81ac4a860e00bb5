"""``POST /api/erasures/lookup/`` lists a key's data-subject requests to those who may view them.

Requests carry no namespace: staff holding ``view_subjectrequest`` see them all,
anyone else gets ``requests: []`` (the key is always in the answer, one shape).
"""

from __future__ import annotations

import datetime as dt

import pytest
from rest_framework.test import APIClient

from memoryapp.compliance import desk
from tests._admin_support import ALICE, BOB, OPERATOR_PERMS, make_staff
from tests.factories import make_officer

pytestmark = pytest.mark.django_db

LOOKUP = "/api/erasures/lookup/"


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def made():
    """Alice: one open request (assigned) and one answered; Bob: one open request."""
    officer = make_staff("officer")
    first = desk.open_request(
        subject=ALICE,
        right="access",
        actor="dpo",
        received_on=dt.date(2026, 1, 10),
        assignee=officer,
    )
    closed = desk.open_request(subject=ALICE, right="erasure", actor="dpo")
    desk.close(closed, refused=False, outcome="erased", actor="dpo")
    desk.open_request(subject=BOB, right="access", actor="dpo")
    return first, closed


def test_an_officer_finds_the_open_and_closed_requests_of_a_key(made):
    first, closed = made
    officer = make_officer("dpo")
    r = _client(officer).post(LOOKUP, {"subject": ALICE}, format="json")
    assert r.status_code == 200, r.content
    assert r["Cache-Control"] == "no-store"
    rows = r.json()["requests"]
    assert [x["id"] for x in rows] == [first.pk, closed.pk]
    assert rows[0] == {
        "id": first.pk,
        "right": "access",
        "status": "open",
        "received_on": "2026-01-10",
        "due_on": "2026-02-10",
        "urgency": desk.urgency(first),
        "assignee": "officer",
        "closed_at": None,
    }
    assert rows[1]["status"] == "answered" and rows[1]["assignee"] is None
    assert rows[1]["closed_at"] and rows[1]["urgency"] == ""
    assert ALICE not in r.content.decode()

    other = _client(officer).post(LOOKUP, {"subject": "acme/alicia"}, format="json")
    assert other.json()["requests"] == []


def test_an_operator_without_the_request_view_permission_gets_no_requests(made):
    operator = make_staff("ops", (*OPERATOR_PERMS, "view_erasurereceipt"))
    r = _client(operator).post(LOOKUP, {"subject": ALICE}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["requests"] == []
    # The permission alone makes the difference.
    viewer = make_staff("viewer", ("view_erasurereceipt", "view_subjectrequest"))
    r = _client(viewer).post(LOOKUP, {"subject": ALICE}, format="json")
    assert len(r.json()["requests"]) == 2


def test_a_client_with_grants_gets_no_requests_even_of_its_own_namespaces(made, acme):
    r = acme.post(LOOKUP, {"subject": ALICE}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["requests"] == []


def test_a_non_staff_account_holding_the_permission_gets_no_requests(made):
    # Requests are for staff: a permission given to a plain account does not open them.
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("plain")
    user.user_permissions.set(
        Permission.objects.filter(codename__in=("view_subjectrequest", "view_erasurereceipt"))
    )
    r = _client(user).post(LOOKUP, {"subject": ALICE}, format="json")
    assert r.status_code == 200, r.content
    assert r.json() == {"receipts": [], "exports": [], "requests": []}


def test_the_schema_declares_the_requests_of_a_lookup():
    schema = (
        _client(make_staff("root", superuser=True)).get("/api/schema/", {"format": "json"}).json()
    )
    out = schema["components"]["schemas"]["LookupOutput"]
    assert "requests" in out["required"]
    assert out["properties"]["requests"]["items"] == {"$ref": "#/components/schemas/RequestFound"}
    found = schema["components"]["schemas"]["RequestFound"]["properties"]
    assert set(found) == {
        "id",
        "right",
        "status",
        "received_on",
        "due_on",
        "urgency",
        "assignee",
        "closed_at",
    }
    assert found["assignee"]["nullable"] is True
    assert found["status"]["allOf"] == [{"$ref": "#/components/schemas/SubjectStatusEnum"}]
