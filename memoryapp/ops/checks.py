"""System checks: a supported vendor, IMMEDIATE SQLite transactions, a valid guard, a servable
recall ranking, replicas, and how each server's copy of an erasure can be verified."""

from __future__ import annotations

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils.connection import ConnectionDoesNotExist

from memoryapp.conf import guard_class_path
from memoryapp.db import vendor as vendors


@checks.register(checks.Tags.database, checks.Tags.compatibility)
def check_database_vendor(app_configs=None, databases=None, **kwargs):
    """memoryapp.E001: every configured database must be SQLite or PostgreSQL."""
    errors = []
    for alias in connections:
        if vendors.known(connections[alias]) is None:
            vendor = connections[alias].vendor
            errors.append(
                checks.Error(
                    f"Database {alias!r} uses the {vendor!r} backend, which memoryapp does not "
                    "support: the change-counter triggers exist only for SQLite and PostgreSQL.",
                    hint="Point DATABASE_URL at SQLite or PostgreSQL.",
                    id="memoryapp.E001",
                )
            )
    return errors


@checks.register()
def check_guard_setting(app_configs=None, **kwargs):
    """memoryapp.E002: MEMORYAPP_GUARD must name an importable MemoryGuard subclass."""
    from django.utils.module_loading import import_string

    from memoryapp.rules.guard import MemoryGuard

    path = guard_class_path()
    try:
        cls = import_string(path)
    except ImportError as exc:
        return [
            checks.Error(f"MEMORYAPP_GUARD {path!r} cannot be imported: {exc}", id="memoryapp.E002")
        ]
    if not (isinstance(cls, type) and issubclass(cls, MemoryGuard)):
        return [
            checks.Error(
                f"MEMORYAPP_GUARD {path!r} is not a subclass of memoryapp.rules.guard.MemoryGuard.",
                id="memoryapp.E002",
            )
        ]
    return []


@checks.register()
def check_recall_ranking(app_configs=None, **kwargs):
    """memoryapp.E004: MEMORYAPP_RECALL_RANKING names a ranking this server can serve;
    memoryapp.W012: MEMORYAPP_EMBEDDER names an embedder that does not load.

    ``semantic`` without an embedder (the ``semantic`` extra not installed, a
    ``MEMORYAPP_EMBEDDER`` that does not load) is refused at start-up: recall never
    falls back to another ranking silently.
    """
    from memoryapp.conf import embedder_problem, embedder_spec, recall_ranking

    try:
        recall_ranking()
    except ValueError as exc:
        return [checks.Error(f"MEMORYAPP_RECALL_RANKING: {exc}", id="memoryapp.E004")]
    # memoryapp.W012: an embedder named on purpose that does not load writes no vectors
    # (the default "wordllama" without its extra is the plain install, not a mistake).
    spec, problem = embedder_spec(), embedder_problem()
    if problem and spec.lower() not in ("none", "wordllama"):
        return [checks.Warning(f"MEMORYAPP_EMBEDDER: {problem}", id="memoryapp.W012")]
    return []


@checks.register(checks.Tags.database)
def check_sqlite_transactions(app_configs=None, databases=None, **kwargs):
    """memoryapp.E003: every SQLite alias must begin transactions IMMEDIATE.

    Upserts read a row and then write it; with SQLite's default DEFERRED
    transactions two writers can both read, and the second fails with "database is
    locked" at its first write instead of waiting. The change window of the recall
    indexes relies on the same exclusion. In-memory aliases (one connection) are exempt.
    """
    errors = []
    for alias in connections:
        settings_dict = connections.settings[alias]
        if not settings_dict.get("ENGINE", "").endswith("sqlite3"):
            continue
        name = str(settings_dict.get("NAME") or "")
        if name == ":memory:" or "mode=memory" in name:
            continue
        mode = str((settings_dict.get("OPTIONS") or {}).get("transaction_mode") or "").upper()
        if mode not in ("IMMEDIATE", "EXCLUSIVE"):
            errors.append(
                checks.Error(
                    f"SQLite database {alias!r} does not begin transactions IMMEDIATE, so "
                    "concurrent writes of one memory fail with 'database is locked' instead "
                    "of waiting for each other.",
                    hint=f"Set DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] = 'IMMEDIATE'.",
                    id="memoryapp.E003",
                )
            )
    return errors


