"""``manage.py memory requests list|show|open|export|erase|close|extend``: the desk from a shell.

The service is :mod:`memoryapp.compliance.desk`; this module only reads the
command line and prints. The subject key is never taken from the command line
(it would stay in shell history and show in ``ps``): ``open`` reads it from
standard input (``--subject-stdin``) or asks for it without echo, and a
``--subject`` argument is refused without repeating its value. Nothing printed
names the key: a request names its subject by HMAC only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memoryapp.cli import cli_actor
from memoryapp.cli.compliance import fail_unless_purged, print_receipt
from memoryapp.cli.subject_key import read_subject
from memoryapp.compliance import desk
from memoryapp.compliance.desk_actions import desk_action
from memoryapp.compliance.holdings import holdings, kept
from memoryapp.db.lookups import prefix_q
from memoryapp.models import OPEN_STATUSES, ExportVia, RequestStatus, SubjectRequest, SubjectRight
from memoryapp.rules.wording import plural

MIN_ID_PREFIX = 8  # the admin's list shows 8 characters of a request's id
NO_KEY_IN_ARGV = (
    "the subject key is never taken from the command line (shell history and 'ps' would "
    "keep it): pipe it with --subject-stdin, or leave it out and type it when asked"
)
URGENCY_WORDS = {"overdue": "OVERDUE", "due_soon": "due this week"}


class _RefuseKeyInArgv(argparse.Action):
    """``--subject VALUE``: refused, and the value is not repeated in the message."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.update(nargs="?", help=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(NO_KEY_IN_ARGV)


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError("not a date (YYYY-MM-DD)") from None


