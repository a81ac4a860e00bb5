"""The desk as an attacker tries it: ids no request can have, every URL by who may not,
POSTs without a CSRF token, and the subject key looked for wherever it must not be
(pages after intake, a confirmation echoing what was typed, logs)."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memoryapp.compliance import desk
from memoryapp.models import ErasureReceipt, ExportRecord, SubjectRequest, SubjectRequestEvent
from tests._admin_support import (
    ALICE,
    DESK_PERMS,
    OPERATOR_PERMS,
    REQUEST_HANDLER_PERMS,
    client_for,
    make_staff,
    messages_of,
    seed_tenant,
)

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"
API = "/api/subject-requests/"
LOOKUP = "/admin/memoryapp/erasurereceipt/lookup/"
ACTIONS = ("start", "assign", "extend", "note", "export", "erase", "answer", "refuse")
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
FORM = {"post": "yes", "outcome": "x", "text": "x", "months": "1", "reason": "r"}


@pytest.fixture
def made():
    return desk.open_request(subject=ALICE, right="erasure", actor="intake")


def untouched(made: SubjectRequest) -> None:
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.status == "open" and row.notes == "" and row.extension_months == 0
    assert list(
        SubjectRequestEvent.objects.filter(request=row).values_list("action", flat=True)
    ) == ["created"]
    assert not ExportRecord.objects.exists() and not ErasureReceipt.objects.exists()


# ------------------------------------------------------------------ ids no request can have
@pytest.mark.parametrize("bad", ["%00", "_00", "a" * 65, "0" * 31 + "%00"])
def test_an_impossible_id_in_an_action_url_is_404_on_both_vendors(made, bad, officer):
    """A NUL reached PostgreSQL as an error: a 500 before (the admin's ``_00`` quoting too)."""
    for name in ACTIONS:
        assert officer.post(f"{URL}{bad}/act/{name}/", FORM).status_code == 404
    api = APIClient()
    api.force_authenticate(make_staff("dpo-api", DESK_PERMS))
    assert api.get(f"{API}{bad}/").status_code == 404
    for name in ("act", "export", "erase"):
        r = api.post(f"{API}{bad}/{name}/", {"action": "start"}, format="json")
        assert r.status_code == 404, (name, r.content)
    untouched(made)


# ------------------------------------------------------------------ who may not
def _desk_urls(made) -> list[str]:
    rid = made.pk
    return ["", "add/", f"{rid}/change/", f"{rid}/history/", f"{rid}/delete/"] + [
        f"{rid}/act/{a}/" for a in ACTIONS
    ]


def test_an_operator_is_refused_on_every_desk_url_whatever_the_method(made):
    operator = client_for(make_staff("op", OPERATOR_PERMS))
    for url in _desk_urls(made):
        assert operator.get(URL + url).status_code == 403, url
        assert operator.post(URL + url, FORM).status_code == 403, url  # change/: was 405
    assert operator.post(LOOKUP, {"subject": ALICE}).status_code == 403
    untouched(made)


def test_a_viewer_reads_but_every_action_is_refused(made):
    viewer = client_for(make_staff("viewer", ("view_subjectrequest",)))
    assert viewer.get(f"{URL}{made.pk}/change/").status_code == 200
    assert viewer.post(f"{URL}{made.pk}/change/", FORM).status_code == 405  # no form to save
    for name in ACTIONS:
        assert viewer.post(f"{URL}{made.pk}/act/{name}/", FORM).status_code == 403, name
        assert viewer.get(f"{URL}{made.pk}/act/{name}/").status_code == 403, name
    for url in ("add/", f"{made.pk}/delete/"):
        assert viewer.post(URL + url, {"subject": ALICE, "right": "access"}).status_code == 403
    api = APIClient()
    api.force_authenticate(make_staff("viewer-api", ("view_subjectrequest",)))
    assert api.get(f"{API}{made.pk}/").status_code == 200
    for name in ("act", "export", "erase"):
        r = api.post(f"{API}{made.pk}/{name}/", {"action": "note", "text": "x"}, format="json")
        assert r.status_code == 403, name
    assert api.post(API, {"subject": ALICE, "right": "access"}, format="json").status_code == 403
    untouched(made)


def test_a_handler_without_the_compliance_role_cannot_export_or_erase(made):
    seed_tenant()
    handler = client_for(make_staff("handler", REQUEST_HANDLER_PERMS))
    for name in ("export", "erase"):
        assert handler.post(f"{URL}{made.pk}/act/{name}/", FORM).status_code == 403
    api = APIClient()
    api.force_authenticate(make_staff("handler-api", REQUEST_HANDLER_PERMS))
    for name in ("export", "erase"):
        assert api.post(f"{API}{made.pk}/{name}/", format="json").status_code == 403
    untouched(made)


# ------------------------------------------------------------------ CSRF
def test_posts_without_a_csrf_token_change_nothing(made, dpo):
    seed_tenant()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(dpo)
    for name in ACTIONS:
        assert browser.post(f"{URL}{made.pk}/act/{name}/", FORM).status_code == 403, name
    assert browser.post(URL + "add/", {"subject": ALICE, "right": "access"}).status_code == 403
    session_api = APIClient(enforce_csrf_checks=True)
    session_api.force_login(dpo)  # a logged-in browser, not a token: CSRF applies
    for name, body in (("act", {"action": "note", "text": "x"}), ("erase", {}), ("export", {})):
        assert session_api.post(f"{API}{made.pk}/{name}/", body, format="json").status_code == 403
    untouched(made)
    assert SubjectRequest.objects.count() == 1


# ------------------------------------------------------------------ the key on pages
def test_closing_confirms_the_outcome_as_it_will_be_stored_never_the_key(made, officer):
    for name in ("answer", "refuse"):
        page = officer.post(f"{URL}{made.pk}/act/{name}/", {"outcome": f"told {ALICE} by mail"})
        assert page.status_code == 200 and b'id="close-outcome"' in page.content
        assert ALICE.encode() not in page.content  # was echoed, in the text and the form
        assert b"told (the subject) by mail" in page.content
    untouched(made)


def test_a_secret_in_the_outcome_is_refused_before_it_is_shown(made, officer):
    r = officer.post(f"{URL}{made.pk}/act/answer/", {"outcome": f"key {AWS_KEY}"}, follow=True)
    assert AWS_KEY.encode() not in r.content
    (message,) = messages_of(r)
    assert "hold a secret" in message
    untouched(made)


def test_the_request_page_has_no_close_link_beside_the_desks_close(made, officer):
    page = officer.get(f"{URL}{made.pk}/change/").content
    assert b'class="closelink"' not in page  # "Close" here means answering the request
    assert b"Answered" in page


def test_the_whole_path_logs_nothing_of_the_key_even_its_failures(made, caplog, monkeypatch):
    seed_tenant()
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(logging.getLogger("django.request"), "propagate", True)
    caplog.set_level(logging.DEBUG, logger="django.request")
    officer = client_for(make_staff("dpo", DESK_PERMS))  # made once the logs are captured
    today = desk.today().isoformat()
    officer.post(URL + "add/", {"subject": ALICE, "right": "access", "received_on": today})
    officer.post(URL + "add/", {"subject": ALICE, "right": "access", "notes": f"k {AWS_KEY}"})
    officer.post(URL + "add/", {"subject": ALICE, "right": "access", "namespaces": "n" * 300})
    for name, data in (
        ("note", {"text": f"called {ALICE}"}),
        ("note", {"text": f"{ALICE}\x00"}),
        ("extend", {"months": "3", "reason": ALICE}),
        ("export", {"post": "yes"}),
        ("erase", {"post": "yes"}),
        ("answer", {"outcome": f"told {ALICE}", "post": "yes"}),
        ("erase", {"post": "yes"}),  # closed: refused
    ):
        officer.post(f"{URL}{made.pk}/act/{name}/", data)
    api = APIClient()
    api.force_authenticate(make_staff("dpo-api", DESK_PERMS))
    api.post(API, {"subject": ALICE, "right": "nonsense"}, format="json")
    api.post(API, {"subject": ALICE * 30, "right": "access"}, format="json")
    assert caplog.text  # requests and their 400s were logged
    assert ALICE not in caplog.text
    assert SubjectRequest.objects.get(pk=made.pk).status == "answered"


@pytest.mark.parametrize("value", ["²", "١", "9" * 30, "-1", "1.0", "\x00", "x" * 200])
def test_assigning_to_a_value_no_user_has_is_a_message(made, value, officer):
    """ "²".isdigit() is true: the query raised ValueError (a 500) before."""
    r = officer.post(f"{URL}{made.pk}/act/assign/", {"assignee": value}, follow=True)
    assert messages_of(r) == ["Assign: No such user."]
    untouched(made)


def test_a_refused_intake_form_is_not_cached_nor_remembered_by_the_browser(officer):
    r = officer.post(URL + "add/", {"subject": ALICE, "right": "access", "notes": f"k {AWS_KEY}"})
    assert r.status_code == 200 and b"hold a secret" in r.content  # the key is in the form
    assert "no-store" in r["Cache-Control"]  # the admin site never caches its pages
    assert b'autocomplete="off"' in r.content and AWS_KEY.encode() in r.content  # typed back
    assert not SubjectRequest.objects.exists()


def test_a_tenants_api_client_learns_nothing_of_any_request(made):
    """Requests have no namespace: a client with grants is refused the same way for a real
    id and an unknown one (no oracle of which ids exist)."""
    from memoryapp.api.testing import token_client

    tenant = token_client("acme-app", ["acme/"], write=True, erase=True)
    for rid in (made.pk, "0" * 32):
        assert tenant.get(f"{API}{rid}/").status_code == 403
        for name in ("act", "export", "erase"):
            assert tenant.post(f"{API}{rid}/{name}/", {}, format="json").status_code == 403
    untouched(made)


def test_the_api_lookup_names_the_persons_own_namespace_without_echoing_the_key(made):
    """Its holdings were keyed by namespace, and a user-scope namespace is the key itself."""
    seed_tenant()
    api = APIClient()
    api.force_authenticate(make_staff("dpo-api", DESK_PERMS))
    for url in (API + "lookup/", "/api/erasures/lookup/"):
        r = api.post(url, {"subject": ALICE}, format="json")
        assert r.status_code == 200 and ALICE not in r.content.decode(), url
    held = api.post(API + "lookup/", {"subject": ALICE}, format="json").json()["holdings"]
    assert held["memories"] == {"(the person's own namespace)": 3}
    assert held["session_summaries"] == {"acme/web": 1}


@pytest.mark.parametrize("perms", [OPERATOR_PERMS, ("view_subjectrequest",)])
def test_the_proof_made_for_a_request_is_refused_to_who_may_not_read_it(made, perms):
    """The receipt, its print view and the export record of a request: an operator, and a
    colleague who may only view requests, are refused (the request page lists their ids)."""
    seed_tenant()
    desk.export_for(made, actor="dpo")
    (receipt,) = desk.erase_for(made, actor="dpo", purge=False)
    record = made.exports.get()
    other = client_for(make_staff("other", perms))
    for url in (
        f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/",
        f"/admin/memoryapp/erasurereceipt/{receipt.pk}/print/",
        f"/admin/memoryapp/exportrecord/{record.pk}/change/",
        "/admin/memoryapp/erasurereceipt/",
        "/admin/memoryapp/exportrecord/",
    ):
        assert other.get(url).status_code == 403, url


@pytest.mark.parametrize(
    "model", ["subjectrequest", "erasurereceipt", "exportrecord", "memory", "reviewitem"]
)
@pytest.mark.parametrize("query", ["?id=%00", "?status=%00", "?actor=%00", "?%00=1"])
def test_a_nul_in_a_list_pages_query_is_the_admins_invalid_lookup_page(model, query):
    """A 500 on PostgreSQL before (the lookup reached the server as a DataError)."""
    root = client_for(make_staff("root", superuser=True))
    r = root.get(f"/admin/memoryapp/{model}/{query}")
    assert r.status_code == 302 and r["Location"].endswith("?e=1")
