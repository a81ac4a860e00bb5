"""``compliance.lookup``: a subject key finds its data-subject requests, open and closed."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from memoryapp.compliance import desk
from memoryapp.compliance.lookup import lookup
from memoryapp.compliance.receipts import keyed_hmac
from memoryapp.models import RequestStatus, SubjectRequest, SubjectRequestEvent
from tests._admin_support import ALICE, BOB, make_staff

pytestmark = pytest.mark.django_db

MISTYPED = "acme/alicia"


def test_lookup_returns_the_subjects_open_and_closed_requests_with_their_facts():
    officer = make_staff("dpo")
    first = desk.open_request(
        subject=ALICE,
        right="access",
        actor="dpo",
        received_on=dt.date(2026, 1, 10),
        assignee=officer,
    )
    second = desk.open_request(subject=ALICE, right="erasure", actor="dpo")
    desk.close(second, refused=False, outcome="done", actor="dpo")
    desk.open_request(subject=BOB, right="access", actor="dpo")

    found = lookup(ALICE)
    rows = list(found.requests)
    assert [r.pk for r in rows] == [first.pk, second.pk]  # by received date
    assert rows[0].right == "access" and rows[0].status == RequestStatus.OPEN
    assert rows[0].received_on == dt.date(2026, 1, 10)
    assert rows[0].due_on == dt.date(2026, 2, 10)
    assert rows[0].assignee == officer
    assert rows[1].status == RequestStatus.ANSWERED and rows[1].assignee is None
    assert not found.empty


def test_a_closed_request_is_found_by_key_though_it_no_longer_holds_it():
    made = desk.open_request(subject=ALICE, right="erasure", actor="dpo")
    desk.close(made, refused=True, outcome="not a customer of ours", actor="dpo")
    made.refresh_from_db()
    assert made.sealed is None and desk.unseal(made) is None
    assert [r.pk for r in lookup(ALICE).requests] == [made.pk]


def test_another_key_finds_nothing():
    desk.open_request(subject=ALICE, right="access", actor="dpo")
    found = lookup(MISTYPED)
    assert list(found.requests) == [] and found.empty
    # Keys differing only by surrounding space or case are other keys (exact HMAC).
    assert not lookup(ALICE.upper()).requests.exists()
    assert not lookup(ALICE + " ").requests.exists()


def test_a_request_written_before_a_key_rotation_is_found(settings):
    made = desk.open_request(subject=ALICE, right="access", actor="dpo")
    settings.MEMORYAPP_ERASURE_KEY = "a-new-erasure-key-after-rotation-0123456789"
    assert keyed_hmac(ALICE) != made.subject_hmac
    assert [r.pk for r in lookup(ALICE).requests] == [made.pk]


def test_a_caller_narrows_the_requests_to_what_its_user_may_see():
    desk.open_request(subject=ALICE, right="access", actor="dpo")
    found = lookup(ALICE, requests=SubjectRequest.objects.none())
    assert list(found.requests) == [] and found.empty


def test_the_lookup_stores_and_logs_nothing_of_the_key(caplog):
    made = desk.open_request(subject=ALICE, right="access", actor="dpo")
    events = SubjectRequestEvent.objects.count()
    before = SubjectRequest.objects.values().get(pk=made.pk)
    with caplog.at_level(logging.DEBUG):
        assert list(lookup(ALICE).requests) == [made]
    assert ALICE not in caplog.text
    assert SubjectRequestEvent.objects.count() == events  # a lookup is no action
    assert SubjectRequest.objects.values().get(pk=made.pk) == before


def test_an_empty_key_is_refused():
    for blank in ("", "   "):
        with pytest.raises(ValueError, match="subject key is needed"):
            lookup(blank)
