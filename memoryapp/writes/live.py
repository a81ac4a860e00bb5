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

from memoryapp import conf
from memoryapp.db import upsert as sql
from memoryapp.db import vendor
from memoryapp.models import Memory, new_id
from memoryapp.recall.core import vectors

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
    embedding_model: str | None = None
    """Set by :func:`upsert_rows` (with ``embedding``) from the configured embedder."""
    embedding: bytes | None = None


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
    call = _Call(
        cursor, connection, vendor.for_connection(connection).bulk_copy, namespace, subject,
        stamp_value(connection, stamp),
    )  # fmt: skip
    rows = _embedded(rows)
    found = _live(call, rows, range(len(rows)), lock)
    new = [n for n, r in enumerate(rows) if (r.scope, r.key_normalized) not in found]
    ids = _insert_phase(call, rows, new, found)
    out: list[Written | None] = [None] * len(rows)
    for n, memory_id in ids.items():
        out[n] = Written(memory_id, True, rows[n].created_at or stamp, subject)
    old = [n for n in range(len(rows)) if out[n] is None]
    for n in old:
        memory_id, created_at, row_subject = found[(rows[n].scope, rows[n].key_normalized)]
        out[n] = Written(memory_id, False, created_at, row_subject if subject is None else subject)
    _update_phase(call, [(rows[n], out[n].id) for n in old])  # type: ignore[union-attr]
    events = [(n, "create") for n in ids] + [(n, "update") for n in old]
    sql.insert_events(
        connection,
        cursor,
        call.postgresql,
        [(out[n].id, kind, rows[n].detail, call.stamp, namespace, actor) for n, kind in events],  # type: ignore[union-attr]
    )
    return out  # type: ignore[return-value]


class _Call(NamedTuple):
    """What every phase of one :func:`upsert_rows` call shares."""

    cursor: Any
    connection: Any
    postgresql: bool
    namespace: str
    subject: str | None
    stamp: Any
    """The write's stamp as the database stores it."""


def _insert_phase(call: _Call, rows: Sequence[Row], new: list[int], found: dict) -> dict[int, str]:
    """Insert ``rows[new]``; ``{row: id}`` of those that went in, in row order.

    A row that lost its key to a concurrent writer is added to ``found`` (it is
    updated instead); a row whose id was taken raises :class:`IdTaken`.
    """
    ids = {n: rows[n].id or new_id() for n in new}
    inserted = sql.insert(
        call.cursor,
        call.postgresql,
        [_insert_values(rows[n], ids[n], call) for n in new],
        (call.namespace, call.subject, call.stamp),
    )
    if inserted is None:
        return ids
    lost = [n for n in new if ids[n] not in inserted]
    found.update(_live(call, rows, lost, True))
    taken = [n for n in lost if (rows[n].scope, rows[n].key_normalized) not in found]
    if taken:
        raise IdTaken(taken)
    return {n: memory_id for n, memory_id in ids.items() if memory_id in inserted}


def _update_phase(call: _Call, updates: list[tuple[Row, str]]) -> None:
    """Update the live rows found, in place (``(row, its id)`` pairs)."""
    if not updates:
        return
    values = [
        (r.type, r.title, r.content, r.tags_json, r.keywords_json, r.source, r.confidence,
         r.embedding_model, r.embedding, r.sensitivity, memory_id)
        for r, memory_id in updates
    ]  # fmt: skip
    sql.update(
        call.cursor,
        call.postgresql,
        values,
        namespace=call.namespace,
        subject=call.subject,
        stamp=call.stamp,
    )


def _embedded(rows: Sequence[Row]) -> Sequence[Row]:
    """``rows`` with their int8 vectors and model id; as given with embeddings off (NULL).

    One batch for the whole call: an import embeds its thousands of rows in one pass
    of the tokenizer (memoryapp.recall.core.embedding), not one call per row.
    """
    embedder = conf.embedder()
    if embedder is None or not rows:
        return rows
    blobs = vectors.embed_or_none(embedder, [vectors.text_of(r.title, r.content) for r in rows])
    model = embedder.model_id
    return [
        r._replace(embedding_model=None if blob is None else model, embedding=blob)
        for r, blob in zip(rows, blobs, strict=True)
    ]


def _insert_values(row: Row, memory_id: str, call: _Call) -> tuple:
    created_at = (
        call.stamp if row.created_at is None else stamp_value(call.connection, row.created_at)
    )
    return (
        memory_id, row.scope, row.key_normalized, row.type, row.title, row.content,
        row.tags_json, row.keywords_json, row.source, row.confidence,
        row.sensitivity or _NORMAL, row.embedding_model, row.embedding, created_at,
    )  # fmt: skip


_NORMAL = Memory._meta.get_field("sensitivity").default


def _live(call: _Call, rows, which, lock) -> dict[tuple[str, str], tuple]:
    """``{(scope, key): (id, created_at, subject)}`` of the live rows of ``rows[which]``."""
    by_scope: dict[str, list[str]] = {}
    for n in which:
        by_scope.setdefault(rows[n].scope, []).append(rows[n].key_normalized)
    found: dict[tuple[str, str], tuple] = {}
    for scope, keys in sorted(by_scope.items()):
        for key, memory_id, created_at, row_subject in sql.live_rows(
            call.cursor, call.postgresql, call.namespace, scope, keys, lock=lock
        ):
            found[(scope, key)] = (memory_id, created_at, row_subject)
    return found
