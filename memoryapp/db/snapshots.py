"""The SQL of ``memory_recall_snapshots``: read a slice's snapshot, write one if still current."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import connections, transaction

from memoryapp.db import vendor
from memoryapp.db.meta import SliceKey, read_slice_counters

_SELECT = (
    "SELECT counter, watermark, payload FROM memory_recall_snapshots "
    "WHERE namespace = %s AND scope = %s"
)
# Plain SQL upsert: SQLite (3.24+) and PostgreSQL share the ON CONFLICT syntax.
_UPSERT = (
    "INSERT INTO memory_recall_snapshots "
    "(namespace, scope, counter, watermark, rows, payload, written_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (namespace, scope) DO UPDATE SET counter = excluded.counter, "
    "watermark = excluded.watermark, rows = excluded.rows, payload = excluded.payload, "
    "written_at = excluded.written_at"
)


@dataclass(frozen=True)
class StoredSnapshot:
    """One row of ``memory_recall_snapshots``."""

    counter: int
    watermark: float
    payload: bytes


def in_memory(using: str) -> bool:
    """Whether the alias is an in-memory database (nothing outlives the process there)."""
    name = str(connections[using].settings_dict.get("NAME") or "")
    return name == ":memory:" or "mode=memory" in name


def _fetch(using: str, sql: str, params: list) -> list[tuple]:
    """The rows of a statement that reads snapshot payloads.

    On PostgreSQL the rows come in binary format (:attr:`Vendor.binary_blob_reads`): a
    snapshot is ~160 KB per 1,000 memories, and as text its hex would double what the
    server encodes and sends and add a decode here, about a millisecond of a cold
    recall. Same connection, so the same transaction as every other statement.
    """
    connection = connections[using]
    if vendor.for_connection(connection).binary_blob_reads:
        import psycopg

        # What Django's own cursor() does first: this may be the request's first statement.
        connection.close_if_health_check_failed()
        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, binary=True)
            return cursor.fetchall()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _stored(counter, watermark, payload) -> StoredSnapshot:
    return StoredSnapshot(int(counter), float(watermark), bytes(payload))


def read(using: str, namespace: str, scope: str) -> StoredSnapshot | None:
    """The slice's snapshot, or None."""
    rows = _fetch(using, _SELECT, [namespace, scope])
    return _stored(*rows[0]) if rows else None


def read_with_counters(
    using: str, slices: list[SliceKey], wanted: list[SliceKey]
) -> tuple[dict[SliceKey, int], dict[SliceKey, StoredSnapshot | None]]:
    """The change counter of each slice (as :func:`~memoryapp.db.meta.read_slice_counters`)
    and, in the same statement, the stored snapshot of each ``wanted`` one.

    A recall whose index is not in memory needs both, counter first: one round trip
    instead of two. The snapshots map holds a wanted slice only when its counter row
    exists (None: no snapshot stored); a slice without a counter row has nothing to
    load yet, and its recall reads for itself as before.
    """
    slices = list(dict.fromkeys(slices))
    if not slices:
        return {}, {}
    wanted = [k for k in dict.fromkeys(wanted) if k in slices]
    pair = "(c.namespace = %s AND c.scope = %s)"
    joined = " OR ".join([pair] * len(wanted)) or "1 = 0"
    sql = (
        "SELECT c.namespace, c.scope, c.value, s.counter, s.watermark, s.payload"
        " FROM memory_slice_changes c LEFT JOIN memory_recall_snapshots s"
        f" ON s.namespace = c.namespace AND s.scope = c.scope AND ({joined})"
        f" WHERE {' OR '.join([pair] * len(slices))}"
    )
    params = [part for key in (*wanted, *slices) for part in key]
    counters: dict[SliceKey, int] = dict.fromkeys(slices, 0)
    stored: dict[SliceKey, StoredSnapshot | None] = {}
    for namespace, scope, value, counter, watermark, payload in _fetch(using, sql, params):
        key = (namespace, scope)
        counters[key] = int(value)
        if key in wanted:
            stored[key] = None if payload is None else _stored(counter, watermark, payload)
    return counters, stored


def write_if_current(
    using: str,
    namespace: str,
    scope: str,
    *,
    counter: int,
    watermark: float,
    rows: int,
    payload: bytes,
) -> bool:
    """Store a snapshot current for the slice counter value ``counter``; False if it moved.

    The counter row is read under its lock (PostgreSQL ``FOR UPDATE``; SQLite's
    IMMEDIATE transaction excludes every other writer), so a statement that
    deletes rows of the slice either commits first — the counter has moved and
    nothing is written — or runs after this commit and its trigger deletes the
    snapshot: a snapshot never outlives an erasure of its rows.
    """
    with transaction.atomic(using=using):
        found = read_slice_counters(using, [(namespace, scope)], lock=True)
        if found[(namespace, scope)] != counter:
            return False
        with connections[using].cursor() as cursor:
            cursor.execute(
                _UPSERT, [namespace, scope, counter, watermark, rows, payload, time.time()]
            )
    return True
