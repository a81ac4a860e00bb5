"""Hostile and careless input to the desk: NUL characters, a megabyte of notes, keys and
namespaces that export or erasure would refuse, months out of range. Each is refused
with a clear message, the same way in the service, the admin, the API and the CLI —
never as a 500 (PostgreSQL refuses a NUL with an error) and never stored."""

from __future__ import annotations

import io
import sys

import pytest
from django.core.management import CommandError, call_command

from memoryapp.compliance import desk
from memoryapp.compliance.request_input import MAX_NAMESPACES, MAX_TEXT_CHARS
from memoryapp.compliance.request_input import clean_text as clean
from memoryapp.models import SubjectRequest, SubjectRequestEvent
from tests._admin_support import ALICE, messages_of
from tests.factories import make_staff_api

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"
API = "/api/subject-requests/"
DESK = ("view_subjectrequest", "add_subjectrequest", "change_subjectrequest")
LONG = "n" * 256  # one more than the namespace and subject columns hold


@pytest.fixture
def made():
    return desk.open_request(subject=ALICE, right="access", actor="intake")


@pytest.fixture
def api():
    return make_staff_api("dpo-api", DESK)


def _unchanged(made: SubjectRequest) -> None:
    row = SubjectRequest.objects.get(pk=made.pk)
    assert (row.notes, row.extension_reason, row.outcome) == ("", "", "")
    assert row.is_open
    assert [e.action for e in SubjectRequestEvent.objects.filter(request=row)] == ["created"]


# ------------------------------------------------------------------ the service
@pytest.mark.parametrize(
    "text, error",
    [
        ("call\x00back", "NUL"),
        ("x" * (MAX_TEXT_CHARS + 1), "at most 10,000 characters"),
        ("lone \ud800 surrogate", "valid Unicode"),
    ],
)
def test_unstorable_or_huge_text_is_refused_by_every_action(made, text, error):
    for act in (
        lambda: desk.add_note(made, text, actor="dpo"),
        lambda: desk.extend(made, 1, text, actor="dpo"),
        lambda: desk.close(made, refused=True, outcome=text, actor="dpo"),
        lambda: desk.open_request(subject=ALICE, right="access", actor="dpo", notes=text),
    ):
        with pytest.raises(desk.RequestError, match=error) as refused:
            act()
        assert text not in str(refused.value)  # the message never repeats the input
    _unchanged(made)
    assert SubjectRequest.objects.count() == 1


def test_text_of_the_limit_is_taken_and_the_key_is_replaced_with_or_without_blanks():
    assert len(clean("x" * MAX_TEXT_CHARS, ALICE, "Notes")) == MAX_TEXT_CHARS
    # A key typed with a stray blank at intake is still replaced where the note names it.
    assert clean(f"mail from {ALICE}", f"{ALICE} ", "Notes") == "mail from (the subject)"
    assert clean(f"mail from {ALICE} ", ALICE, "Notes") == "mail from (the subject)"
    # However the note's author capitalised it; a regex character in a key is only itself.
    assert clean(f"{ALICE.upper()} and {ALICE.title()}", ALICE, "Notes") == (
        "(the subject) and (the subject)"
    )
    assert clean("acmeXalice asked", "acme.alice", "Notes") == "acmeXalice asked"


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"subject": LONG}, "too long"),
        ({"subject": "acme/\x00alice"}, "NUL"),
        ({"namespaces": [LONG]}, "too long"),
        ({"namespaces": ["acme/\x00web"]}, "NUL"),
        ({"namespaces": [f"t{i}/web" for i in range(MAX_NAMESPACES + 1)]}, "at most 50"),
    ],
)
def test_intake_refuses_what_export_and_erasure_could_never_serve(kwargs, error):
    """Accepted before, such a request failed later, on its first export or erasure, as a 500."""
    with pytest.raises(desk.RequestError, match=error):
        desk.open_request(**{"subject": ALICE, "right": "access", "actor": "dpo", **kwargs})
    assert not SubjectRequest.objects.exists()


