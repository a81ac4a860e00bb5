"""Stored rows as recall index records: parsing the columns, the fingerprint, streamed reads."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import connections
from django.utils.dateparse import parse_datetime

from memoryapp import conf
from memoryapp.db import vendor
from memoryapp.models import Confidence, Memory, json_list
from memoryapp.recall.core import vectors
from memoryapp.recall.core.scoring import IndexRecord

__all__ = ["live_records", "record_of", "row_fingerprint", "slice_rows", "to_record"]

_FIELDS = ("id", "title", "content", "tags_json", "keywords_json", "updated_at", "confidence")
_VECTOR_FIELDS = ("embedding", "embedding_model")  # read only while embeddings are on
_FETCH = 2000  # rows per fetch while streaming a build
_IN_CHUNK = 500  # ids per "IN (...)" list, well under every vendor's parameter limit
_EXPLICIT = str(Confidence.EXPLICIT_USER)
_STAMP = Memory._meta.get_field("updated_at")


def to_record(
    memory_id: str,
    title: str,
    content: str,
    tags_json: str,
    keywords_json: str,
    updated_at: object,
    confidence: str,
    *,
    tags: tuple[str, ...] | None = None,
) -> IndexRecord:
    """An :class:`IndexRecord` from the stored columns.

    ``updated_at`` is a datetime or a timestamp column's text (see
    :func:`column_timestamp`); ``tags``, when given, is ``tags_json`` already parsed.
    """
    stamp = column_timestamp(updated_at)
    return IndexRecord(
        id=memory_id,
        title=title,
        content=content,
        tags=_json_tuple(tags_json) if tags is None else tags,
        keywords=_json_tuple(keywords_json),
        updated_at=stamp,
        explicit=str(confidence) == _EXPLICIT,
        fingerprint=row_fingerprint(title, content, tags_json, keywords_json, confidence, stamp),
    )


def row_fingerprint(
    title: str, content: str, tags_json: str, keywords_json: str, confidence: str, stamp: float
) -> int:
    """What a delta compares to tell a re-read row from the indexed one.

    Every column the index reads, not ``updated_at`` alone: a writer with one-second
    stamps (Agentao) or raw SQL can change a row without moving it. A keyed-free
    BLAKE2b digest rather than ``hash()``: snapshots carry fingerprints from one
    process to another, and ``hash()`` of a string differs between processes.
    Each column is length-prefixed, so no two different rows join to the same text.
    """
    # str(): a TextChoices member's str() is its value, as the column's text is.
    parts = (title, content, tags_json, keywords_json, str(confidence), repr(float(stamp)))
    text = "".join(f"{len(part)}:{part}" for part in parts)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def record_of(memory: Memory) -> IndexRecord:
    """An :class:`IndexRecord` from a model instance (with its vector, embeddings on)."""
    record = to_record(
        memory.id,
        memory.title,
        memory.content,
        memory.tags_json,
        memory.keywords_json,
        memory.updated_at,
        memory.confidence,
    )
    embedder = conf.embedder()
    if embedder is None:
        return record
    (found,) = with_vectors(embedder, [(record, memory.embedding, memory.embedding_model)])
    return found


def with_vectors(embedder, rows: list[tuple[IndexRecord, Any, Any]]) -> list[IndexRecord]:
    """The records of ``(record, stored embedding, its model)`` with their vectors.

    A stored vector of the current model is used as it is; a missing one, or one of
    another model, is computed now from the record's text, all of them in one batch
    (the lazy re-embedding of a model change; ``memory reembed`` stores them).
    """
    model = embedder.model_id
    stale = [n for n, (_, blob, made_by) in enumerate(rows) if not blob or made_by != model]
    fresh: dict[int, bytes | None] = {}
    if stale:
        texts = [vectors.text_of(rows[n][0].title, rows[n][0].content) for n in stale]
        fresh = dict(zip(stale, vectors.embed_or_none(embedder, texts), strict=True))
    return [
        dataclasses.replace(record, vector=fresh[n] if n in fresh else bytes(blob))
        for n, (record, blob, _) in enumerate(rows)
    ]


def _timestamp(value: dt.datetime) -> float:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def column_timestamp(value: object) -> float:
    """POSIX seconds of a timestamp column read without Django's converters.

    SQLite hands back text (ours: ISO with ``T``, naive UTC; other writers may add an
    offset or use a space), PostgreSQL an aware ``datetime``.
    """
    if isinstance(value, dt.datetime):
        return _timestamp(value)
    if isinstance(value, str):
        try:
            return _timestamp(dt.datetime.fromisoformat(value))
        except ValueError:
            parsed = parse_datetime(value)
            if parsed is not None:
                return _timestamp(parsed)
    return 0.0


def _json_tuple(text: Any) -> tuple[str, ...]:
    """A ``*_json`` column as a tuple, as :func:`~memoryapp.models.json_list` reads it."""
    try:
        value = json.loads(text)  # the hot path: our own writers store lists of strings
    except (TypeError, ValueError):
        return ()
    if type(value) is list:
        try:
            "".join(value)  # a C-speed check that every item is a string
        except TypeError:
            pass
        else:
            return tuple(value)
    return tuple(json_list(text))  # anything else: the model's lenient reading


def live_records(
    using: str, namespace: str, scope: str, ids: Iterable[str] | None = None
) -> Iterator[IndexRecord]:
    """Stream the live rows of one slice (or of ``ids`` within it) as index records.

    Args:
        using: The database alias.
        namespace: The namespace.
        scope: ``user`` or ``project``.
        ids: Only these ids (None: the whole slice).
    """
    for record, _ in slice_rows(using, namespace, scope, ids=ids, live=True):
        yield record


def slice_rows(
    using: str,
    namespace: str,
    scope: str,
    *,
    since: dt.datetime | None = None,
    ids: Iterable[str] | None = None,
    live: bool = False,
) -> Iterator[tuple[IndexRecord, bool]]:
    """``(record, soft-deleted?)`` of one slice's rows: all, those updated at or after
    ``since``, or ``ids``; with ``live``, only the live ones.

    Plain SQL on a chunked (server-side on PostgreSQL) cursor: the ORM's per-row
    converters and model machinery cost about as much as tokenising, and a build
    should never hold every row at once. Tag lists repeat across rows, so each
    distinct ``tags_json`` text is parsed once.
    """
    connection = connections[using]
    embedder = conf.embedder()
    columns = ", ".join((*_FIELDS, *(_VECTOR_FIELDS if embedder else ()), "deleted_at"))
    live_only = " AND deleted_at IS NULL" if live else ""
    base = f"SELECT {columns} FROM memories WHERE namespace = %s AND scope = %s{live_only}"
    if ids is not None:
        # Looked up by primary key, the namespace checked beside (Vendor.namespace_beside_ids).
        beside = vendor.for_connection(connection).namespace_beside_ids
        wanted = list(ids)
        statements = [
            (
                f"SELECT {columns} FROM memories WHERE id IN ({', '.join(['%s'] * len(chunk))})"
                f" AND {beside} AND scope = %s{live_only}",
                [*chunk, namespace, scope],
            )
            for chunk in (wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK))
        ]
    elif since is not None:
        stamp = _STAMP.get_db_prep_value(since, connection)
        statements = [(base + " AND updated_at >= %s", [namespace, scope, stamp])]
    else:
        statements = [(base, [namespace, scope])]
    tags_of: dict[str, tuple[str, ...]] = {}
    for sql, params in statements:
        with connection.chunked_cursor() as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(_FETCH):
                records = []
                for row in rows:
                    tags_json = row[3]
                    tags = tags_of.get(tags_json)
                    if tags is None:
                        tags = tags_of[tags_json] = _json_tuple(tags_json)
                    records.append(to_record(*row[:7], tags=tags))
                if embedder is not None:
                    records = with_vectors(
                        embedder, [(r, *row[7:9]) for r, row in zip(records, rows, strict=True)]
                    )
                for record, row in zip(records, rows, strict=True):
                    yield record, row[-1] is not None
