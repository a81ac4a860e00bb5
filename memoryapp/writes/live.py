"""The one write of live memories: insert or update by key, the events, the subject rule.

Every path that writes a live memory ends in :func:`upsert_rows`: a single save
(:func:`memoryapp.writes.store.write`), an import and a bulk approval
(:func:`memoryapp.writes.bulk.import_records`), an approval
(:func:`memoryapp.services.review.approve`, through the single save) and Agentao's
store endpoints (:func:`memoryapp.interop.writes.upsert_memory`). The rule they
share: a key with a live row in (namespace, scope) updates that row in place (id
and ``created_at`` kept, ``updated_at`` moves, an ``update`` event); any other key
inserts a row (a ``create`` event); the row's subject becomes the writer's, or
stays when the writer has none. The SQL is :mod:`memoryapp.db.upsert`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import IntegrityError, connections

from memoryapp.db import upsert as sql
from memoryapp.db import vendor
from memoryapp.models import Memory, new_id

_STAMP_FIELD = Memory._meta.get_field("updated_at")


class Row(NamedTuple):
    """A memory's values to write (text as stored: the tag and keyword lists as JSON)."""

    scope: str
    key_normalized: str
    type: str
    title: str
    content: str
    tags_json: str
    keywords_json: str
    source: str
    confidence: str
    detail: str | None
    """The event's detail (JSON text)."""
    sensitivity: str | None = None
    """None: ``normal`` for a new row, the row's own for an update."""
    id: str | None = None
    """The id a new row wants (None: a fresh one)."""
    created_at: Any = None
    """A new row's ``created_at`` (None: the write's stamp)."""


class Written(NamedTuple):
    """What :func:`upsert_rows` did to one row (aligned with the rows given)."""

    id: str
    created: bool
    created_at: Any
    """A new row's as given; an updated row's as the database holds it (SQLite: text)."""
    subject: str | None
    """The row's subject after the write."""


class IdTaken(IntegrityError):
    """A new row's id is already in use (a writer that chose its own id draws another)."""

    def __init__(self, rows: list[int]):
        super().__init__("new memory id already in use; retry the write")
        self.rows = rows


def stamp_value(connection, stamp) -> Any:
    """``stamp`` as the database stores it (SQLite: the ISO text other writers sort by)."""
    return _STAMP_FIELD.get_db_prep_value(stamp, connection)


def upsert_rows(
    cursor,
    *,
    using: str,
    namespace: str,
    rows: Sequence[Row],
    subject: str | None,
    actor: str,
    stamp,
    lock: bool = False,
) -> list[Written]:
    """Insert or update each of ``rows`` (distinct keys) in ``namespace``; their events.

    Must run inside a transaction. The events are the ``create`` ones in row order,
    then the ``update`` ones. ``lock`` locks the live rows found (a single write on
    PostgreSQL: a concurrent writer of the same key waits, then updates).

    Raises:
        IdTaken: a new row's id was in use (no row of the call is kept once the
            caller's transaction rolls back; a caller that chose ids may retry).
    """
    connection = connections[using]
    postgresql = vendor.for_connection(connection).bulk_copy
    sql_stamp = stamp_value(connection, stamp)
    found = _live(cursor, postgresql, namespace, rows, range(len(rows)), lock)
    out: list[Written | None] = [None] * len(rows)
    new = [n for n in range(len(rows)) if (rows[n].scope, rows[n].key_normalized) not in found]
    ids = {n: rows[n].id or new_id() for n in new}
    inserted = sql.insert(
        cursor,
        postgresql,
        [_insert_values(rows[n], ids[n], sql_stamp, connection) for n in new],
        (namespace, subject, sql_stamp),
    )
    if inserted is not None:  # some rows lost their key to a concurrent writer, or their id
        lost = [n for n in new if ids[n] not in inserted]
        found.update(_live(cursor, postgresql, namespace, rows, lost, True))
        taken = [n for n in lost if (rows[n].scope, rows[n].key_normalized) not in found]
        if taken:
            raise IdTaken(taken)
        new = [n for n in new if ids[n] in inserted]
    for n in new:
        out[n] = Written(ids[n], True, rows[n].created_at or stamp, subject)
    old = [n for n in range(len(rows)) if out[n] is None]
    updates = []
    for n in old:
        memory_id, created_at, row_subject = found[(rows[n].scope, rows[n].key_normalized)]
        out[n] = Written(memory_id, False, created_at, row_subject if subject is None else subject)
        r = rows[n]
        updates.append(
            (r.type, r.title, r.content, r.tags_json, r.keywords_json, r.source, r.confidence,
             r.sensitivity, memory_id)
        )  # fmt: skip
    if updates:
        sql.update(
            cursor, postgresql, updates, namespace=namespace, subject=subject, stamp=sql_stamp
        )
    sql.insert_events(
        connection,
        cursor,
        postgresql,
        [
            (
                out[n].id,
                "create" if out[n].created else "update",
                rows[n].detail,
                sql_stamp,
                namespace,
                actor,
            )
            for n in [*new, *old]
        ],  # fmt: skip
    )
    return out  # type: ignore[return-value]


def _insert_values(row: Row, memory_id: str, sql_stamp, connection) -> tuple:
    created_at = sql_stamp if row.created_at is None else stamp_value(connection, row.created_at)
    return (
        memory_id, row.scope, row.key_normalized, row.type, row.title, row.content,
        row.tags_json, row.keywords_json, row.source, row.confidence,
        row.sensitivity or _NORMAL, created_at,
    )  # fmt: skip


_NORMAL = Memory._meta.get_field("sensitivity").default


def _live(cursor, postgresql, namespace, rows, which, lock) -> dict[tuple[str, str], tuple]:
    """``{(scope, key): (id, created_at, subject)}`` of the live rows of ``rows[which]``."""
    by_scope: dict[str, list[str]] = {}
    for n in which:
        by_scope.setdefault(rows[n].scope, []).append(rows[n].key_normalized)
    found: dict[tuple[str, str], tuple] = {}
    for scope, keys in sorted(by_scope.items()):
        for key, memory_id, created_at, row_subject in sql.live_rows(
            cursor, postgresql, namespace, scope, keys, lock=lock
        ):
            found[(scope, key)] = (memory_id, created_at, row_subject)
    return found
