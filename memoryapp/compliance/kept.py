"""Which fragments the byte scan found are explained by rows the erasure kept.

A fragment of an erased value still present in the database files fails the
verification, unless a row that was kept holds the very same bytes (another
user saved the same sentence). The check reads the kept rows' text columns
once, in primary-key chunks, and tests every found fragment against each chunk
at once (:class:`memoryapp.db.finder.Finder`): its cost is one pass over the
kept text, whatever the number of fragments — never a query per fragment.

It is byte-exact and case-sensitive: a fragment is explained only when the
UTF-8 encoding of one column value of one kept row contains it, or one id or
token of a kept recall snapshot does. (Snapshots are stored uncompressed, so the
scan reads their tokens — lower-cased words of memory text — and a kept tenant's
snapshot may hold a word that none of its rows holds in that case. An erased
slice's snapshot is never kept: a trigger deletes it with the slice's rows.) (SQLite's
``LIKE`` ignores ASCII case, and a fragment cut in the middle of a character
does not decode to the same text, so neither a ``__contains`` filter nor a
decoded comparison would do.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.db import connections
from django.db.models import Model

from memoryapp.compliance.selection import (
    MEMORIES,
    REVIEW,
    ROW_MODELS,
    SNAPSHOTS,
    SUMMARIES,
    admin_log_available,
)
from memoryapp.db import partitioning
from memoryapp.db.finder import Finder
from memoryapp.models import RecallSnapshot
from memoryapp.recall import snapshot as recall_snapshot

KEPT_COLUMNS = {
    MEMORIES: ("title", "content", "key_normalized", "tags_json", "keywords_json"),
    SUMMARIES: ("summary_text",),
    REVIEW: ("title", "content", "evidence", "key_normalized", "tags_json"),
}
"""The text columns of each content table whose values may explain a fragment."""

CHUNK_ROWS = 500  # rows per query: bounded memory, no transaction held open between chunks
SNAPSHOT_CHUNK_ROWS = 16  # a snapshot is ~165 KB per 1,000 memories (20 MB at 100,000)

# Values are joined with NUL, which no stored text contains (validation refuses
# it; PostgreSQL text cannot hold it): a fragment without NUL can then only
# match inside one value, never across two.
SEPARATOR = b"\x00"


def explained(alias: str, pieces: Sequence[bytes], first: Sequence[str] = ()) -> set[int]:
    """The indexes of ``pieces`` that occur byte-exactly in a text value of a kept row.

    Stops reading as soon as every piece is explained. Pieces shorter than
    8 bytes or containing NUL are never explained (no stored text could be
    told apart from them, or hold them). ``first`` names partitions (the ones
    the byte scan read, where the found bytes are) to read before the rest: a
    fragment is most often explained by a row stored beside it, so the pass
    usually ends within them and costs what the erasure touched, not the
    database; rows anywhere else still explain what those do not.
    """
    candidates = [i for i, p in enumerate(pieces) if len(p) >= 8 and SEPARATOR not in p]
    if not candidates:
        return set()
    finder = Finder([pieces[i] for i in candidates])
    hits: set[int] = set()
    for values in _kept_values(alias, first):
        finder.search(SEPARATOR.join(values), hits)
        if len(hits) == len(candidates):
            break
    return {candidates[j] for j in hits}


def _kept_values(alias: str, first: Sequence[str] = ()) -> Iterator[list[bytes]]:
    """The text values of every kept row, one list per chunk of rows (``first``'s first)."""
    with connections[alias].cursor() as cursor:
        for leaf in first:
            yield from _leaf_values(cursor, leaf)
    for model, columns in _sources(alias):
        yield from _model_values(alias, model, columns)


def _leaf_values(cursor, leaf: str) -> Iterator[list[bytes]]:
    """One partition's text values, chunk by chunk (rows are ``(namespace, id, *columns)``)."""
    table = partitioning.table_of(leaf) or ""
    if table == SNAPSHOTS:
        for rows in partitioning.leaf_rows(cursor, leaf, ("payload",), SNAPSHOT_CHUNK_ROWS):
            yield _snapshot_strings(rows, 2)
        return
    columns = KEPT_COLUMNS.get(table)
    if columns:
        for rows in partitioning.leaf_rows(cursor, leaf, columns, CHUNK_ROWS):
            yield _texts(rows, 2)


def _model_values(alias: str, model: type[Model], columns) -> Iterator[list[bytes]]:
    """One model's text values, chunk by chunk (rows are ``(pk, *columns)``)."""
    queryset = model._base_manager.using(alias).order_by("pk")  # soft-deleted rows too
    if model is RecallSnapshot:
        for rows in _chunks(queryset, columns, SNAPSHOT_CHUNK_ROWS):
            yield _snapshot_strings(rows, 1)
        return
    for rows in _chunks(queryset, columns, CHUNK_ROWS):
        yield _texts(rows, 1)


def _texts(rows: list[tuple], start: int) -> list[bytes]:
    """The non-empty text values of ``rows`` from column ``start`` on, as stored."""
    return [_encode(v) for row in rows for v in row[start:] if isinstance(v, str) and v]


def _snapshot_strings(rows: list[tuple], at: int) -> list[bytes]:
    """The strings held in each recall snapshot payload at column ``at``."""
    return [recall_snapshot.strings(bytes(row[at])) for row in rows if row[at]]


def _sources(alias: str) -> Iterator[tuple[type[Model], tuple[str, ...]]]:
    """Each model with its text columns; lazily, so an early stop skips the rest."""
    for table, model in ROW_MODELS.items():
        yield model, KEPT_COLUMNS[table]
    yield RecallSnapshot, ("payload",)  # their ids and tokens (recall_snapshot.strings)
    if admin_log_available(alias):
        from django.contrib.admin.models import LogEntry

        yield LogEntry, ("object_repr",)  # the admin history copies titles


def _chunks(queryset, columns: Sequence[str], size: int) -> Iterator[list[tuple]]:
    """``(pk, *columns)`` rows in primary-key order, ``size`` per query.

    Keyset pagination (``pk > last``) rather than OFFSET, so each query costs
    its chunk only; rows written meanwhile by others are read or not, which is
    harmless: a row that holds a fragment explains it whenever it was written.
    """
    last = None
    while True:
        qs = queryset if last is None else queryset.filter(pk__gt=last)
        rows = list(qs.values_list("pk", *columns)[:size])
        if rows:
            yield rows
        if len(rows) < size:
            return
        last = rows[-1][0]


def _encode(value: str) -> bytes:
    # The bytes both vendors store for text. surrogatepass: a value that could
    # not be stored as UTF-8 must not stop the verification (it explains nothing).
    return value.encode("utf-8", "surrogatepass")
