"""Intake at the desk (issue #39): a key no writer could store is refused with the shared
key rules, and a key that holds nothing is recorded with a warning, not refused."""

from __future__ import annotations

import pytest

from memoryapp.compliance import desk
from memoryapp.compliance.request_input import RequestError
from memoryapp.models import SubjectRequest
from tests._admin_support import (
    ALICE,
    messages_of,
    seed_tenant,
)

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"
UNSTORABLE = {
    "leading space": " acme/bob",
    "trailing space": "acme/bob ",
    "empty segment": "acme//bob",
    "dot segment": "acme/../bob",
    "trailing slash": "acme/bob/",
    "control character": "acme/\tbob",
}


def _form(**values) -> dict:
    return {"subject": ALICE, "right": "access", "received_on": desk.today().isoformat(), **values}


@pytest.mark.parametrize("name", sorted(UNSTORABLE))
def test_the_service_refuses_a_key_no_write_accepts(name):
    with pytest.raises(RequestError, match="The subject key"):
        desk.open_request(subject=UNSTORABLE[name], right="access", actor="dpo")
    assert not SubjectRequest.objects.exists()


@pytest.mark.parametrize("name", sorted(UNSTORABLE))
def test_the_form_refuses_a_key_no_write_accepts(request_handler, name):
    r = request_handler.post(URL + "add/", _form(subject=UNSTORABLE[name]))
    assert r.status_code == 200 and b"The subject key must" in r.content
    assert not SubjectRequest.objects.exists()


def test_a_namespace_no_write_accepts_is_refused(request_handler):
    r = request_handler.post(URL + "add/", _form(namespaces="acme//web"))
    assert r.status_code == 200 and b"A namespace must not" in r.content
    assert not SubjectRequest.objects.exists()


def test_a_key_holding_nothing_is_recorded_with_a_warning(request_handler):
    seed_tenant()
    r = request_handler.post(URL + "add/", _form(subject="acme/alicia"), follow=True)
    assert r.status_code == 200
    assert SubjectRequest.objects.count() == 1  # a warning, not a refusal
    assert any("Nothing is held for this key" in m for m in messages_of(r))
    assert b"acme/alicia" not in r.content


def test_a_key_holding_something_gets_no_warning(request_handler):
    seed_tenant()
    r = request_handler.post(URL + "add/", _form(), follow=True)
    assert SubjectRequest.objects.count() == 1
    assert not any("Nothing is held" in m for m in messages_of(r))


def test_a_key_held_elsewhere_than_the_namespaces_named_is_warned_about(request_handler):
    seed_tenant()
    r = request_handler.post(URL + "add/", _form(namespaces="globex/web"), follow=True)
    assert any("Nothing is held for this key in these namespaces" in m for m in messages_of(r))


def test_holds_any_agrees_with_the_counted_holdings():
    from memoryapp.compliance.holdings import holdings, holds_any, kept

    seed_tenant()
    for key in ("acme/alice", "acme/bob", "acme/alicia", "ACME/alice", "acme/web"):
        for spaces in ((), ("acme/web",), ("acme/alice",), ("globex/x",)):
            counted = bool(holdings(key, spaces) or kept(key, spaces))
            assert holds_any(key, spaces) == counted, (key, spaces)