def test_fifty_namespaces_repeated_count_once(made):
    spaces = [f"t{i}/web" for i in range(MAX_NAMESPACES)] * 2
    more = desk.open_request(subject=ALICE, right="access", actor="dpo", namespaces=spaces)
    assert more.namespace_count == MAX_NAMESPACES


@pytest.mark.parametrize("months", [0, -1, 3])
def test_months_out_of_range_are_refused(made, months):
    with pytest.raises(desk.RequestError, match="2 months at most"):
        desk.extend(made, months, "reason", actor="dpo")
    _unchanged(made)


# ------------------------------------------------------------------ the admin
@pytest.mark.parametrize(
    "name, data",
    [
        ("note", {"text": "call\x00back"}),
        ("note", {"text": "x" * 1_000_000}),  # a megabyte of notes
        ("extend", {"months": "1", "reason": "wait\x00ing"}),
        ("extend", {"months": "-1", "reason": "r"}),
        ("extend", {"months": "x", "reason": "r"}),
        ("extend", {"months": "3", "reason": "r"}),
        ("extend", {"months": "9" * 40, "reason": "r"}),
        ("refuse", {"outcome": "unfounded\x00", "post": "yes"}),
        ("answer", {"outcome": "y" * (MAX_TEXT_CHARS + 1), "post": "yes"}),
    ],
)
def test_the_admin_actions_refuse_bad_input_with_a_message(request_handler, made, name, data):
    r = request_handler.post(f"{URL}{made.pk}/act/{name}/", data, follow=True)
    assert r.status_code == 200 and r.redirect_chain[-1][0] == f"{URL}{made.pk}/change/"
    (message,) = messages_of(r)
    assert message.startswith(("Add a note:", "Extend the deadline:", "Refuse", "Answer"))
    _unchanged(made)


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("namespaces", f"acme/web\n{LONG}\n", b"too long"),
        ("namespaces", "\n".join(f"t{i}/web" for i in range(MAX_NAMESPACES + 1)), b"at most 50"),
        ("notes", "x" * (MAX_TEXT_CHARS + 1), b"at most 10,000 characters"),
    ],
)
def test_admin_intake_shows_the_refusal_on_the_form(request_handler, field, value, error):
    data = {"subject": ALICE, "right": "access", "received_on": desk.today().isoformat()}
    r = request_handler.post(URL + "add/", {**data, field: value})
    assert r.status_code == 200 and error in r.content
    assert not SubjectRequest.objects.exists()


def test_admin_intake_strips_blank_lines_and_blanks_around_namespaces(request_handler):
    data = {"subject": ALICE, "right": "access", "received_on": desk.today().isoformat()}
    r = request_handler.post(
        URL + "add/", {**data, "namespaces": "  acme/web \n\n acme/web\nacme/api"}
    )
    assert r.status_code == 302
    assert desk.unseal(SubjectRequest.objects.get()).namespaces == ("acme/web", "acme/api")


# ------------------------------------------------------------------ the API
def test_the_api_refuses_bad_input_with_400(api, made):
    act = f"{API}{made.pk}/act/"
    for body in (
        {"action": "note", "text": "a\x00b"},
        {"action": "note", "text": "x" * (MAX_TEXT_CHARS + 1)},
        {"action": "extend", "months": 3, "text": "r"},
        {"action": "extend", "months": -1, "text": "r"},
        {"action": "extend", "months": "x", "text": "r"},
        {"action": "refuse", "text": ""},
    ):
        assert api.post(act, body, format="json").status_code == 400, body
    assert api.post(act, b"\xff\xfe{", content_type="application/json").status_code == 400
    for body in (
        {"subject": LONG, "right": "access"},
        {"subject": ALICE, "right": "access", "namespaces": [LONG]},
        {"subject": ALICE, "right": "access", "namespaces": ["ns"] * (MAX_NAMESPACES + 1)},
        {"subject": ALICE, "right": "forgotten"},
    ):
        r = api.post(API, body, format="json")
        assert r.status_code == 400 and ALICE not in r.content.decode(), body
    _unchanged(made)
    assert SubjectRequest.objects.count() == 1