def _asked(databases, aliases) -> list[str]:
    """The ``aliases`` a database check may connect to: Django passes the databases it
    may touch (``check --database``, ``migrate``), none for a plain ``check``. The primary
    stands for its replicas."""
    wanted = set(databases or ())
    return [a for a in aliases if a in wanted or DEFAULT_DB_ALIAS in wanted]


@checks.register(checks.Tags.database)
def check_replicas(app_configs=None, databases=None, **kwargs):
    """memoryapp.I010/W010/E010: each configured read replica, and whether it is in recovery.

    A database check (``manage.py check --database default``, ``migrate``): it connects.
    """
    from memoryapp.conf import replica_databases
    from memoryapp.db import replicas

    messages: list[checks.CheckMessage] = []
    for alias in _asked(databases, replica_databases()):
        try:
            connections[alias]  # noqa: B018 - configured (or registered at run time)?
        except ConnectionDoesNotExist:
            messages.append(
                checks.Error(
                    f"MEMORYAPP_REPLICA_DATABASES names {alias!r}, which is not in DATABASES.",
                    id="memoryapp.E010",
                )
            )
            continue
        found = replicas.measure(alias)
        if found.usable:
            messages.append(
                checks.Info(
                    f"Read replica {alias!r}: in recovery, {found.lag:.1f}s behind the "
                    "primary; lag-tolerant reads may use it.",
                    id="memoryapp.I010",
                )
            )
        else:
            messages.append(
                checks.Warning(
                    f"Read replica {alias!r} is skipped (the primary serves): {found.reason}.",
                    hint="A replica must be a streaming standby of the default database "
                    "(docs/operations.md, Read replicas).",
                    id="memoryapp.W010",
                )
            )
    return messages


@checks.register(checks.Tags.database)
def check_copies(app_configs=None, databases=None, **kwargs):
    """memoryapp.I011/W011: how each server's copy of an erasure can be byte-scanned.

    For the default database and each replica: its files read here, through SQL (the two
    grants of docs/operations.md, "Verifying every copy"), by a ``memory verifier``
    beside it (``MEMORYAPP_COPY_VERIFIERS``) — or not at all, and why. A database check.
    """
    from django.db import DEFAULT_DB_ALIAS, DatabaseError
    from django.utils.connection import ConnectionDoesNotExist

    from memoryapp.compliance.copy_scan import how_verified
    from memoryapp.conf import copy_verifiers, replica_databases

    messages: list[checks.CheckMessage] = []
    said = {"files": "its files are read by this process", "sql": "through SQL"}
    # With one server and nothing declared, only a problem is worth a line at every migrate.
    quiet = not replica_databases() and not copy_verifiers()
    for alias in _asked(databases, [DEFAULT_DB_ALIAS, *replica_databases()]):
        try:
            connections[alias]
        except ConnectionDoesNotExist:
            continue  # memoryapp.E010 says so
        try:
            method, why = how_verified(alias)
        except DatabaseError as exc:
            method, why = "", f"it cannot be reached ({type(exc).__name__})"
        if method:
            text = f"Erasures are byte-scanned on {alias!r}: {said[method]}."
            if not quiet:
                messages.append(checks.Info(text, id="memoryapp.I011"))
        elif alias in copy_verifiers():
            text = f"Erasures are byte-scanned on {alias!r} by 'memory verifier' beside it ({why})."
            messages.append(checks.Info(text, id="memoryapp.I011"))
        else:
            messages.append(
                checks.Warning(
                    f"Erasures cannot be byte-scanned on {alias!r}: {why}.",
                    hint="GRANT pg_read_server_files and EXECUTE ON FUNCTION "
                    "pg_read_binary_file(text, bigint, bigint) to the app's role, or run "
                    "'manage.py memory verifier' beside that server and list it in "
                    "MEMORYAPP_COPY_VERIFIERS (docs/operations.md, Verifying every copy); "
                    "otherwise its copies are 'rewritten, not scanned'.",
                    id="memoryapp.W011",
                )
            )
    return messages
