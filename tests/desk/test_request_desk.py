"""The desk's actions on a request's admin page (admin/desk_actions.py): each through the service,
each in the history with its actor, destructive ones confirmed, refusals shown."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection

from memoryapp.compliance import desk
from memoryapp.compliance.holdings import holdings
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    Memory,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
)
from tests._admin_support import (
    ALICE,
    BOB,
    DESK_PERMS,
    OPERATOR_PERMS,
    PROJECT,
    client_for,
    make_staff,
    messages_of,
    seed_tenant,
)

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"
MISTYPED = "acme/alicia"


@pytest.fixture
def made():
    return desk.open_request(subject=ALICE, right="erasure", actor="intake")


def act(client, req: SubjectRequest, name: str, **data):
    return client.post(f"{URL}{req.pk}/act/{name}/", data, follow=False)


def acted(client, req: SubjectRequest, name: str, **data) -> list[str]:
    """Post an action, follow the redirect to the request's page, return its messages."""
    r = client.post(f"{URL}{req.pk}/act/{name}/", data, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:1000]
    assert r.redirect_chain[-1][0] == f"{URL}{req.pk}/change/"
    return messages_of(r)


def history(req: SubjectRequest) -> list[tuple[str, str]]:
    return [(e.action, e.actor) for e in SubjectRequestEvent.objects.filter(request=req)]


# ------------------------------------------------------------------ the page
def test_the_page_shows_the_actions_and_no_save_button(officer, made):
    page = officer.get(f"{URL}{made.pk}/change/").content.decode()
    for name in ("start", "assign", "extend", "note", "export", "erase", "answer", "refuse"):
        assert f"/act/{name}/" in page
    assert 'name="_save"' not in page and 'name="_continue"' not in page
    # The history is shown to the officer (whose role has no permission on the events).
    assert 'id="history-group"' in page and "<p>intake</p>" in page
    assert ALICE not in page
    # The record is changed only through the actions: a posted change form is refused.
    assert officer.post(f"{URL}{made.pk}/change/", {"right": "access"}).status_code == 405
    made.refresh_from_db()
    assert made.right == "erasure"


def test_a_viewer_sees_the_request_but_no_action(made):
    viewer = client_for(make_staff("auditor", perms=("view_subjectrequest",)))
    page = viewer.get(f"{URL}{made.pk}/change/").content.decode()
    assert "/act/" not in page and "may view requests but not act" in page
    assert act(viewer, made, "start").status_code == 403


# ------------------------------------------------------------------ start, assign
def test_start_marks_the_request_in_progress_with_the_actor(officer, made):
    assert acted(officer, made, "start") == ["The request is in progress."]
    made.refresh_from_db()
    assert made.status == RequestStatus.IN_PROGRESS
    assert history(made) == [("created", "intake"), ("started", "dpo")]


def test_assign_only_to_staff_who_may_handle_requests(officer, made, dpo):
    colleague = make_staff("dpo2", perms=DESK_PERMS)
    operator = make_staff("op", perms=OPERATOR_PERMS)
    assert acted(officer, made, "assign", assignee=colleague.pk) == ["Assigned to dpo2."]
    made.refresh_from_db()
    assert made.assignee == colleague

    (error,) = acted(officer, made, "assign", assignee=operator.pk)
    assert "op may not handle" in error
    (error,) = acted(officer, made, "assign", assignee="999999")
    assert "No such user" in error
    made.refresh_from_db()
    assert made.assignee == colleague
    # Only eligible users are offered.
    page = officer.get(f"{URL}{made.pk}/change/").content.decode()
    assert ">dpo2</option>" in page and ">op</option>" not in page

    assert acted(officer, made, "assign", assignee="") == ["The request is unassigned."]
    made.refresh_from_db()
    assert made.assignee is None
    events = SubjectRequestEvent.objects.filter(request=made, action="assigned")
    assert [(e.actor, e.detail) for e in events] == [("dpo", "dpo2"), ("dpo", "nobody")]


# ------------------------------------------------------------------ extend
def test_extend_moves_the_deadline_with_a_reason(officer, made):
    due = made.due_on
    (text,) = acted(officer, made, "extend", months="1", reason="complex request")
    made.refresh_from_db()
    assert made.extension_months == 1 and made.due_on == desk.add_months(due, 1)
    assert made.due_on.isoformat() in text  # DATE_FORMAT, as the rest of the page
    assert ("extended", "dpo") in history(made)


