"""``manage.py memory requests ...``: every action, its failure paths, and no key in argv."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

from memoryapp.compliance import desk
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    ExportVia,
    Memory,
    RequestAction,
    RequestStatus,
    SubjectRequest,
)
from tests._admin_support import ALICE, BOB, make_staff, seed_tenant
from tests.factories import subject_request_row

pytestmark = pytest.mark.django_db

MISTYPED = "acme/nobody"


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


def run(*args, stdin: str | None = None, monkeypatch=None, answer: str | None = None):
    """``memory requests <args>``: (stdout, stderr); a refusal raises ``CommandError``."""
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    if answer is not None:
        monkeypatch.setattr("builtins.input", lambda prompt="": answer)
    call_command("memory", "requests", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _open(subject: str = ALICE, **kwargs) -> SubjectRequest:
    return desk.open_request(
        subject=subject, right=kwargs.pop("right", "access"), actor="dpo", **kwargs
    )


# ------------------------------------------------------------------ open
def test_open_reads_the_key_from_stdin_and_never_prints_it(monkeypatch):
    make_staff("handler")
    out, _ = run(
        "open",
        "--right",
        "erasure",
        "--subject-stdin",
        "--received",
        "2026-01-31",
        "--namespace",
        "acme/web",
        "--assignee",
        "handler",
        "--notes",
        f"mail from {ALICE}",
        "--actor",
        "officer-1",
        stdin=ALICE + "\n",
        monkeypatch=monkeypatch,
    )
    made = SubjectRequest.objects.get()
    assert out.strip() == f"Opened request {made.pk} (erasure (Art. 17)), due 2026-02-28."
    assert ALICE not in out
    assert desk.unseal(made) == desk.Sealed(ALICE, ("acme/web",))
    assert made.assignee.username == "handler" and made.created_by == "officer-1"
    assert ALICE not in made.notes  # the service replaces the key in notes


def test_open_asks_for_the_key_without_echo_when_not_piped(monkeypatch):
    asked = []

    def fake_getpass(prompt=""):
        asked.append(prompt)
        return ALICE

    monkeypatch.setattr("getpass.getpass", fake_getpass)
    out, _ = run("open", "--right", "access")
    assert asked == ["Subject key (not echoed): "]
    made = SubjectRequest.objects.get()
    assert desk.unseal(made).subject == ALICE and made.due_on == desk.due_date(desk.today())
    assert made.created_by.startswith("cli")


@pytest.mark.parametrize(
    "args",
    [
        ("open", "--right", "access", "--subject", ALICE),
        ("open", "--right", "access", f"--subject={ALICE}"),
        ("list", "--subject", ALICE),
        ("show", "0" * 32, "--subject", ALICE),
    ],
)
def test_a_subject_argument_is_refused_without_repeating_it(args):
    with pytest.raises(CommandError) as refused:
        call_command("memory", "requests", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert "never taken from the command line" in str(refused.value)
    assert ALICE not in str(refused.value)
    assert not SubjectRequest.objects.exists()


def test_the_refusal_from_a_shell_exits_non_zero_and_names_no_key():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "")}
    env = {k: v for k, v in env.items() if v}
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "memory",
            "requests",
            "open",
            "--right",
            "access",
            "--subject",
            ALICE,
        ],
        cwd=Path(django_settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "never taken from the command line" in done.stderr
    assert ALICE not in done.stderr and ALICE not in done.stdout


def test_open_refuses_bad_input(monkeypatch):
    with pytest.raises(CommandError, match="a subject key is needed"):
        run("open", "--right", "access", "--subject-stdin", stdin="  \n", monkeypatch=monkeypatch)
    with pytest.raises(CommandError, match="no user 'ghost'"):
        run(
            "open",
            "--right",
            "access",
            "--assignee",
            "ghost",
            "--subject-stdin",
            stdin=ALICE,
            monkeypatch=monkeypatch,
        )
    tomorrow = (desk.today() + dt.timedelta(days=1)).isoformat()
    with pytest.raises(CommandError, match="in the future"):
        run(
            "open",
            "--right",
            "access",
            "--received",
            tomorrow,
            "--subject-stdin",
            stdin=ALICE,
            monkeypatch=monkeypatch,
        )
    with pytest.raises(CommandError, match="not a date"):
        run(
            "open",
            "--right",
            "access",
            "--received",
            "31/01/2026",
            "--subject-stdin",
            stdin=ALICE,
            monkeypatch=monkeypatch,
        )
    with pytest.raises(CommandError, match="invalid choice"):
        run(
            "open", "--right", "everything", "--subject-stdin", stdin=ALICE, monkeypatch=monkeypatch
        )
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    with pytest.raises(CommandError, match="secret"):
        run(
            "open",
            "--right",
            "access",
            "--notes",
            secret,
            "--subject-stdin",
            stdin=ALICE,
            monkeypatch=monkeypatch,
        )
    assert not SubjectRequest.objects.exists()


# ------------------------------------------------------------------ list and show
def test_list_by_due_date_with_status_and_overdue_filters():
    today = desk.today()
    late = _open(received_on=today - dt.timedelta(days=60), assignee=make_staff("handler"))
    fresh = _open(BOB)
    closed = _open(received_on=today - dt.timedelta(days=90))
    desk.close(closed, refused=False, outcome="done", actor="dpo")

    out, _ = run("list")
    lines = out.splitlines()
    assert [line[:12] for line in lines[:3]] == [closed.pk[:12], late.pk[:12], fresh.pk[:12]]
    assert lines[-1] == "3 requests."
    assert "(OVERDUE)" in lines[1] and "handler" in lines[1]
    assert "OVERDUE" not in lines[0]  # closed: no longer urgent
    assert ALICE not in out and BOB not in out

    out, _ = run("list", "--overdue")
    assert [line[:12] for line in out.splitlines()[:-1]] == [late.pk[:12]]
    out, _ = run("list", "--status", "answered")
    assert [line[:12] for line in out.splitlines()[:-1]] == [closed.pk[:12]]
    out, _ = run("list", "--status", "open", "--status", "answered")
    assert out.splitlines()[-1] == "3 requests."
    with pytest.raises(CommandError, match="invalid choice"):
        run("list", "--status", "pending")


def test_show_prints_the_request_and_its_history():
    made = _open(namespaces=["acme/web"])
    desk.extend(made, 1, "backups to search", actor="dpo")
    desk.add_note(made, "called the person back", actor="clerk")
    out, _ = run("show", made.pk[:10])
    assert out.startswith(f"Request {made.pk}\n")
    assert "right: access (Art. 15)" in out and "status: open" in out
    assert "extended by 1 month(s): backups to search" in out
    assert "namespaces: 1" in out and "note: called the person back" in out
    history = out.split("History:\n")[1].splitlines()
    assert "created by dpo" in history[0]
    assert "deadline extended by dpo: +1 month(s): backups to search" in history[1]
    assert "note added by clerk" in history[2]
    assert ALICE not in out


def test_unknown_and_ambiguous_ids_are_clear_errors():
    with pytest.raises(CommandError, match="no subject request 'abc'.*at least its first 8"):
        run("show", "abc")
    with pytest.raises(CommandError, match="no subject request '0123456789'"):
        run("show", "0123456789")
    for last in "01":  # two ids sharing their first 16 characters
        subject_request_row(id="f" * 16 + last * 16)
    with pytest.raises(CommandError, match="more than one request"):
        run("show", "f" * 10)
    for action in ("export", "erase", "close", "extend"):
        extra = {
            "export": ("-o", "x.json"),
            "erase": ("--yes",),
            "close": ("--answered",),
            "extend": ("--months", "1", "--reason", "r"),
        }[action]
        with pytest.raises(CommandError, match="no subject request"):
            run(action, "nope-nope-nope", *extra)


# ------------------------------------------------------------------ export
def test_export_writes_a_new_private_file_and_records_it(tmp_path):
    seed_tenant()
    made = _open()
    path = tmp_path / "alice.json"
    out, err = run("export", made.pk, "--output", str(path), "--actor", "officer-1")
    body = json.loads(path.read_text(encoding="utf-8"))
    assert body["documents"][0]["counts"]["memories"] >= 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert f"Wrote {path}:" in out and made.pk in out and err == ""
    assert ALICE not in out
    record = ExportRecord.objects.get()
    assert record.via == ExportVia.CLI and record.actor == "officer-1"
    assert list(made.exports.all()) == [record]
    made.refresh_from_db()
    assert made.status == RequestStatus.IN_PROGRESS

    before = path.read_bytes()
    with pytest.raises(CommandError, match="exists: not overwritten"):
        run("export", made.pk, "--output", str(path))
    assert path.read_bytes() == before and ExportRecord.objects.count() == 1
    with pytest.raises(CommandError, match="does not exist"):
        run("export", made.pk, "--output", str(tmp_path / "missing" / "x.json"))
    assert ExportRecord.objects.count() == 1


def test_export_warns_when_the_subject_holds_nothing(tmp_path):
    seed_tenant()
    made = _open(MISTYPED)
    path = tmp_path / "nobody.json"
    out, err = run("export", made.pk, "-o", str(path))
    assert "warning: nothing is held about this request's subject" in err
    assert json.loads(path.read_text())["documents"][0]["counts"]["memories"] == 0
    assert "Wrote" in out and MISTYPED not in out + err


def test_actions_on_a_closed_request_are_refused(tmp_path):
    made = _open()
    desk.close(made, refused=False, outcome="", actor="dpo")
    closed = "is answered: it is closed"
    with pytest.raises(CommandError, match=closed):
        run("export", made.pk, "-o", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(CommandError, match=closed):
        run("erase", made.pk, "--yes")
    with pytest.raises(CommandError, match=closed):
        run("close", made.pk, "--refused", "--reason", "late")
    with pytest.raises(CommandError, match=closed):
        run("extend", made.pk, "--months", "1", "--reason", "more time")
    assert not ExportRecord.objects.exists() and not ErasureReceipt.objects.exists()


# ------------------------------------------------------------------ close and extend
def test_close_answered_or_refused_drops_the_key():
    answered, refused = _open(), _open(BOB)
    out, _ = run("close", answered.pk, "--answered", "--reason", "export sent", "--actor", "dpo2")
    assert "answered; the subject key it held is dropped" in out
    answered.refresh_from_db()
    assert answered.status == RequestStatus.ANSWERED and answered.sealed is None
    assert answered.outcome == "export sent"
    assert answered.history.last().actor == "dpo2"

    with pytest.raises(CommandError, match="refusal needs a reason"):
        run("close", refused.pk, "--refused")
    run("close", refused.pk, "--refused", "--reason", "identity not proven")
    refused.refresh_from_db()
    assert refused.status == RequestStatus.REFUSED and refused.sealed is None
    with pytest.raises(CommandError, match="one of the arguments --answered --refused"):
        run("close", refused.pk)
    with pytest.raises(CommandError, match="not allowed with argument"):
        run("close", refused.pk, "--answered", "--refused")


def test_extend_moves_the_due_date_with_a_reason_two_months_at_most():
    made = _open(received_on=dt.date(2026, 1, 31))
    out, _ = run("extend", made.pk, "--months", "1", "--reason", "complex request")
    assert out.strip() == f"Request {made.pk} extended by 1 month: due 2026-03-31."
    made.refresh_from_db()
    assert made.extension_months == 1 and made.extension_reason == "complex request"
    with pytest.raises(CommandError, match="2 months at most"):
        run("extend", made.pk, "--months", "2", "--reason", "more")
    with pytest.raises(CommandError, match="needs a reason"):
        run("extend", made.pk, "--months", "1", "--reason", "  ")
    for bad in ("0", "3", "-1", "one"):
        with pytest.raises(CommandError, match="whole number of months"):
            run("extend", made.pk, "--months", bad, "--reason", "r")
    made.refresh_from_db()
    assert made.extension_months == 1
    assert made.history.filter(action=RequestAction.EXTENDED).count() == 1


# ------------------------------------------------------------------ erase
@pytest.mark.django_db(transaction=True)
def test_erase_asks_then_erases_and_prints_the_receipt(monkeypatch):
    seed_tenant()
    made = _open(namespaces=[ALICE])
    with pytest.raises(CommandError, match="Aborted"):
        run("erase", made.pk, answer="n", monkeypatch=monkeypatch)
    assert Memory.objects.filter(namespace=ALICE).exists()
    assert not ErasureReceipt.objects.exists()

    out, _ = run("erase", made.pk, "--actor", "officer-1", answer="y", monkeypatch=monkeypatch)
    receipt = ErasureReceipt.objects.get()
    assert f"Erasure receipt {receipt.pk}" in out and "outcome: verified by byte scan" in out
    assert f"Receipt(s) {receipt.pk} linked to request {made.pk}." in out
    assert ALICE not in out
    assert not Memory.objects.filter(namespace=ALICE).exists()
    assert Memory.objects.filter(namespace=BOB).exists()
    assert list(made.receipts.all()) == [receipt] and receipt.actor == "officer-1"


@pytest.mark.django_db(transaction=True)
def test_erase_with_yes_warns_when_the_subject_holds_nothing():
    seed_tenant()
    made = _open(MISTYPED)
    out, err = run("erase", made.pk, "--yes")
    assert "warning: nothing is held about this request's subject" in err
    assert "Erasure receipt" in out and ErasureReceipt.objects.count() == 1
    assert Memory.objects.filter(namespace=ALICE).exists()


# ------------------------------------------------------------------ lookup
def test_memory_lookup_lists_the_keys_requests(monkeypatch):
    made = _open()
    closed = _open(right="erasure")
    desk.close(closed, refused=True, outcome="not ours", actor="dpo")
    _open(BOB)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": ALICE)
    out = io.StringIO()
    call_command("memory", "lookup", stdout=out)
    text = out.getvalue()
    assert "0 erasure receipts, 0 export records, 2 subject requests name this user key." in text
    assert f"request {made.pk[:12]}" in text and f"request {closed.pk[:12]}" in text
    assert ALICE not in text

    out = io.StringIO()
    call_command("memory", "lookup", "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert [r["id"] for r in body["requests"]] == [made.pk, closed.pk]
    assert body["requests"][1]["status"] == "refused" and body["requests"][1]["closed_at"]
    assert ALICE not in out.getvalue()
