"""The per-vendor SQL of a live memory's insert-or-update (:mod:`memoryapp.writes.live`).

One lookup, one insert and one update statement per vendor, whatever the number of
rows: a single write sends one row through them, an import thousands.

SQLite: ``executemany`` of one-row statements (the loop runs in the driver's C code).
PostgreSQL: one ``INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING id`` per
``PG_BATCH`` rows, whose rows come from one of two sources: a few rows (a single save)
from arrays bound once and ``unnest``-ed (one round trip); many rows (an import, a bulk
approval) from a temporary table filled by ``COPY`` (psycopg formats the rows in C, the
server parses no arrays). Bound as eleven text arrays (psycopg dumps lists in Python),
an import's rows cost about a third more CPU each than through ``COPY``
(bench/IMPORT.md); a multi-row ``VALUES`` list with thousands of placeholders costs more
to parse in psycopg's Python than everything else. The change counter's triggers are
row-level on SQLite and statement-level on PostgreSQL, where one statement per batch
moves the counter as ``bulk_create``/``bulk_update`` did.

Inserts say ``ON CONFLICT DO NOTHING``: losing a race to a concurrent insert of the
same key is no error, so the server never logs a unique violation (PostgreSQL's
DETAIL line would carry the key into its log) and the transaction stays usable; the
caller learns which rows did not go in and updates the winner's row instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

PG_BATCH = 500  # rows per INSERT/UPDATE of memories on PostgreSQL (bulk_create's batch_size)
_SQLITE_KEYS = 500  # keys per IN list: far below SQLite's bound-parameter limit

# Per-row columns of an insert, then those the same for every row of the call.
# The embedding (memoryapp.recall.core.vectors; NULL with embeddings off) is written with the
# row it was computed from, so no write leaves a vector of an older text behind.
INSERT_ROW_COLUMNS = (
    "id", "scope", "key_normalized", "type", "title", "content", "tags_json",
    "keywords_json", "source", "confidence", "sensitivity", "embedding_model", "embedding",
    "created_at",
)  # fmt: skip
INSERT_CALL_COLUMNS = ("namespace", "subject", "updated_at")
# What an update sets per row (then the id); subject and updated_at are per call.
UPDATE_ROW_COLUMNS = (
    "type", "title", "content", "tags_json", "keywords_json", "source", "confidence",
    "embedding_model", "embedding", "sensitivity",
)  # fmt: skip
# PostgreSQL array types of the columns bound as arrays (every other one: text[]).
_PG_TYPES = {"embedding": "bytea", "created_at": "timestamptz"}


def _pg_type(column: str) -> str:
    return _PG_TYPES.get(column, "text")


EVENT_COLUMNS = ("memory_id", "event_type", "detail", "timestamp", "namespace", "actor")


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


_COLUMNS = ", ".join(INSERT_ROW_COLUMNS + INSERT_CALL_COLUMNS)

# The subject rule, in the statement: a writer without a subject (a session without
# a user key) keeps the provenance of the user who wrote the row, which erasure by
# subject needs. A sensitivity of NULL keeps the row's (only Agentao's store sets it).
_SQLITE_INSERT = (
    f"INSERT INTO memories ({_COLUMNS}) "
    f"VALUES ({_marks(len(INSERT_ROW_COLUMNS) + len(INSERT_CALL_COLUMNS))}) "
    "ON CONFLICT DO NOTHING"
)
_SQLITE_UPDATE = (
    "UPDATE memories SET "
    + ", ".join(f"{column} = %s" for column in UPDATE_ROW_COLUMNS[:-1])
    + ", sensitivity = COALESCE(%s, sensitivity), subject = COALESCE(%s, subject), "
    "updated_at = %s WHERE namespace = %s AND id = %s"  # the namespace: one partition
)
# The one insert of PostgreSQL; ``{rows}`` is where its rows come from (_PG_ARRAYS or
# _PG_STAGED: the same columns in the same order), never a value.
_PG_INSERT = (
    f"INSERT INTO memories ({_COLUMNS}) "
    "SELECT v.*, %s::text, %s::text, %s::timestamptz FROM {rows} "
    "ON CONFLICT DO NOTHING RETURNING id"
)
_PG_ARRAYS = f"unnest({', '.join(f'%s::{_pg_type(c)}[]' for c in INSERT_ROW_COLUMNS)}) AS v"
# Many rows: COPY into a temporary table that goes at the end of the transaction (the
# rows are the memories' own text, on their way into the table), then one insert per batch.
PG_STAGE_MIN = 64  # rows from which COPY + a staged insert beat one round trip of arrays
_STAGE = "memoryapp_staged_rows"
_PG_STAGE_TABLE = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGE} (n integer, "
    + ", ".join(f"{c} {_pg_type(c)}" for c in INSERT_ROW_COLUMNS)
    + ") ON COMMIT DROP"
)
_PG_STAGE_COPY = f"COPY {_STAGE} (n, {', '.join(INSERT_ROW_COLUMNS)}) FROM STDIN"
_PG_STAGED = (
    f"(SELECT {', '.join(INSERT_ROW_COLUMNS)} FROM {_STAGE} "
    "WHERE n >= %s AND n < %s ORDER BY n) AS v"
)
_PG_UPDATE = (
    "UPDATE memories AS m SET "
    + ", ".join(f"{column} = v.{column}" for column in UPDATE_ROW_COLUMNS[:-1])
    + ", sensitivity = COALESCE(v.sensitivity, m.sensitivity), "
    "subject = COALESCE(%s::text, m.subject), updated_at = %s::timestamptz "
    f"FROM unnest({', '.join(f'%s::{_pg_type(c)}[]' for c in (*UPDATE_ROW_COLUMNS, 'id'))}) "
    f"AS v({', '.join(UPDATE_ROW_COLUMNS)}, id) WHERE m.namespace = %s AND m.id = v.id"
)

# The live row of each key, one index probe per key. Without statistics (a table
# being filled, autovacuum off or not yet run) PostgreSQL estimates one row per
# namespace and scans all of it, filtering the keys, instead of using the keys in the
# index condition; the LIMIT keeps the lateral subquery a per-key probe of the partial
# unique index (at most one live row per key: the LIMIT drops nothing).
_PG_LIVE = (
    "SELECT m.key_normalized, m.id, m.created_at, m.subject "
    "FROM unnest(%s::text[]) AS k(key_normalized) "
    "CROSS JOIN LATERAL (SELECT key_normalized, id, created_at, subject FROM memories "
    "WHERE namespace = %s AND scope = %s AND key_normalized = k.key_normalized "
    "AND deleted_at IS NULL LIMIT 1{lock}) AS m"
)
_SQLITE_LIVE = (
    # Scope named, so the partial unique index serves the lookup: with the namespace
    # alone SQLite scans the whole namespace.
    "SELECT key_normalized, id, created_at, subject FROM memories WHERE namespace = %s "
    "AND scope = %s AND key_normalized IN ({marks}) AND deleted_at IS NULL"
)
_INSERT_EVENT = f"INSERT INTO memory_events ({', '.join(EVENT_COLUMNS)}) VALUES ({_marks(6)})"
_PG_COPY_EVENT = f"COPY memory_events ({', '.join(EVENT_COLUMNS)}) FROM STDIN"


def _columns(rows: Sequence[tuple]) -> list[list]:
    """The values of ``rows``, column by column (for ``unnest``)."""
    return [list(column) for column in zip(*rows, strict=True)]


def live_rows(
    cursor, postgresql: bool, namespace: str, scope: str, keys: list[str], *, lock: bool = False
) -> list[tuple]:
    """``(key_normalized, id, created_at, subject)`` of the live rows of ``keys`` in one scope.

    ``lock`` takes the rows' locks until the transaction ends (PostgreSQL; SQLite's
    IMMEDIATE transactions serialise writers anyway).
    """
    found: list[tuple] = []
    if postgresql:
        cursor.execute(
            _PG_LIVE.format(lock=" FOR UPDATE" if lock else ""), [keys, namespace, scope]
        )
        return cursor.fetchall()
    for start in range(0, len(keys), _SQLITE_KEYS):
        chunk = keys[start : start + _SQLITE_KEYS]
        cursor.execute(_SQLITE_LIVE.format(marks=_marks(len(chunk))), [namespace, scope, *chunk])
        found += cursor.fetchall()
    return found


def insert(cursor, postgresql: bool, rows: list[tuple], call: tuple) -> set[str] | None:
    """Insert ``rows`` (:data:`INSERT_ROW_COLUMNS`) with ``call`` (namespace, subject,
    updated_at); the ids that went in, or None when every row did.

    A row missing from the answer lost its key to a concurrent writer, or its id
    was taken.
    """
    if postgresql:
        inserted: set[str] = set()
        staged = len(rows) >= PG_STAGE_MIN
        if staged:
            _stage(cursor, rows)
        for start in range(0, len(rows), PG_BATCH):
            values: list  # the batch's bounds in the staged rows, or its columns as arrays
            if staged:
                source, values = _PG_STAGED, [start, start + PG_BATCH]
            else:
                source, values = _PG_ARRAYS, _columns(rows[start : start + PG_BATCH])
            cursor.execute(_PG_INSERT.format(rows=source), [*call, *values])
            inserted.update(memory_id for (memory_id,) in cursor.fetchall())
        if staged:
            cursor.execute(f"TRUNCATE {_STAGE}")  # the next call of this transaction
        return None if len(inserted) == len(rows) else inserted
    cursor.executemany(_SQLITE_INSERT, [row + call for row in rows])
    if cursor.rowcount == len(rows):
        return None
    ids = [row[0] for row in rows]
    present: set[str] = set()
    for start in range(0, len(ids), _SQLITE_KEYS):
        chunk = ids[start : start + _SQLITE_KEYS]
        # Only this call's rows carry this call's updated_at stamp among these ids.
        cursor.execute(
            f"SELECT id FROM memories WHERE id IN ({_marks(len(chunk))}) "
            "AND namespace = %s AND updated_at = %s",
            [*chunk, call[0], call[2]],
        )
        present.update(memory_id for (memory_id,) in cursor.fetchall())
    return present


def _stage(cursor, rows: list[tuple]) -> None:
    """COPY ``rows`` (numbered from 0) into the transaction's temporary table (PostgreSQL)."""
    cursor.execute(_PG_STAGE_TABLE)
    with cursor.db.wrap_database_errors, cursor.cursor.copy(_PG_STAGE_COPY) as copy:
        for n, row in enumerate(rows):
            copy.write_row((n, *row))


def update(cursor, postgresql: bool, rows: list[tuple], *, namespace: str, subject, stamp) -> None:
    """Update the rows of ``rows`` (:data:`UPDATE_ROW_COLUMNS`, then the id) in place."""
    if postgresql:
        for start in range(0, len(rows), PG_BATCH):
            columns = _columns(rows[start : start + PG_BATCH])
            cursor.execute(_PG_UPDATE, [subject, stamp, *columns, namespace])
        return
    cursor.executemany(
        _SQLITE_UPDATE, [(*row[:-1], subject, stamp, namespace, row[-1]) for row in rows]
    )


def insert_events(connection, cursor, postgresql: bool, events: Iterable[tuple]) -> None:
    """Append ``memory_events`` rows (:data:`EVENT_COLUMNS`); COPY for many on PostgreSQL."""
    events = list(events)
    if postgresql and len(events) > 1:
        # COPY: psycopg formats the rows in C; it checks constraints as INSERT does,
        # and errors are translated to Django's exceptions as for any statement.
        with connection.wrap_database_errors, cursor.cursor.copy(_PG_COPY_EVENT) as copy:
            for event in events:
                copy.write_row(event)
    elif events:
        cursor.executemany(_INSERT_EVENT, events)