# ------------------------------------------------------------------ the command line
def test_the_cli_refuses_a_key_or_namespace_it_could_never_serve(monkeypatch):
    for stdin, extra, error in (
        (LONG + "\n", (), "too long"),
        ("acme/\x00alice\n", (), "NUL"),
        (ALICE + "\n", ("--namespace", LONG), "too long"),
        (ALICE + "\n", ("--notes", "y" * (MAX_TEXT_CHARS + 1)), "at most 10,000"),
    ):
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        with pytest.raises(CommandError, match=error) as refused:
            call_command(
                "memory", "requests", "open", "--right", "access", "--subject-stdin", *extra,
                stdout=io.StringIO(), stderr=io.StringIO(),
            )  # fmt: skip
        assert ALICE not in str(refused.value)
    assert not SubjectRequest.objects.exists()


@pytest.mark.parametrize("typed", ["%%%%%%%%", "________", "{}%", "\\\\\\\\\\\\\\\\"])
def test_a_cli_id_with_like_wildcards_names_no_request(made, typed):
    """An id prefix is compared as text: ``memory requests erase %%%%%%%% --yes`` must not
    pick the only request (and erase its subject)."""
    from memoryapp.models import ErasureReceipt

    typed = typed.replace("{}", made.pk[:8])
    with pytest.raises(CommandError, match="no subject request"):
        call_command("memory", "requests", "erase", typed, "--yes", stdout=io.StringIO())
    assert not ErasureReceipt.objects.exists()
    assert SubjectRequest.objects.get(pk=made.pk).is_open


# ------------------------------------------------------------------ a key rotated away
@pytest.fixture
def rotated_away(made, settings):
    """The erasure key changed with no fallback: ``made``'s sealed key can't be read."""
    settings.MEMORYAPP_ERASURE_KEY = "a-new-key-with-no-fallback-" + "x" * 20
    settings.MEMORYAPP_ERASURE_KEY_FALLBACKS = []
    assert desk.unseal(made) is None
    return made


def test_a_request_whose_key_was_rotated_away_says_so_and_can_still_be_closed(rotated_away):
    """Before, answering and refusing needed the key too: such a request stayed open,
    and overdue, for good."""
    made = rotated_away
    with pytest.raises(desk.RequestError, match="can still be answered or refused"):
        desk.export_for(made, actor="dpo")
    desk.close(made, refused=True, outcome="key lost; reopened as a new request", actor="dpo")
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.status == "refused" and row.sealed is None
    assert row.outcome == "key lost; reopened as a new request"


def test_the_admin_and_the_cli_close_a_request_whose_key_was_rotated_away(
    rotated_away, request_handler
):
    made = rotated_away
    r = request_handler.post(f"{URL}{made.pk}/act/note/", {"text": "x"}, follow=True)
    assert "can still be answered or refused" in messages_of(r)[0]
    r = request_handler.post(
        f"{URL}{made.pk}/act/answer/", {"outcome": "told", "post": "yes"}, follow=True
    )
    assert messages_of(r) == ["The request is answered and closed; the subject key is dropped."]
    other = desk.open_request(subject=ALICE, right="access", actor="dpo")
    other.sealed = "gAAAA-not-a-token"
    other.save(update_fields=["sealed"])
    out = io.StringIO()
    call_command(
        "memory", "requests", "close", other.pk, "--refused", "--reason", "lost", stdout=out
    )
    assert "refused" in out.getvalue()
    assert SubjectRequest.objects.get(pk=other.pk).sealed is None
