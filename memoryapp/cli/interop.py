"""``memory adopt``: bring an Agentao ``memory.db`` into this app's schema (docs/agentao.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from django.core.management.base import CommandError

from memoryapp.cli import cli_actor, progress
from memoryapp.interop import adopt as adoption
from memoryapp.rules.wording import plural


def register(verbs, common) -> dict:
    """Add the interop verbs to the parser; return their handlers."""
    p = verbs.add_parser(
        "adopt",
        parents=[common],
        help="bring an Agentao memory.db into this app's schema, keeping its rows",
    )
    p.add_argument(
        "path", nargs="?", help="the SQLite file to adopt (default: the --database alias)"
    )
    p.add_argument("--dry-run", action="store_true", help="only report what would be done")
    p.add_argument("--no-backup", action="store_true", help="do not copy the file aside first")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    return {"adopt": do_adopt}


def do_adopt(cmd, options) -> None:
    """Inspect the file, confirm, adopt it; report counts and the backup path."""
    path = options.get("path")
    if path and not Path(path).is_file():
        raise CommandError(f"No such file: {path}")
    scope = (
        adoption.sqlite_file_alias(path) if path else contextlib.nullcontext(options["database"])
    )
    with scope as alias:
        where = path or f"database {alias!r}"
        try:
            layout = adoption.inspect_layout(alias)
            _describe(cmd, where, layout)
            if options["dry_run"]:
                report = adoption.adopt(alias, dry_run=True)
                _counts(cmd, report)
                cmd.stdout.write("Dry run: nothing was changed.")
                return
            if layout in (adoption.AGENTAO, adoption.INTERRUPTED):
                backup = "" if options["no_backup"] else " A backup copy is written first."
                if not cmd.confirm(f"Adopt {where} into this app's schema?{backup}", options):
                    return
            with progress.for_command(cmd, options, "adopting").tick() as bar:
                bar.phase("backup, migration and adoption")
                report = adoption.adopt(
                    alias,
                    backup=not options["no_backup"],
                    actor=cli_actor(options),
                    verbosity=max(int(options.get("verbosity", 1)) - 1, 0),
                )
        except adoption.AdoptionError as exc:
            raise CommandError(str(exc)) from exc
        if report.backup:
            cmd.stdout.write(f"Backup: {report.backup}")
        if report.adopted:
            _counts(cmd, report)
            cmd.stdout.write(f"Adopted {where}: its rows are in namespace '' of this app.")
        else:
            cmd.stdout.write(f"Migrated {where}; there was nothing to adopt.")


def _describe(cmd, where: str, layout: str) -> None:
    text = {
        adoption.EMPTY: "no memory tables yet (it will just be migrated)",
        adoption.AGENTAO: "an Agentao memory store",
        adoption.INTERRUPTED: "an interrupted adoption (it will be resumed)",
        adoption.MEMORYAPP: "already this app's schema (pending migrations will be applied)",
        adoption.UNKNOWN: "memory tables of an unknown layout",
    }[layout]
    cmd.stdout.write(f"{where}: {text}.")


def _counts(cmd, report: adoption.AdoptionReport) -> None:
    for table, n in report.counts.items():
        cmd.stdout.write(f"  {table}: {plural(n, 'row', 'rows')}")
