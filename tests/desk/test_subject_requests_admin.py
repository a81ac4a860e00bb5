"""The desk's requests in the admin: intake through the service, due-date list, history."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryapp.compliance import desk
from memoryapp.models import SubjectRequest
from tests._admin_support import ALICE, BOB, OPERATOR_PERMS, client_for, make_staff

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"


def test_intake_opens_the_request_through_the_service_without_storing_the_key(request_handler):
    r = request_handler.post(
        URL + "add/",
        {
            "subject": ALICE,
            "right": "erasure",
            "received_on": desk.today().isoformat(),
            "namespaces": "acme/web\n",
            "notes": f"mail from {ALICE}",
        },
    )
    assert r.status_code == 302, r.content[:2000]
    made = SubjectRequest.objects.get()
    assert desk.unseal(made) == desk.Sealed(ALICE, ("acme/web",))
    assert ALICE not in made.notes and made.created_by == "dpo"
    assert [e.action for e in made.history.all()] == ["created"]
    page = request_handler.get(f"{URL}{made.pk}/change/")
    assert page.status_code == 200 and ALICE.encode() not in page.content


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("received_on", "2999-01-01", b"in the future"),
        ("notes", "key AKIA" + "IOSFODNN7EXAMPLE", b"hold a secret"),
        ("subject", "   ", b"subject key is needed"),
    ],
)
def test_intake_refusals_show_on_the_form(request_handler, field, value, error):
    data = {"subject": ALICE, "right": "access", "received_on": desk.today().isoformat()}
    r = request_handler.post(URL + "add/", {**data, field: value})
    assert r.status_code == 200 and error in r.content
    assert not SubjectRequest.objects.exists()


def test_the_list_is_by_due_date_with_overdue_and_due_soon_flagged(request_handler):
    day = desk.today()
    desk.open_request(subject=ALICE, right="access", actor="x", received_on=day)
    desk.open_request(
        subject=BOB, right="access", actor="x", received_on=day - dt.timedelta(days=40)
    )
    desk.open_request(
        subject="acme/c", right="access", actor="x", received_on=day - dt.timedelta(days=27)
    )
    page = request_handler.get(URL).content.decode()
    assert page.index("overdue") < page.index("due this week")
    assert ALICE not in page and BOB not in page


def test_an_operator_does_not_see_the_desk():
    operator = client_for(make_staff("op", perms=OPERATOR_PERMS))
    assert operator.get(URL).status_code == 403