@pytest.mark.parametrize(
    "months, reason, error",
    [
        ("3", "too long", "2 months at most"),
        ("0", "none", "2 months at most"),
        ("two", "typed", "Choose 1 or 2 months"),
        ("1", "  ", "needs a reason"),
        ("1", f"waiting on {AWS_KEY}", "hold a secret"),
    ],
)
def test_extend_refusals(officer, made, months, reason, error):
    (message,) = acted(officer, made, "extend", months=months, reason=reason)
    assert error in message
    made.refresh_from_db()
    assert made.extension_months == 0 and made.due_on == desk.due_date(made.received_on)
    assert history(made) == [("created", "intake")]


# ------------------------------------------------------------------ notes
def test_a_note_is_checked_for_secrets_and_cleared_of_the_key(officer, made):
    (error,) = acted(officer, made, "note", text=f"token {AWS_KEY}")
    assert "hold a secret" in error
    made.refresh_from_db()
    assert made.notes == "" and history(made) == [("created", "intake")]

    assert acted(officer, made, "note", text=f"{ALICE} sent a copy of her ID") == [
        "The note was added."
    ]
    made.refresh_from_db()
    assert ALICE not in made.notes and "sent a copy" in made.notes
    assert history(made)[-1] == ("note", "dpo")
    (error,) = acted(officer, made, "note", text="   ")
    assert "empty" in error


# ------------------------------------------------------------------ export
def test_export_is_one_click_downloads_and_is_linked(officer, made):
    seed_tenant()
    r = act(officer, made, "export")
    assert r.status_code == 200 and r["Content-Disposition"].startswith("attachment")
    assert "no-store" in r["Cache-Control"]
    document = json.loads(r.content)
    titles = {m["title"] for m in document["memories"]}
    assert "user_city" in titles and "Bob uses emacs" not in r.content.decode()
    (record,) = made.exports.all()
    assert record.actor == "dpo" and record.via == "admin"
    made.refresh_from_db()
    assert made.status == RequestStatus.IN_PROGRESS
    assert [a for a, _ in history(made)] == ["created", "started", "exported"]
    assert all(who == "dpo" for _, who in history(made)[1:])


def test_an_export_of_nothing_warns_before_the_download(officer):
    seed_tenant()
    mistyped = desk.open_request(subject=MISTYPED, right="access", actor="intake")
    r = act(officer, mistyped, "export")
    assert r.status_code == 200 and "Content-Disposition" not in r
    assert b'id="export-empty"' in r.content and MISTYPED.encode() not in r.content
    assert not ExportRecord.objects.exists()
    assert history(mistyped) == [("created", "intake")]

    r = act(officer, mistyped, "export", post="yes")
    assert r["Content-Disposition"].startswith("attachment")
    assert mistyped.exports.count() == 1


