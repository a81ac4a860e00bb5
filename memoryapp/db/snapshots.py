"""The SQL of ``memory_recall_snapshots``: read a slice's snapshot, write one if still current."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import connections, transaction

from . import vendor
from .meta import read_slice_counters

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


def read(using: str, namespace: str, scope: str) -> StoredSnapshot | None:
    """The slice's snapshot, or None.

    On PostgreSQL the row comes in binary format (:attr:`Vendor.binary_blob_reads`): a
    snapshot is ~120 KB per 1,000 memories, and as text its hex would double what the
    server encodes and sends and add a decode here, about a millisecond of a cold
    recall. Same connection, so the same transaction as every other statement.
    """
    connection = connections[using]
    if vendor.for_connection(connection).binary_blob_reads:
        import psycopg

        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(_SELECT, [namespace, scope], binary=True)
            row = cursor.fetchone()
    else:
        with connection.cursor() as cursor:
            cursor.execute(_SELECT, [namespace, scope])
            row = cursor.fetchone()
    if row is None:
        return None
    return StoredSnapshot(int(row[0]), float(row[1]), bytes(row[2]))


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
