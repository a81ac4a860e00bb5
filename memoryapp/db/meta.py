"""The ``schema_meta`` rows: the trigger-maintained change counter and the schema version."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import DEFAULT_DB_ALIAS, connections

CHANGE_KEY = "memories_change"
VERSION_KEY = "version"
# Agentao writes version 3 into this row on every start-up; keeping the same
# value means a shared file never flips between two claims.
SCHEMA_VERSION = "3"


def read_change_counter(using: str = DEFAULT_DB_ALIAS, *, lock: bool = False) -> int:
    """Current value of ``schema_meta.memories_change`` on one database (0 when absent).

    ``lock`` (inside a transaction) also locks the counter row on PostgreSQL,
    so no other writer can move it until commit; SQLite's IMMEDIATE
    transactions already exclude other writers.
    """
    connection = connections[using]
    sql = "SELECT value FROM schema_meta WHERE key = %s"
    if lock and connection.vendor == "postgresql":
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, [CHANGE_KEY])
        row = cursor.fetchone()
    try:
        return int(row[0]) if row else 0
    except (TypeError, ValueError):
        return 0


SliceKey = tuple[str, str]  # (namespace, scope)


def read_slice_counters(
    using: str, slices: Iterable[SliceKey], *, lock: bool = False
) -> dict[SliceKey, int]:
    """The ``memory_slice_changes`` value of each (namespace, scope); 0 for a slice without a row.

    One statement for all the slices a manager reads on one database. ``lock``
    (inside a transaction) also locks the rows on PostgreSQL, as
    :func:`read_change_counter` does.
    """
    wanted = list(dict.fromkeys(slices))
    if not wanted:
        return {}
    where = " OR ".join(["(namespace = %s AND scope = %s)"] * len(wanted))
    params = [part for pair in wanted for part in pair]
    with connections[using].cursor() as cursor:
        sql = f"SELECT namespace, scope, value FROM memory_slice_changes WHERE {where}"
        if lock and connections[using].vendor == "postgresql":
            sql += " FOR UPDATE"
        cursor.execute(sql, params)
        found = {(ns, scope): int(value) for ns, scope, value in cursor.fetchall()}
    return {pair: found.get(pair, 0) for pair in wanted}


FULL_REWRITE_KEY = "erasure_full_rewrite_at"
"""The ``schema_meta`` row holding when (POSIX seconds) an erasure last began a rewrite of
every tenant's rows (:func:`claim_interval`)."""


def claim_interval(key: str, at: float, interval: float, using: str = DEFAULT_DB_ALIAS) -> float:
    """Take the once-per-``interval`` slot named ``key`` at ``at`` (POSIX seconds).

    Answers 0.0 when taken — no claim was recorded within ``interval`` seconds
    before ``at``, and ``at`` now is — else when the slot opens again. One
    statement (an upsert whose update is conditional), so two processes, or two
    servers sharing the database, never both take it: it is the database, not a
    process's memory, that remembers the last claim.
    """
    sql = (
        "INSERT INTO schema_meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value "
        "WHERE CAST(schema_meta.value AS DOUBLE PRECISION) <= %s"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [key, repr(float(at)), float(at) - interval])
        if cursor.rowcount:
            return 0.0
        cursor.execute("SELECT value FROM schema_meta WHERE key = %s", [key])
        row = cursor.fetchone()
    try:
        last = float(row[0]) if row else at
    except (TypeError, ValueError):
        last = at
    return max(last + interval, at)