# ------------------------------------------------------------------ erase
def test_erase_shows_the_holdings_then_erases_and_links_the_receipt(officer, made):
    seed_tenant()
    held = holdings(ALICE)
    r = act(officer, made, "erase")
    assert r.status_code == 200 and b'id="holdings"' in r.content
    page = r.content.decode()
    assert ALICE not in page
    total = sum(sum(per.values()) for per in held.values())
    assert f">{total}</td></tr></tfoot>" in page and PROJECT in page
    assert "the person&#x27;s own namespace" in page  # the user namespace is the key itself
    assert Memory.objects.filter(subject=ALICE).exists(), "nothing erased before confirming"
    assert not ErasureReceipt.objects.exists()

    r = officer.post(f"{URL}{made.pk}/act/erase/", {"post": "yes"}, follow=True)
    (receipt,) = made.receipts.all()
    (text,) = messages_of(r)
    assert receipt.pk in text and "/erasurereceipt/" in text
    assert not Memory.objects.filter(subject=ALICE).exists()
    assert Memory.objects.filter(subject=BOB).exists()
    assert ("erased", "dpo") in history(made)
    # The receipt leads back to its request.
    back = officer.get(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/").content.decode()
    assert f"{URL}{made.pk}/change/" in back


def test_erase_holdings_are_per_namespace_of_the_request(officer):
    seed_tenant()
    scoped = desk.open_request(
        subject=ALICE, right="erasure", actor="intake", namespaces=["other/space"]
    )
    r = act(officer, scoped, "erase")
    assert b"Nothing is stored for this subject." in r.content
    assert b">0</td></tr></tfoot>" in r.content


# ------------------------------------------------------------------ closing
def test_answer_asks_for_confirmation_then_closes_and_drops_the_key(officer, made):
    r = act(officer, made, "answer", outcome=f"sent the export to {ALICE}")
    assert r.status_code == 200 and b"Yes, close as answered" in r.content
    made.refresh_from_db()
    assert made.is_open and made.sealed

    msgs = acted(officer, made, "answer", outcome=f"sent the export to {ALICE}", post="yes")
    assert "answered and closed" in msgs[0]
    made.refresh_from_db()
    assert made.status == RequestStatus.ANSWERED and made.sealed is None
    assert ALICE not in made.outcome
    assert history(made)[-1] == ("answered", "dpo")
    page = officer.get(f"{URL}{made.pk}/change/").content.decode()
    assert 'id="request-closed"' in page and "/act/" not in page


def test_a_refusal_needs_a_reason(officer, made):
    (error,) = acted(officer, made, "refuse", outcome="  ")
    assert "needs a reason" in error
    msgs = acted(officer, made, "refuse", outcome="manifestly unfounded", post="yes")
    assert "refused and closed" in msgs[0]
    made.refresh_from_db()
    assert made.status == RequestStatus.REFUSED and made.outcome == "manifestly unfounded"


def test_a_closed_request_refuses_every_action(officer, made, dpo):
    seed_tenant()
    desk.close(made, refused=False, outcome="done", actor="dpo")
    before = history(made)
    for name, data in [
        ("start", {}),
        ("assign", {"assignee": dpo.pk}),
        ("extend", {"months": "1", "reason": "late"}),
        ("note", {"text": "afterthought"}),
        ("export", {"post": "yes"}),
        ("erase", {"post": "yes"}),
        ("answer", {"outcome": "again", "post": "yes"}),
        ("refuse", {"outcome": "again", "post": "yes"}),
    ]:
        (error,) = acted(officer, made, name, **data)
        assert "closed" in error, (name, error)
    assert history(made) == before
    assert not ExportRecord.objects.exists() and not ErasureReceipt.objects.exists()
    assert Memory.objects.filter(subject=ALICE).exists()


# ------------------------------------------------------------------ who may, which request
def test_an_operator_gets_403_on_every_action(made):
    operator = client_for(make_staff("op", perms=OPERATOR_PERMS))
    assert operator.get(f"{URL}{made.pk}/change/").status_code == 403
    for name in ("start", "assign", "extend", "note", "export", "erase", "answer", "refuse"):
        assert act(operator, made, name, post="yes").status_code == 403, name
    made.refresh_from_db()
    assert made.status == RequestStatus.OPEN and history(made) == [("created", "intake")]


def test_export_and_erase_need_the_compliance_role(made):
    seed_tenant()
    clerk = client_for(make_staff("clerk", perms=("view_subjectrequest", "change_subjectrequest")))
    assert act(clerk, made, "export").status_code == 403
    assert act(clerk, made, "erase", post="yes").status_code == 403
    assert act(clerk, made, "start").status_code == 302  # the rest of the desk is theirs
    assert not ErasureReceipt.objects.exists() and not ExportRecord.objects.exists()
    page = clerk.get(f"{URL}{made.pk}/change/").content.decode()
    assert "/act/export/" not in page and "/act/erase/" not in page


def test_an_action_touches_only_the_request_in_its_url(officer, made):
    other = desk.open_request(subject=BOB, right="access", actor="intake")
    acted(officer, made, "note", text="only here")
    acted(officer, made, "start")
    other.refresh_from_db()
    assert other.notes == "" and other.status == RequestStatus.OPEN
    assert history(other) == [("created", "intake")]


def test_unknown_requests_actions_and_gets(officer, made):
    assert officer.post(f"{URL}nosuchrequest/act/start/").status_code == 404
    assert officer.post(f"{URL}{made.pk}/act/delete/").status_code == 404
    assert officer.get(f"{URL}{made.pk}/act/erase/").status_code == 405
    assert officer.get(f"{URL}{made.pk}/act/start/").status_code == 405
    made.refresh_from_db()
    assert made.status == RequestStatus.OPEN


# ------------------------------------------------------------------ no key once closed
def test_after_the_whole_path_no_desk_table_holds_the_key(officer, made):
    seed_tenant()
    acted(officer, made, "note", text=f"{ALICE} called")
    act(officer, made, "export")
    officer.post(f"{URL}{made.pk}/act/erase/", {"post": "yes"})
    acted(officer, made, "extend", months="1", reason=f"{ALICE} sent more")
    acted(officer, made, "answer", outcome=f"told {ALICE}", post="yes")
    tables = (
        SubjectRequest._meta.db_table,
        SubjectRequestEvent._meta.db_table,
        ExportRecord._meta.db_table,
        ErasureReceipt._meta.db_table,
    )
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            rows = cursor.fetchall()
            assert rows, table
            assert not [v for row in rows for v in row if ALICE in str(v)], table
    assert [a for a, _ in history(made)] == [
        "created",
        "note",
        "started",
        "exported",
        "erased",
        "extended",
        "answered",
    ]
    assert {who for _, who in history(made)[1:]} == {"dpo"}


# ------------------------------------------------------------------ overview and urgency
def _three_requests():
    day = desk.today()
    late = desk.open_request(
        subject=ALICE, right="access", actor="x", received_on=day - dt.timedelta(days=40)
    )
    soon = desk.open_request(
        subject=BOB, right="access", actor="x", received_on=day - dt.timedelta(days=27)
    )
    fresh = desk.open_request(subject="acme/c", right="erasure", actor="x", received_on=day)
    done = desk.open_request(
        subject="acme/d", right="access", actor="x", received_on=day - dt.timedelta(days=60)
    )
    desk.close(done, refused=False, outcome="sent", actor="x")
    return late, soon, fresh, done


def test_the_overview_counts_open_overdue_and_due_this_week_with_links(officer):
    _three_requests()
    page = officer.get("/admin/").content.decode()
    assert 'id="request-deadlines"' in page
    assert f'<a href="{URL}?urgency=open">3 open requests</a>' in page
    assert f'{URL}?urgency=overdue" class="mem-requests-overdue">1 overdue</a>' in page
    assert f'<a href="{URL}?urgency=due_soon">1 due this week</a>' in page


def test_the_overview_line_is_only_for_who_may_see_requests():
    _three_requests()
    operator = client_for(make_staff("op", perms=OPERATOR_PERMS))
    page = operator.get("/admin/")
    assert page.status_code == 200 and b"request-deadlines" not in page.content


@pytest.mark.parametrize(
    "value, expected",
    [("overdue", [0]), ("due_soon", [1]), ("later", [2]), ("open", [0, 1, 2]), ("", [0, 1, 2, 3])],
)
def test_the_urgency_filter(officer, value, expected):
    made = _three_requests()
    r = officer.get(URL, {"urgency": value} if value else {})
    shown = [req.pk for req in r.context["cl"].result_list]
    assert sorted(shown) == sorted(made[i].pk for i in expected)


# ------------------------------------------------------------------ races, namespaces
def test_of_two_closes_at_once_one_wins_and_the_other_is_told(made):
    stale = SubjectRequest.objects.get(pk=made.pk)  # a page loaded before the first close
    desk.close(made, refused=False, outcome="sent", actor="dpo")
    with pytest.raises(desk.RequestError, match="closed meanwhile"):
        desk.close(stale, refused=True, outcome="unfounded", actor="dpo2")
    made.refresh_from_db()
    assert made.status == RequestStatus.ANSWERED and made.outcome == "sent"
    assert [a for a, _ in history(made)] == ["created", "answered"]


def test_a_confirmation_page_loaded_before_a_colleague_closed_is_refused(officer, made):
    seed_tenant()
    assert b'id="holdings"' in act(officer, made, "erase").content
    desk.close(made, refused=False, outcome="answered by a colleague", actor="dpo2")
    (error,) = acted(officer, made, "erase", post="yes")
    assert "closed" in error
    assert not ErasureReceipt.objects.exists() and Memory.objects.filter(subject=ALICE).exists()


def test_an_export_over_several_namespaces_is_one_download(officer):
    seed_tenant()
    made = desk.open_request(
        subject=ALICE, right="access", actor="intake", namespaces=[PROJECT, ALICE]
    )
    r = act(officer, made, "export")
    documents = json.loads(r.content)["documents"]
    assert len(documents) == 2 and made.exports.count() == 2
    assert sum(len(d["memories"]) for d in documents) >= 3


def test_the_receipt_links_its_request_only_for_who_may_open_it(officer, made):
    seed_tenant()
    officer.post(f"{URL}{made.pk}/act/erase/", {"post": "yes"})
    (receipt,) = made.receipts.all()
    reader = client_for(make_staff("reader", perms=("view_erasurereceipt",)))
    page = reader.get(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/")
    assert page.status_code == 200 and b"mem-receipt-request" not in page.content
    page = officer.get(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/")
    assert b"mem-receipt-request" in page.content
