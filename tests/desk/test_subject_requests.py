"""Data-subject requests: deadline, lifecycle, history, links, and no subject key once closed."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from memoryapp.compliance import desk
from memoryapp.compliance.holdings import holdings
from memoryapp.compliance.receipts import keyed_hmac
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
)
from tests._admin_support import ALICE, BOB, seed_tenant
from tests._erasure_support import found_in, marker, stored_bytes

pytestmark = pytest.mark.django_db

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"


def _rows_of(model) -> list[tuple]:
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table}")
        return cursor.fetchall()


def _columns_hold(key: str) -> list[str]:
    """Every column value of the request tables (and their links) that contains ``key``."""
    models = [
        SubjectRequest,
        SubjectRequestEvent,
        SubjectRequest.exports.through,
        SubjectRequest.receipts.through,
    ]
    return [str(v) for m in models for row in _rows_of(m) for v in row if key in str(v)]


# ------------------------------------------------------------------ the deadline
@pytest.mark.parametrize(
    "received, extension, due",
    [
        (dt.date(2026, 1, 15), 0, dt.date(2026, 2, 15)),
        (dt.date(2026, 1, 31), 0, dt.date(2026, 2, 28)),
        (dt.date(2028, 1, 31), 0, dt.date(2028, 2, 29)),
        (dt.date(2026, 11, 30), 2, dt.date(2027, 2, 28)),
        (dt.date(2026, 12, 6), 1, dt.date(2027, 2, 6)),
    ],
)
def test_due_date_is_one_calendar_month_plus_the_extension(received, extension, due):
    assert desk.due_date(received, extension) == due


def test_extension_needs_a_reason_and_stops_at_two_months():
    req = desk.open_request(subject=ALICE, right="access", actor="dpo")
    with pytest.raises(desk.RequestError, match="reason"):
        desk.extend(req, 1, "  ", actor="dpo")
    desk.extend(req, 1, "many namespaces to search", actor="dpo")
    assert req.due_on == desk.due_date(req.received_on, 1)
    with pytest.raises(desk.RequestError, match="2 months"):
        desk.extend(req, 2, "more", actor="dpo")
    desk.extend(req, 1, "still complex", actor="dpo")
    req.refresh_from_db()
    assert req.extension_months == 2 and req.due_on == desk.due_date(req.received_on, 2)
    assert req.extension_reason == "still complex"


def test_intake_refusals():
    with pytest.raises(desk.RequestError):
        desk.open_request(subject=" ", right="access", actor="dpo")
    with pytest.raises(desk.RequestError):
        desk.open_request(subject=ALICE, right="everything", actor="dpo")
    with pytest.raises(desk.RequestError, match="future"):
        desk.open_request(
            subject=ALICE,
            right="access",
            actor="dpo",
            received_on=desk.today() + dt.timedelta(days=1),
        )
    assert not SubjectRequest.objects.exists()


def test_overdue_and_due_soon_are_counted_closed_ones_are_not():
    day = desk.today()
    late = desk.open_request(
        subject=ALICE, right="access", actor="dpo", received_on=day - dt.timedelta(days=40)
    )
    soon = desk.open_request(
        subject=BOB, right="erasure", actor="dpo", received_on=day - dt.timedelta(days=27)
    )
    fresh = desk.open_request(subject="acme/carol", right="rectification", actor="dpo")
    closed = desk.open_request(
        subject="acme/dan", right="access", actor="dpo", received_on=day - dt.timedelta(days=60)
    )
    desk.close(closed, refused=False, outcome="sent", actor="dpo")
    assert desk.deadlines() == {"overdue": 1, "due_soon": 1, "open": 3}
    assert [desk.urgency(r) for r in (late, soon, fresh, closed)] == ["overdue", "due_soon", "", ""]
    assert list(desk.open_requests()) == [late, soon, fresh]


# ------------------------------------------------------------------ notes and history
def test_notes_with_a_secret_are_refused_and_the_key_is_never_written():
    with pytest.raises(desk.RequestError, match="secret"):
        desk.open_request(subject=ALICE, right="access", actor="dpo", notes=f"key {AWS_KEY}")
    req = desk.open_request(
        subject=ALICE, right="access", actor=f"self-service {ALICE}", notes=f"{ALICE} wrote by mail"
    )
    with pytest.raises(desk.RequestError, match="secret"):
        desk.add_note(req, f"found {AWS_KEY}", actor="dpo")
    desk.add_note(req, f"called {ALICE} back", actor="dpo")
    req.refresh_from_db()
    assert ALICE not in req.notes and "(the subject)" in req.notes
    assert AWS_KEY not in req.notes
    assert _columns_hold(ALICE) == [] and _columns_hold(AWS_KEY) == []
    assert [e.action for e in req.history.all()] == ["created", "note"]


def test_closing_needs_a_refusal_reason_and_is_final():
    req = desk.open_request(subject=ALICE, right="objection", actor="dpo")
    with pytest.raises(desk.RequestError, match="reason"):
        desk.close(req, refused=True, outcome="", actor="dpo")
    desk.close(req, refused=True, outcome="manifestly unfounded (Art. 12(5))", actor="dpo")
    assert req.status == RequestStatus.REFUSED and req.sealed is None and req.closed_at
    for action in (
        lambda: desk.start(req, actor="dpo"),
        lambda: desk.extend(req, 1, "late", actor="dpo"),
        lambda: desk.export_for(req, actor="dpo"),
        lambda: desk.erase_for(req, actor="dpo"),
        lambda: desk.close(req, refused=False, outcome="", actor="dpo"),
    ):
        with pytest.raises(desk.RequestError, match="closed"):
            action()


# ------------------------------------------------------------------ export, erase, links
def test_export_then_erase_for_a_request_links_both_and_logs_every_step():
    seed_tenant()
    req = desk.open_request(subject=ALICE, right="erasure", actor="dpo")
    before = holdings(ALICE)
    assert before["memories"] and all(n > 0 for n in before["memories"].values())
    assert BOB not in before["memories"]

    (document,) = desk.export_for(req, actor="dpo")
    assert document["counts"]["memories"] == sum(before["memories"].values())
    (receipt,) = desk.erase_for(req, actor="dpo")
    assert holdings(ALICE) == {}
    assert holdings(BOB)  # another subject's rows stay

    assert list(req.exports.all()) == list(ExportRecord.objects.all())
    assert list(req.receipts.all()) == [receipt]
    assert req.status == RequestStatus.IN_PROGRESS
    desk.close(req, refused=False, outcome="export sent, data erased", actor="dpo")
    actions = [(e.action, e.actor) for e in req.history.all()]
    assert actions == [
        ("created", "dpo"),
        ("started", "dpo"),
        ("exported", "dpo"),
        ("erased", "dpo"),
        ("answered", "dpo"),
    ]
    assert list(desk.requests_for(ALICE)) == [req]
    assert list(desk.requests_for(BOB)) == []


def test_a_request_limited_to_namespaces_touches_only_those():
    seed_tenant()
    everywhere = holdings(ALICE)
    spaces = {ns for per in everywhere.values() for ns in per}
    assert len(spaces) >= 2, everywhere
    kept = sorted(spaces)[0]
    erased = sorted(spaces - {kept})
    req = desk.open_request(subject=ALICE, right="erasure", actor="dpo", namespaces=erased)
    receipts = desk.erase_for(req, actor="dpo")
    assert len(receipts) == len(erased)
    left = holdings(ALICE)
    assert {ns for per in left.values() for ns in per} == {kept}


def test_linking_another_subjects_record_is_refused():
    seed_tenant()
    from memoryapp import compliance

    compliance.export(subject=BOB, actor="dpo")
    req = desk.open_request(subject=ALICE, right="access", actor="dpo")
    with pytest.raises(desk.RequestError, match="does not name"):
        desk.link_export(req, ExportRecord.objects.get(), actor="dpo")
    assert not req.exports.exists()


# ------------------------------------------------------------------ no key once closed
def test_a_closed_request_holds_no_subject_key_in_any_column_nor_the_file():
    # A key that no memory row holds: the scan then finds it only if the desk wrote it.
    subject = f"acme/{marker('subject')}"
    namespace = f"acme/{marker('space')}"
    req = desk.open_request(
        subject=subject,
        right="erasure",
        actor=f"portal for {subject}",
        namespaces=[namespace],
        notes=f"asked by {subject}",
    )
    assert desk.unseal(req) == desk.Sealed(subject, (namespace,))
    desk.add_note(req, f"identity of {subject} checked", actor="dpo")
    desk.export_for(req, actor="dpo")
    desk.erase_for(req, actor="dpo")
    desk.extend(req, 1, f"{subject} sent more", actor="dpo")
    desk.close(req, refused=False, outcome=f"told {subject}", actor="dpo")

    req.refresh_from_db()
    assert desk.unseal(req) is None and req.sealed is None
    assert req.subject_hmac == keyed_hmac(subject)
    assert _columns_hold(subject) == [] and _columns_hold(namespace) == []
    tables = (
        SubjectRequest._meta.db_table,
        SubjectRequestEvent._meta.db_table,
        ExportRecord._meta.db_table,
        ErasureReceipt._meta.db_table,
    )
    assert found_in(stored_bytes(tables, checkpoint=True), [subject, namespace]) == []
