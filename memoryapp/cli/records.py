"""``manage.py memory export | lookup | backup``: what is stored, read out.

A subject's access request (``export``), what the compliance records and the
data-subject requests say of a user key (``lookup``), a consistent copy of the
database (``backup``).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import tempfile
from pathlib import Path

from django.core.management.base import CommandError
from django.db import connections

from memoryapp import compliance
from memoryapp.cli import cli_actor, progress
from memoryapp.cli.compliance import aliases_of
from memoryapp.cli.requests import request_facts, request_line
from memoryapp.cli.subject_key import STDIN_HELP, subject_from_stdin
from memoryapp.compliance.lookup import lookup
from memoryapp.db.purge.vendors import for_connection
from memoryapp.models import ErasureReceipt, ExportVia
from memoryapp.rules.receipt_text import summarize
from memoryapp.rules.wording import plural


def register(verbs, common) -> dict:
    """Add the export, lookup and backup verbs to the parser; return their handlers."""
    p = verbs.add_parser(
        "export", parents=[common], help="everything stored about a subject or namespace (JSON)"
    )
    p.add_argument("--subject")
    p.add_argument("--subject-stdin", action="store_true", help=STDIN_HELP)
    p.add_argument("--namespace")
    p.add_argument("--output", "-o", help="file to write (default: standard output)")
    p.add_argument("--actor", help="who exports, for the export record (default cli:<login>)")

    p = verbs.add_parser(
        "lookup",
        parents=[common],
        help="the erasure receipts, export records and requests of a subject key (by HMAC)",
    )
    p.add_argument(
        "--subject",
        help="the user key (asked for, unechoed, when omitted: then it stays out of shell history)",
    )
    p.add_argument("--subject-stdin", action="store_true", help=STDIN_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")

    p = verbs.add_parser("backup", parents=[common], help="write a consistent copy of the database")
    p.add_argument("path", help="the new backup file (SQLite) / the pg_dump target (PostgreSQL)")
    return {"export": do_export, "lookup": do_lookup, "backup": do_backup}


# ------------------------------------------------------------------ export
def _require_writable(path: Path) -> None:
    """A clean error unless ``path`` can be (over)written."""
    if path.is_dir():
        raise CommandError(f"cannot write {path}: it is a directory")
    if not path.parent.is_dir():
        raise CommandError(f"cannot write {path}: the directory {path.parent} does not exist")
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        raise CommandError(f"cannot write {path}: permission denied")


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` readable by its owner only (0600), whatever the umask or an older file.

    The export is personal data. The text goes to a new file beside ``path`` created with
    mode 0600 (``mkstemp`` opens it so: the mode is set at creation, there is no moment
    when another user could open it), which then replaces ``path`` in one rename.
    """
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None


def do_export(cmd, options) -> None:
    """Write everything about a subject or namespace as one JSON document."""
    subject_from_stdin(options)
    if options["subject"] is None and options["namespace"] is None:
        raise CommandError("export needs --subject or --namespace")
    out = options["output"] if options["output"] not in (None, "", "-") else None
    if out:
        _require_writable(Path(out))  # before the export's work, not a traceback after it
    with progress.for_command(cmd, options, "exporting") as bar:
        document = compliance.export(
            subject=options["subject"],
            namespace=options["namespace"],
            using=aliases_of(options),
            progress=bar.update,
            actor=cli_actor(options),
            via=ExportVia.CLI,
        )
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if out:
        _write_private(Path(out), text + "\n")
        counts = ", ".join(f"{k} {v}" for k, v in document["counts"].items())
        cmd.stdout.write(f"Wrote {out}: {counts}.")
    else:
        cmd.stdout.write(text)


# ------------------------------------------------------------------ lookup
def do_lookup(cmd, options) -> None:
    """Print the receipts, export records and requests naming a subject key; never the key."""
    subject_from_stdin(options)
    subject = options.get("subject")
    if subject is None:
        subject = getpass.getpass("User key: ")
    if not subject or not subject.strip():
        raise CommandError("lookup needs a user key (--subject, or typed when asked)")
    alias = options["database"]
    if alias not in connections:
        raise CommandError(f"unknown database alias {alias!r}")
    found = lookup(subject, using=alias)
    receipts, exports = list(found.receipts), list(found.exports)
    requests = list(found.requests)
    if options.get("json"):
        body = {
            "receipts": [
                {
                    **{k: v for k, v in compliance.receipt_as_dict(r).items() if k in _LOOKUP_KEYS},
                    "summary": summarize(compliance.receipt_as_dict(r)).text,
                }
                for r in receipts
            ],
            "exports": [_export_line(e) for e in exports],
            "requests": [request_facts(subject_request) for subject_request in requests],
        }
        cmd.stdout.write(json.dumps(body, indent=2, ensure_ascii=False, default=str))
        return
    cmd.stdout.write(
        f"{plural(len(receipts), 'erasure receipt', 'erasure receipts')}, "
        f"{plural(len(exports), 'export record', 'export records')}, "
        f"{plural(len(requests), 'subject request', 'subject requests')} name this user key."
    )
    for subject_request in requests:
        cmd.stdout.write(f"request {request_line(subject_request)}")
    for r in receipts:
        text = summarize(compliance.receipt_as_dict(r))
        cmd.stdout.write(f"receipt {r.pk}  {r.created_at:%Y-%m-%d %H:%M}  {text.headline}")
        cmd.stdout.write(f"    {text.sentences[0]}")
    for e in exports:
        cmd.stdout.write(
            f"export  {e.pk}  {e.created_at:%Y-%m-%d %H:%M}  via {e.via} by "
            f"{e.actor or '(not recorded)'}: {plural(e.total, 'row', 'rows')}"
        )


_LOOKUP_KEYS = (
    "id",
    "created_at",
    "actor",
    "target_kind",
    "state",
    "counts",
    "verified",
    "outcome",
    "scan_unavailable",
)


def _export_line(e) -> dict:
    return {
        "id": e.pk,
        "created_at": e.created_at.isoformat(),
        "actor": e.actor,
        "via": e.via,
        "target_kind": e.target_kind,
        "counts": e.counts,
    }


# ------------------------------------------------------------------ backup
def do_backup(cmd, options) -> None:
    """SQLite: VACUUM INTO a new file. PostgreSQL: print the pg_dump command to run."""
    alias = options["database"]
    connection = connections[alias]
    with progress.for_command(cmd, options, "backing up").tick() as bar:
        bar.phase("writing the copy")
        message = for_connection(connection).backup(connection, options["path"])
    cmd.stdout.write(message)
    n = ErasureReceipt.objects.using(alias).count()
    cmd.stdout.write(
        f"This backup holds {plural(n, 'erasure receipt', 'erasure receipts')} "
        "and keeps any data erased later: keep it "
        "no longer than your retention policy allows, keep the erasure ledger "
        "(MEMORYAPP_ERASURE_LEDGER) outside it, and after restoring it run "
        "'manage.py memory erase --replay'."
    )
