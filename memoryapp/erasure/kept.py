"""Which fragments the byte scan found are explained by rows the erasure kept.

A fragment of an erased value still present in the database files fails the
verification, unless a row that was kept holds the very same bytes (another
user saved the same sentence). The check reads the kept rows' text columns
once, in primary-key chunks, and tests every found fragment against each chunk
at once (:class:`memoryapp.db.finder.Finder`): its cost is one pass over the
kept text, whatever the number of fragments — never a query per fragment.

It is byte-exact and case-sensitive: a fragment is explained only when the
UTF-8 encoding of one column value of one kept row contains it. (SQLite's
``LIKE`` ignores ASCII case, and a fragment cut in the middle of a character
does not decode to the same text, so neither a ``__contains`` filter nor a
decoded comparison would do.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.db import connections
from django.db.models import Model

from ..db import partitioning
from ..db.finder import Finder
from .selection import MEMORIES, REVIEW, ROW_MODELS, SUMMARIES, admin_log_available

KEPT_COLUMNS = {
    MEMORIES: ("title", "content", "key_normalized", "tags_json", "keywords_json"),
    SUMMARIES: ("summary_text",),
    REVIEW: ("title", "content", "evidence", "key_normalized", "tags_json"),
}
"""The text columns of each content table whose values may explain a fragment."""

CHUNK_ROWS = 500  # rows per query: bounded memory, no transaction held open between chunks

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
        finder.search(SEPARATOR.join(_encode(v) for v in values), hits)
        if len(hits) == len(candidates):
            break
    return {candidates[j] for j in hits}


def _kept_values(alias: str, first: Sequence[str] = ()) -> Iterator[list[str]]:
    """The text values of every kept row, one list per chunk of rows (``first``'s first)."""
    with connections[alias].cursor() as cursor:
        for leaf in first:
            columns = KEPT_COLUMNS.get(partitioning.table_of(leaf) or "")
            if columns:
                for rows in partitioning.leaf_rows(cursor, leaf, columns, CHUNK_ROWS):
                    yield [v for row in rows for v in row[2:] if isinstance(v, str) and v]
    for model, columns in _sources(alias):
        queryset = model._base_manager.using(alias).order_by("pk")  # soft-deleted rows too
        for rows in _chunks(queryset, columns):
            yield [v for row in rows for v in row[1:] if isinstance(v, str) and v]


def _sources(alias: str) -> Iterator[tuple[type[Model], tuple[str, ...]]]:
    """Each model with its text columns; lazily, so an early stop skips the rest."""
    for table, model in ROW_MODELS.items():
        yield model, KEPT_COLUMNS[table]
    if admin_log_available(alias):
        from django.contrib.admin.models import LogEntry

        yield LogEntry, ("object_repr",)  # the admin history copies titles


def _chunks(queryset, columns: Sequence[str]) -> Iterator[list[tuple]]:
    """``(pk, *columns)`` rows in primary-key order, ``CHUNK_ROWS`` per query.

    Keyset pagination (``pk > last``) rather than OFFSET, so each query costs
    its chunk only; rows written meanwhile by others are read or not, which is
    harmless: a row that holds a fragment explains it whenever it was written.
    """
    last = None
    while True:
        qs = queryset if last is None else queryset.filter(pk__gt=last)
        rows = list(qs.values_list("pk", *columns)[:CHUNK_ROWS])
        if rows:
            yield rows
        if len(rows) < CHUNK_ROWS:
            return
        last = rows[-1][0]


def _encode(value: str) -> bytes:
    # The bytes both vendors store for text. surrogatepass: a value that could
    # not be stored as UTF-8 must not stop the verification (it explains nothing).
    return value.encode("utf-8", "surrogatepass")