def _months(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= desk.MAX_EXTENSION_MONTHS:
        raise argparse.ArgumentTypeError(
            f"a whole number of months, 1 to {desk.MAX_EXTENSION_MONTHS}"
        )
    return int(value)


def register(verbs, common) -> dict:
    """Add ``requests`` and its actions to the parser; return its handler."""
    p = verbs.add_parser(
        "requests", help="data-subject requests: list, show, open, export, erase, close, extend"
    )
    actions = p.add_subparsers(dest="request_action", required=True, metavar="ACTION")

    def action(name: str, help: str, *, changes: bool = False, by_id: bool = True):
        # Not ``common``: requests have no namespace to bind and live on the default database.
        q = actions.add_parser(name, help=help, allow_abbrev=False)
        q.add_argument("--subject", action=_RefuseKeyInArgv)
        if by_id:
            q.add_argument("id", help="the request's id, or a unique prefix of 8+ characters")
        if changes:
            q.add_argument("--actor", help="who acts, for the history (default cli:<login>)")
        return q

    q = action("list", "requests by due date", by_id=False)
    q.add_argument("--status", action="append", choices=RequestStatus.values, help="repeatable")
    q.add_argument("--overdue", action="store_true", help="only open requests past their due date")

    action("show", "one request and its history")

    q = action(
        "open", "record a new request (the key from stdin or typed)", changes=True, by_id=False
    )
    q.add_argument("--right", required=True, choices=SubjectRight.values)
    q.add_argument("--subject-stdin", action="store_true", help="read the subject key from stdin")
    q.add_argument("--received", type=_date, metavar="YYYY-MM-DD", help="default: today")
    q.add_argument("--namespace", action="append", help="repeatable; default: every namespace")
    q.add_argument("--assignee", metavar="USERNAME")
    q.add_argument("--notes", default="")

    q = action("export", "write the subject's data for the request to a new file", changes=True)
    q.add_argument("--output", "-o", required=True, help="the file to create (never overwritten)")

    q = action(
        "erase", "erase the subject's data for the request; prints the receipt", changes=True
    )
    q.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    q = action("close", "answer or refuse the request (drops the subject key)", changes=True)
    how = q.add_mutually_exclusive_group(required=True)
    how.add_argument("--answered", action="store_true")
    how.add_argument("--refused", action="store_true")
    q.add_argument("--reason", default="", help="the outcome; a refusal needs one")

    q = action("extend", "extend the deadline (Art. 12(3), two months at most)", changes=True)
    q.add_argument("--months", type=_months, required=True)
    q.add_argument("--reason", required=True)
    return {"requests": do_requests}


def do_requests(cmd, options) -> None:
    """Run one ``requests`` action; a refused one is a ``CommandError`` (exit status 1)."""
    handler = HANDLERS[options["request_action"]]
    try:
        handler(cmd, options)
    except desk.RequestError as e:
        raise CommandError(str(e)) from None


# ------------------------------------------------------------------ reading
def request_by_id(typed: str) -> SubjectRequest:
    """The request ``typed`` names: its whole id, or a unique prefix of 8+ characters."""
    rows = SubjectRequest.objects.select_related("assignee")
    found = rows.filter(pk=typed).first()
    if found is not None:
        return found
    if len(typed) < MIN_ID_PREFIX:
        raise CommandError(
            f"no subject request {typed!r} (give the id, or at least its first "
            f"{MIN_ID_PREFIX} characters)"
        )
    matches = list(rows.filter(prefix_q("id", typed)).order_by("id")[:2])
    if not matches:
        raise CommandError(f"no subject request {typed!r}")
    if len(matches) > 1:
        raise CommandError(f"{typed!r} is the start of more than one request: give more characters")
    return matches[0]


def _due(subject_request: SubjectRequest) -> str:
    flag = URGENCY_WORDS.get(desk.urgency(subject_request))
    return f"{subject_request.due_on}" + (f" ({flag})" if flag else "")


def _assignee(subject_request: SubjectRequest) -> str:
    return subject_request.assignee.get_username() if subject_request.assignee else "-"


def request_line(subject_request: SubjectRequest) -> str:
    """One request on one line: id (12 characters), right, status, dates, assignee."""
    return (
        f"{subject_request.pk[:12]}  {subject_request.right:<13} {subject_request.status:<11} "
        f"received {subject_request.received_on}  "
        f"due {_due(subject_request)}  {_assignee(subject_request)}"
    )


def request_facts(subject_request: SubjectRequest) -> dict:
    """A request as ``memory lookup --json`` prints it (no key: the request holds none)."""
    return {
        "id": subject_request.pk,
        "right": subject_request.right,
        "status": subject_request.status,
        "received_on": subject_request.received_on.isoformat(),
        "due_on": subject_request.due_on.isoformat(),
        "urgency": desk.urgency(subject_request),
        "assignee": subject_request.assignee.get_username() if subject_request.assignee else None,
        "closed_at": subject_request.closed_at.isoformat() if subject_request.closed_at else None,
    }


def do_list(cmd, options) -> None:
    """Requests soonest due first, filtered by status or overdue."""
    rows = SubjectRequest.objects.select_related("assignee").order_by("due_on", "created_at", "id")
    if options["status"]:
        rows = rows.filter(status__in=options["status"])
    if options["overdue"]:
        rows = rows.filter(status__in=OPEN_STATUSES, due_on__lt=desk.today())
    n = 0
    for subject_request in rows:
        n += 1
        cmd.stdout.write(request_line(subject_request))
    cmd.stdout.write(f"{plural(n, 'request', 'requests')}.")


def do_show(cmd, options) -> None:
    """The request's facts, what was done for it, and its history with actors."""
    subject_request = request_by_id(options["id"])
    write = cmd.stdout.write
    write(f"Request {subject_request.pk}")
    write(f"  right: {subject_request.get_right_display()}")
    write(f"  status: {subject_request.get_status_display()}")
    write(f"  received: {subject_request.received_on}   due: {_due(subject_request)}")
    if subject_request.extension_months:
        write(
            f"  extended by {subject_request.extension_months} month(s): "
            f"{subject_request.extension_reason}"
        )
    write(f"  assignee: {_assignee(subject_request)}")
    spaces = subject_request.namespace_count
    write(f"  namespaces: {spaces if spaces else 'every namespace'}")
    write(f"  exports: {', '.join(subject_request.exports.values_list('id', flat=True)) or '-'}")
    receipts = subject_request.receipts.values_list("id", flat=True)
    write(f"  erasure receipts: {', '.join(receipts) or '-'}")
    if subject_request.outcome:
        write(f"  outcome: {subject_request.outcome}")
    for line in subject_request.notes.splitlines():
        write(f"  note: {line}")
    write(
        f"  opened by {subject_request.created_by or '(not recorded)'} "
        f"at {subject_request.created_at:%Y-%m-%d %H:%M}"
    )
    if subject_request.closed_at:
        write(
            f"  closed at {subject_request.closed_at:%Y-%m-%d %H:%M} "
            "(the subject key it held is dropped)"
        )
    write("History:")
    for event in subject_request.history.order_by("at", "id"):
        detail = f": {event.detail}" if event.detail else ""
        write(f"  {event.at:%Y-%m-%d %H:%M}  {event.get_action_display()} by {event.actor}{detail}")


# ------------------------------------------------------------------ intake
def do_open(cmd, options) -> None:
    """Record a new request; print its id and due date (never the key)."""
    assignee = None
    if options["assignee"]:
        assignee = get_user_model().objects.filter(username=options["assignee"]).first()
        if assignee is None:
            raise CommandError(f"no user {options['assignee']!r} to assign the request to")
    subject_request = desk.open_request(
        subject=read_subject(options),
        right=options["right"],
        actor=cli_actor(options),
        received_on=options["received"],
        namespaces=options["namespace"] or (),
        assignee=assignee,
        notes=options["notes"],
    )
    cmd.stdout.write(
        f"Opened request {subject_request.pk} ({subject_request.get_right_display()}), "
        f"due {subject_request.due_on}."
    )


# ------------------------------------------------------------------ actions
def _open_sealed(subject_request: SubjectRequest) -> desk.Sealed:
    """The key an open request holds; a clear error when closed or unreadable."""
    if not subject_request.is_open:
        raise CommandError(
            f"request {subject_request.pk} is {subject_request.get_status_display()}: it is closed"
        )
    sealed = desk.unseal(subject_request)
    if sealed is None:
        raise CommandError(
            f"request {subject_request.pk}: its subject key cannot be read (key rotated away?)"
        )
    return sealed


def _totals(found: dict[str, dict[str, int]]) -> dict[str, int]:
    """``table -> {namespace: rows}`` summed per table."""
    return {table: sum(per.values()) for table, per in found.items()}


def _held(sealed: desk.Sealed) -> dict[str, int]:
    """Rows an erasure removes about the subject per table (within the request's namespaces)."""
    return _totals(holdings(sealed.subject, sealed.namespaces))


def _kept(sealed: desk.Sealed) -> dict[str, int]:
    """The project memories it wrote or contributed to: an erasure keeps them, an export
    lists them."""
    return _totals(kept(sealed.subject, sealed.namespaces))


def _warn_if_nothing(cmd, held: dict[str, int], what: str) -> None:
    if not any(held.values()):
        cmd.stderr.write(
            f"warning: nothing is held about this request's subject: {what} "
            "(was the key typed right when the request was opened?)"
        )


def _create(path: Path):
    """``path`` opened for writing, created now (never overwritten), readable by its owner only."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise CommandError(f"{path} exists: not overwritten (choose a new file)") from None
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
    return os.fdopen(fd, "w", encoding="utf-8")


def do_export(cmd, options) -> None:
    """Export the subject's data for the request into a new file; the record is linked."""
    subject_request = request_by_id(options["id"])
    sealed = _open_sealed(subject_request)
    path = Path(options["output"])
    if path.exists() or path.is_symlink():  # before any work: no export record for nothing
        raise CommandError(f"{path} exists: not overwritten (choose a new file)")
    if not path.parent.is_dir():
        raise CommandError(f"cannot write {path}: the directory {path.parent} does not exist")
    _warn_if_nothing(cmd, _held(sealed) | _kept(sealed), "the file will list no rows")
    with _create(path) as out:
        documents = desk_action("export").service(
            subject_request, actor=cli_actor(options), via=ExportVia.CLI
        )
        json.dump({"documents": documents}, out, indent=2, ensure_ascii=False)
        out.write("\n")
    rows = sum(n for d in documents for k, n in d["counts"].items() if k != "erasure_receipts")
    cmd.stdout.write(
        f"Wrote {path}: {plural(rows, 'row', 'rows')} in "
        f"{plural(len(documents), 'document', 'documents')}; the export is recorded on "
        f"request {subject_request.pk}."
    )


def do_erase(cmd, options) -> None:
    """Erase the subject's data for the request (asks unless ``--yes``); print the receipts."""
    subject_request = request_by_id(options["id"])
    sealed = _open_sealed(subject_request)
    held = _held(sealed)
    _warn_if_nothing(cmd, held, "the erasure will remove no rows")
    counts = ", ".join(f"{table} {n}" for table, n in held.items()) or "nothing"
    for kind, n in _kept(sealed).items():
        cmd.stdout.write(f"kept (project memories, not erased): {kind} {n}")
    cmd.confirm(
        f"Permanently erase {counts} for request {subject_request.pk}? This cannot be undone.",
        options,
    )
    receipts = desk_action("erase").service(subject_request, actor=cli_actor(options))
    for receipt in receipts:
        print_receipt(cmd, receipt)
    ids = ", ".join(r.pk for r in receipts)
    cmd.stdout.write(f"Receipt(s) {ids} linked to request {subject_request.pk}.")
    fail_unless_purged(receipts)


def do_close(cmd, options) -> None:
    """Answer or refuse; the subject key the request held is dropped."""
    subject_request = request_by_id(options["id"])
    if not subject_request.is_open:
        raise CommandError(
            f"request {subject_request.pk} is {subject_request.get_status_display()}: it is closed"
        )
    refused = bool(options["refused"])  # closing needs no key: one rotated away is fine
    closing = desk_action("refuse" if refused else "answer")
    closing.service(subject_request, outcome=options["reason"], actor=cli_actor(options))
    cmd.stdout.write(
        f"Request {subject_request.pk} {'refused' if refused else 'answered'}; "
        "the subject key it held is dropped."
    )


def do_extend(cmd, options) -> None:
    """Extend the deadline by ``--months`` with a reason; print the new due date."""
    subject_request = request_by_id(options["id"])
    _open_sealed(subject_request)
    desk_action("extend").service(
        subject_request, options["months"], options["reason"], actor=cli_actor(options)
    )
    cmd.stdout.write(
        f"Request {subject_request.pk} extended by {plural(options['months'], 'month', 'months')}: "
        f"due {subject_request.due_on}."
    )


HANDLERS = {
    "list": do_list,
    "show": do_show,
    "open": do_open,
    "export": do_export,
    "erase": do_erase,
    "close": do_close,
    "extend": do_extend,
}
