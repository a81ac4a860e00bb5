"""Adopt an Agentao ``memory.db`` into this app's schema, in place, keeping every row.

Agentao's file has the same five tables as ours, without our columns
(``namespace``, ``subject``, ``actor``), with its own ``(scope, key)`` unique
indexes and with triggers that do not survive a flush. Rather than altering
those tables to look like ours (and then faking migrations over a schema that
only resembles what they build), adoption lets the migrations build the real
thing and moves the rows into it:

1. back the file up (``VACUUM INTO``), unless told not to;
2. in one transaction: drop Agentao's triggers and unique indexes, rename its
   five tables to ``_agentao_<table>`` and forget any memoryapp migration a
   ``migrate --fake-initial`` may have recorded over them;
3. ``migrate`` (every app, as for any database of this project);
4. in one transaction: copy the rows in insertion order into the new tables
   (namespace ``''``, timestamps in this app's canonical text form), add one
   ``adopt`` event per memory, move the ``memories_change`` counter past
   Agentao's value, drop the ``_agentao_*`` tables.

A failure between steps leaves ``_agentao_*`` tables behind; running adoption
again resumes from there (and the backup is always there). The result is the
schema a fresh ``migrate`` builds, so Agentao's own ``SQLiteMemoryStore``
opens the file afterwards exactly as it opens one this app created.
Nothing here imports ``agentao``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.core.management import call_command
from django.db import NotSupportedError, connections, transaction

from memoryapp.db import vendor
from memoryapp.db.meta import CHANGE_KEY
from memoryapp.fields import now
from memoryapp.models import MemoryEvent

TABLES = ("schema_meta", "memories", "session_summaries", "memory_events", "memory_review_queue")
AGENTAO_TRIGGERS = ("trg_memories_change_ins", "trg_memories_change_upd", "trg_memories_change_del")
AGENTAO_INDEXES = ("uix_memories_scope_key", "uix_review_scope_key")
PREFIX = "_agentao_"
TIMESTAMP_COLUMNS = frozenset({"created_at", "updated_at", "deleted_at", "timestamp"})

# Layouts of a database file, as found by inspect_layout().
EMPTY = "empty"  # no memory tables: a plain migrate is all it needs
AGENTAO = "agentao"  # Agentao's schema: adoptable
INTERRUPTED = "interrupted"  # an adoption stopped between its steps: resumable
MEMORYAPP = "memoryapp"  # already this app's schema
UNKNOWN = "unknown"  # something else: left alone


class AdoptionError(Exception):
    """The database cannot be adopted as it is (the message says why)."""


@dataclass
class AdoptionReport:
    """What :func:`adopt` found and did.

    Attributes:
        layout: the layout found before adopting (see the module constants).
        counts: rows per table that were (or, on a dry run, would be) moved.
        backup: path of the backup copy written first, or None.
        adopted: True when rows were moved into this app's tables.
        migrated: True when ``migrate`` ran.
        dry_run: True when nothing was changed.
    """

    layout: str
    counts: dict[str, int] = field(default_factory=dict)
    backup: str | None = None
    adopted: bool = False
    migrated: bool = False
    dry_run: bool = False


@contextlib.contextmanager
def sqlite_file_alias(path: str | Path) -> Iterator[str]:
    """A temporary database alias for the SQLite file at ``path`` (this project's options).

    WAL, ``IMMEDIATE`` transactions and a 30 s busy timeout, as the project
    configures SQLite. The alias is private to this thread and this call: its
    connection object is created and the alias unlisted again, so nothing
    that walks the configured databases (``close_all``, checks, a test
    case's database isolation) meets it; it is closed on exit.
    """
    alias = f"adopt_{uuid.uuid4().hex[:8]}"
    settings_dict = copy.deepcopy(connections.settings["default"])
    settings_dict.update(
        ENGINE="django.db.backends.sqlite3",
        NAME=str(path),
        USER="",
        PASSWORD="",
        HOST="",
        PORT="",
        OPTIONS={
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        },
        TEST={"NAME": str(path)},
    )
    connections.settings[alias] = settings_dict
    try:
        connections[alias]  # noqa: B018 - create the connection object while listed
    finally:
        del connections.settings[alias]
    try:
        yield alias
    finally:
        with contextlib.suppress(Exception):
            connections[alias].close()
        with contextlib.suppress(AttributeError, KeyError):
            del connections[alias]


# ----------------------------------------------------------------- inspection
def _tables(using: str) -> set[str]:
    connection = connections[using]
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def _columns(using: str, table: str) -> list[tuple[str, bool, bool]]:
    """``(name, not_null, has_default)`` per column, in table order (SQLite)."""
    with connections[using].cursor() as cursor:
        cursor.execute(f'PRAGMA table_info("{table}")')
        return [(row[1], bool(row[3]), row[4] is not None or bool(row[5])) for row in cursor]


def _memoryapp_recorded(using: str, tables: set[str]) -> bool:
    if "django_migrations" not in tables:
        return False
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM django_migrations WHERE app = %s", ["memoryapp"])
        return cursor.fetchone()[0] > 0


def inspect_layout(using: str) -> str:
    """Which layout the database of alias ``using`` has (``EMPTY``, ``AGENTAO``, …)."""
    if not vendor.of(using).adopts_files:
        tables = _tables(using)
        if "memories" not in tables:
            return EMPTY
        return MEMORYAPP if _memoryapp_recorded(using, tables) else UNKNOWN
    tables = _tables(using)
    if any(t.startswith(PREFIX) and t[len(PREFIX) :] in _app_tables() for t in tables):
        return INTERRUPTED
    present = tables & set(TABLES)
    if not present:
        return EMPTY
    if "memories" not in present:
        return UNKNOWN
    names = {name for name, _, _ in _columns(using, "memories")}
    if "namespace" not in names:
        # Agentao's layout, possibly under a memoryapp migration that a
        # ``migrate --fake-initial`` recorded without building our columns.
        return AGENTAO if present == set(TABLES) else UNKNOWN
    return MEMORYAPP if _memoryapp_recorded(using, tables) else UNKNOWN


def _count(using: str, table: str) -> int:
    with connections[using].cursor() as cursor:
        cursor.execute(f'SELECT COUNT(*) FROM "{table}"')
        return cursor.fetchone()[0]


# ------------------------------------------------------------------- adoption
def adopt(
    using: str,
    *,
    backup: bool = True,
    dry_run: bool = False,
    actor: str = "",
    verbosity: int = 0,
) -> AdoptionReport:
    """Bring the SQLite database of alias ``using`` into this app's schema.

    An Agentao file is adopted (its rows keep their ids, timestamps, soft
    deletes, summaries, review items and events, in namespace ``''``); an
    interrupted adoption is resumed; an empty database or one already in
    this app's schema is just migrated. The connection must not be inside a
    transaction (``migrate`` and ``VACUUM`` cannot run in one).

    Args:
        using: the database alias (SQLite).
        backup: write ``<file>.agentao-backup-<UTC time>`` first.
        dry_run: only inspect and count.
        actor: recorded on the ``adopt`` events.
        verbosity: passed to ``migrate``.

    Raises:
        AdoptionError: an unknown layout, or rows in the way of a resume.
        NotSupportedError: not a SQLite database.
    """
    layout = inspect_layout(using)
    report = AdoptionReport(layout=layout, dry_run=dry_run)
    if layout == UNKNOWN:
        raise AdoptionError(
            "This database has memory tables that are neither Agentao's nor this app's "
            "(or this app's without its migration history); nothing was changed."
        )
    if layout in (EMPTY, MEMORYAPP):
        if not dry_run:
            call_command("migrate", database=using, interactive=False, verbosity=verbosity)
            report.migrated = True
        return report
    _check_file(using)
    source = {t: (t if layout == AGENTAO else PREFIX + t) for t in TABLES}
    report.counts = {t: _count(using, source[t]) for t in TABLES if t != "schema_meta"}
    if dry_run:
        return report
    if backup:
        report.backup = _backup(using)
    _clear_the_way(using, layout)
    call_command("migrate", database=using, interactive=False, verbosity=verbosity)
    report.migrated = True
    _move_rows(using, actor=actor)
    report.adopted = True
    return report


def _check_file(using: str) -> None:
    """Refuse a database that cannot be adopted here: not SQLite, or inside a transaction."""
    connection = connections[using]
    if not vendor.for_connection(connection).adopts_files:
        raise NotSupportedError("Only SQLite files can be adopted.")
    if connection.in_atomic_block:
        raise AdoptionError("adopt() cannot run inside a transaction.")


def _clear_the_way(using: str, layout: str) -> None:
    """Before ``migrate``: set Agentao's tables aside, or (a resumed adoption) refuse when
    this app's tables already hold rows that the move would collide with."""
    if layout == AGENTAO:
        _set_aside(using)
        return
    blocking = [t for t in _app_tables() if t in _tables(using) and t != "schema_meta"]
    if any(_count(using, t) for t in blocking):
        raise AdoptionError(
            "An earlier adoption stopped after this app's tables received rows; "
            f"restore the backup or move the {PREFIX}* tables' rows by hand."
        )


def _backup(using: str) -> str | None:
    name = str(connections[using].settings_dict["NAME"])
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = f"{name}.agentao-backup-{stamp}"
    with connections[using].cursor() as cursor:
        cursor.execute("VACUUM INTO %s", [path])
    return path


def _app_tables() -> list[str]:
    """Agentao's five tables, then this app's other tables (from its models)."""
    from django.apps import apps

    others = [
        m._meta.db_table
        for m in apps.get_app_config("memoryapp").get_models(include_auto_created=True)
        if m._meta.db_table not in TABLES and m._meta.managed
    ]
    return [*TABLES, *sorted(set(others))]


def _set_aside(using: str) -> None:
    """Step 2: the memory tables out of the migrations' way, in one transaction.

    Agentao's five tables, and — when a ``migrate --fake-initial`` recorded
    this app's migrations over them — the tables later migrations created,
    whose rows are copied back in step 4. Their triggers and indexes go first
    (renaming keeps them attached under their names, which the migrations
    are about to create again).
    """
    present = _tables(using)
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        if "django_migrations" in present:
            # The real migrations must run: forget what was only recorded.
            cursor.execute("DELETE FROM django_migrations WHERE app = %s", ["memoryapp"])
        for table in _app_tables():
            if table not in present:
                continue
            cursor.execute(
                "SELECT type, name FROM sqlite_master "
                "WHERE tbl_name = %s AND type IN ('index', 'trigger') AND sql IS NOT NULL",
                [table],
            )
            for kind, name in cursor.fetchall():
                cursor.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
            cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{PREFIX}{table}"')


def _timestamp(column: str) -> str:
    # Agentao writes "YYYY-MM-DDTHH:MM:SS"; this app's canonical text has
    # microseconds, so equality lookups and ordering agree after adoption.
    c = f'"{column}"'
    return (
        f"CASE WHEN length({c}) = 19 "
        f"THEN substr({c}, 1, 10) || 'T' || substr({c}, 12) || '.000000' ELSE {c} END"
    )


# Columns later migrations added without a database default, and what an older
# file's rows get: receipts written before states existed were written after
# their rows went (migration 0007 decides the same way).
_FILLED = {
    "memory_erasure_receipts": {
        "state": "CASE WHEN purge_status = 'purged' AND verified THEN 'complete' "
        "ELSE 'deleted' END",
        "claimed_by": "''",
    },
}


def _copy(cursor, using: str, table: str) -> int:
    """Copy the set-aside rows of ``table`` into this app's table; how many."""
    names, select = _copied_columns(using, table)
    columns = ", ".join(f'"{n}"' for n in names)
    verb = "INSERT OR IGNORE" if table == "schema_meta" else "INSERT"
    cursor.execute(
        f'{verb} INTO "{table}" ({columns}) SELECT {select} FROM "{PREFIX + table}" ORDER BY rowid'
    )
    return cursor.rowcount


def _copied_columns(using: str, table: str) -> tuple[list[str], str]:
    """The target columns of :func:`_copy` and the select list that fills them: the
    columns both tables have (timestamps rewritten), then the filled-in ones.

    Raises:
        AdoptionError: a required column the set-aside table lacks and nothing fills.
    """
    source = PREFIX + table
    have = {name for name, _, _ in _columns(using, source)}
    targets = _columns(using, table)
    filled = {n: e for n, e in _FILLED.get(table, {}).items() if n not in have}
    missing = [
        n
        for n, not_null, default in targets
        if n not in have and n not in filled and not_null and not default
    ]
    if missing:
        raise AdoptionError(f"{source} lacks required column(s): {', '.join(missing)}")
    names = [n for n, _, _ in targets if n in have]
    selected = [_timestamp(n) if n in TIMESTAMP_COLUMNS else f'"{n}"' for n in names]
    return names + list(filled), ", ".join(selected + list(filled.values()))


def _move_rows(using: str, *, actor: str) -> None:
    """Step 4: the rows into this app's tables, in one transaction."""
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(f'SELECT value FROM "{PREFIX}schema_meta" WHERE key = %s', [CHANGE_KEY])
        row = cursor.fetchone()
        try:
            agentao_counter = int(row[0]) if row else 0
        except (TypeError, ValueError):
            agentao_counter = 0
        aside = [t for t in _app_tables() if PREFIX + t in _tables(using)]
        copied = {t: _copy(cursor, using, t) for t in aside}
        # The triggers counted each copied memory on top of the fresh 0; the
        # counter must end past Agentao's value, or a reader that cached it
        # would miss the change of schema.
        counter = agentao_counter + copied["memories"] + 1
        cursor.execute(
            "UPDATE schema_meta SET value = %s WHERE key = %s", [str(counter), CHANGE_KEY]
        )
        cursor.execute("SELECT id FROM memories ORDER BY rowid")
        ids = [r[0] for r in cursor.fetchall()]
        stamp = now()
        detail = json.dumps({"source": "agentao"})
        MemoryEvent.objects.using(using).bulk_create(
            MemoryEvent(
                memory_id=i, event_type="adopt", timestamp=stamp, detail=detail, actor=actor
            )
            for i in ids
        )
        for table in aside:
            cursor.execute(f'DROP TABLE "{PREFIX}{table}"')


__all__ = [
    "AGENTAO",
    "EMPTY",
    "INTERRUPTED",
    "MEMORYAPP",
    "UNKNOWN",
    "AdoptionError",
    "AdoptionReport",
    "adopt",
    "inspect_layout",
    "sqlite_file_alias",
]
