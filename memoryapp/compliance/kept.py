"""Which fragments the byte scan found are explained by rows the erasure kept.

A fragment of an erased value still present in the database files fails the
verification, unless a row that was kept holds the very same bytes: another
user saved the same sentence, or an erased summary's text is another person's
key (``acme/colleague``), stored as a kept row's ``subject``, ``namespace`` or
session id. *Any* column of a kept row explains: content, keys, titles, tags,
ids, the namespace and subject columns, audit events, review items, the slice
counters, the admin history (issue #38: explaining by content columns only
failed such an erasure at every attempt and climbed to whole-table rewrites).

The check costs what was found and what the byte scan read, never the database:

1. *Indexed lookups*: a fragment equal to a whole value of an indexed text
   column of the memory's tables (ids, namespace, subject, memory ids of
   events…; :data:`KEYED_TABLES`) is looked up by
   that index, all fragments of a batch in one ``IN`` query per column, in
   every partition. Keys are short, so they are probed whole: this is how the
   false residue of issue #38 is explained.
2. *A bounded pass* over the rows of the relations the byte scan read — every
   text column of each, in primary-key chunks, every remaining fragment tested
   against each chunk at once (:class:`memoryapp.db.finder.Finder`). On
   PostgreSQL those are the partitions that held the erased rows (the found
   bytes are in their files, so a row that put them there is a row of theirs).
   SQLite's scan reads the one file; the pass reads the tables that own the values
   an erasure removes (:data:`OWNING_TABLES`: the memory tables, their events, the
   slice counters and snapshots, the admin history), not every table of the file
   (the receipts, records, accounts and sessions of a back office; issue #39,
   bench/kept_bound.py and bench/ERASURE_VERIFY.md).
   Rows the pass does not read are not read (beyond step 1): a fragment only
   such a row holds stays unexplained, which over-reports, never hides, residue.

It is byte-exact and case-sensitive: a fragment is explained only when the
UTF-8 encoding of one column value of one kept row contains it, or one id or
token of a kept recall snapshot does. (Snapshots are stored uncompressed, so the
scan reads their tokens — lower-cased words of memory text — and a kept tenant's
snapshot may hold a word that none of its rows holds in that case. An erased
slice's snapshot is never kept: a trigger deletes it with the slice's rows.) (SQLite's
``LIKE`` ignores ASCII case, and a fragment cut in the middle of a character
does not decode to the same text, so neither a ``__contains`` filter nor a
decoded comparison would do; step 1 compares whole values with ``=``, exact
on both vendors, and only fragments that are whole UTF-8 text.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from django.apps import apps
from django.db import connections, router
from django.db.models import Model

from memoryapp.compliance.selection import (
    ADMIN_LOG,
    CONTENT_TABLES,
    ROW_MODELS,
    SLICES,
    SNAPSHOTS,
    batches,
)
from memoryapp.db import partitioning
from memoryapp.db.vendor import for_connection

CHUNK_ROWS = 500  # rows per query: bounded memory, no transaction held open between chunks
SNAPSHOT_CHUNK_ROWS = 16  # a snapshot is ~165 KB per 1,000 memories (20 MB at 100,000)
LOOKUP_MAX_BYTES = 255  # longer fragments cannot equal a whole key (CharField(255))

KEYED_TABLES = frozenset({*partitioning.TABLES, SLICES})
"""The tables whose indexed keys are looked up (step 1): those of the memory, where other
people's keys, namespaces and session ids are. Other tables are read by the pass only."""

OWNING_TABLES = frozenset({*CONTENT_TABLES, ADMIN_LOG, SLICES, SNAPSHOTS})
"""The tables whose rows hold the values an erasure removes, and the copies of them its
triggers keep: where a kept row may hold the same bytes as an erased one. The pass over a
whole file (SQLite) reads these, not every table of it."""

TEXT_TYPES = frozenset({"CharField", "TextField", "JSONField", "SlugField", "EmailField"})
"""The column types whose stored bytes are text a fragment may be found in."""

# Values are joined with NUL, which no stored text contains (validation refuses
# it; PostgreSQL text cannot hold it): a fragment without NUL can then only
# match inside one value, never across two.
SEPARATOR = b"\x00"


def explained(
    alias: str,
    pieces: Sequence[bytes],
    scanned: Sequence[str] = (),
    *,
    every_table: bool = False,
) -> set[int]:
    """The indexes of ``pieces`` that occur byte-exactly in a value of a kept row.

    ``scanned`` names the relations the byte scan read (PostgreSQL partitions
    or tables): the pass reads their rows only. Empty, or on SQLite (whose scan
    reads the whole file): the rows of :data:`OWNING_TABLES` (``every_table``:
    of every table, the unbounded pass bench/kept_bound.py compares with). Stops
    as soon as every piece is explained. Pieces shorter than 8 bytes or containing
    NUL are never explained (no stored text could be told apart from them, or hold
    them).
    """
    candidates = [i for i, p in enumerate(pieces) if len(p) >= 8 and SEPARATOR not in p]
    if not candidates:
        return set()
    models = _scope(alias, scanned, every_table=every_table)
    hits = _by_index(alias, models, {i: pieces[i] for i in candidates})
    rest = [i for i in candidates if i not in hits]
    if rest:
        from memoryapp.db.finder import Finder  # numpy: imported once something is left

        finder = Finder([pieces[i] for i in rest])
        found: set[int] = set()
        for values in _kept_values(alias, models, scanned):
            finder.search(SEPARATOR.join(values), found)
            if len(found) == len(rest):
                break
        hits |= {rest[j] for j in found}
    return hits


# ------------------------------------------------------------ 1. indexed lookups
def _by_index(alias: str, models: list[type[Model]], pieces: dict[int, bytes]) -> set[int]:
    """The pieces equal to a whole value of an indexed text column of a kept row."""
    wanted: dict[str, list[int]] = {}
    for i, piece in pieces.items():
        if len(piece) > LOOKUP_MAX_BYTES:
            continue
        try:
            wanted.setdefault(piece.decode("utf-8"), []).append(i)
        except UnicodeDecodeError:  # cut inside a character: no whole value is these bytes
            continue
    hits: set[int] = set()
    for model in models:
        if model._meta.db_table not in KEYED_TABLES:
            continue
        for column in _indexed_columns(model, alias):
            if not wanted:
                return hits
            for batch in batches(list(wanted)):
                qs = model._base_manager.using(alias).filter(**{f"{column}__in": batch})
                for value in qs.order_by().values_list(column, flat=True).distinct():
                    hits.update(wanted.pop(value, ()))
    return hits


def _indexed_columns(model: type[Model], alias: str) -> list[str]:
    """The text columns an index of ``model`` starts with (a lookup by ``=`` uses it)."""
    meta = model._meta
    leading = {meta.pk.name} if meta.pk else set()
    leading |= {f.name for f in meta.concrete_fields if getattr(f, "db_index", False) or f.unique}
    for index in meta.indexes:
        if index.fields:
            leading.add(index.fields[0].lstrip("-"))
    for constraint in meta.constraints:
        fields = getattr(constraint, "fields", ())
        if fields:
            leading.add(fields[0])
    if meta.db_table in partitioning.TABLES and _partitioned(alias):
        leading.add(partitioning.KEY)  # the primary key is (namespace, id)
    return [
        f.name
        for f in meta.concrete_fields
        if f.name in leading and f.get_internal_type() in ("CharField", "TextField")
    ]


# ------------------------------------------------------------ 2. the bounded pass
def _kept_values(
    alias: str, models: list[type[Model]], scanned: Sequence[str]
) -> Iterator[list[bytes]]:
    """The text values of the kept rows the pass reads, one list per chunk of rows."""
    by_table = {m._meta.db_table: m for m in models}
    if _whole_file(alias, scanned):
        for model in by_table.values():
            yield from _model_values(alias, model)
        return
    with connections[alias].cursor() as cursor:
        for relation in dict.fromkeys(scanned):
            table = partitioning.table_of(relation)
            if table and table in by_table:
                yield from _leaf_values(cursor, relation, by_table[table])
    for relation in dict.fromkeys(scanned):  # unpartitioned tables the scan read
        if not partitioning.table_of(relation) and relation in by_table:
            yield from _model_values(alias, by_table[relation])


def _leaf_values(cursor, leaf: str, model: type[Model]) -> Iterator[list[bytes]]:
    """One partition's text values, chunk by chunk (rows are ``(namespace, id, *columns)``)."""
    skip = {partitioning.KEY, "id"}
    columns = [f.column for f in _text_fields(model) if f.column not in skip]
    if model._meta.db_table == SNAPSHOTS:
        rows_of = partitioning.leaf_rows(cursor, leaf, [*columns, "payload"], SNAPSHOT_CHUNK_ROWS)
        for rows in rows_of:
            yield [*_texts(rows, end=-1), *_snapshot_strings(rows)]
        return
    for rows in partitioning.leaf_rows(cursor, leaf, columns, CHUNK_ROWS):
        yield _texts(rows)


def _model_values(alias: str, model: type[Model]) -> Iterator[list[bytes]]:
    """One model's text values, chunk by chunk (rows are ``(pk, *columns)``)."""
    queryset = model._base_manager.using(alias).order_by("pk")  # soft-deleted rows too
    names = [f.attname for f in _text_fields(model)]
    if model._meta.db_table == SNAPSHOTS:
        for rows in _chunks(queryset, [*names, "payload"], SNAPSHOT_CHUNK_ROWS):
            yield [*_texts(rows, end=-1), *_snapshot_strings(rows)]
        return
    for rows in _chunks(queryset, names, CHUNK_ROWS):
        yield _texts(rows)


def _text_fields(model: type[Model]) -> list:
    return [f for f in model._meta.concrete_fields if f.get_internal_type() in TEXT_TYPES]


def _texts(rows: list[tuple], end: int | None = None) -> list[bytes]:
    """The non-empty text values of ``rows`` (all columns, or up to ``end``), as stored."""
    out: list[bytes] = []
    for row in rows:
        for value in row[:end]:
            out.extend(_strings(value))
    return out


def _strings(value) -> list[bytes]:
    """A column value's text: a string, or a JSON value's text and the strings in it."""
    if isinstance(value, str):
        return [_encode(value)] if value else []
    if isinstance(value, (list, dict)):
        found = [_encode(json.dumps(value)), _encode(json.dumps(value, ensure_ascii=False))]
        items = value.values() if isinstance(value, dict) else value
        keys = list(value) if isinstance(value, dict) else []
        for item in [*keys, *items]:
            found.extend(_strings(item))
        return found
    return []


def _snapshot_strings(rows: list[tuple]) -> list[bytes]:
    """The strings held in each recall snapshot payload (the rows' last column)."""
    from memoryapp.recall.core import snapshot as recall_snapshot

    return [recall_snapshot.strings(bytes(row[-1])) for row in rows if row[-1]]


def _whole_file(alias: str, scanned: Sequence[str]) -> bool:
    """Whether the byte scan read every table's bytes (SQLite's one file: the vendor
    that does not partition), or no relations were named: then every table's rows are
    read."""
    return not scanned or not _partitioned(alias)


def _partitioned(alias: str) -> bool:
    return for_connection(connections[alias]).partitions_by_namespace


def _scope(alias: str, scanned: Sequence[str], *, every_table: bool = False) -> list[type[Model]]:
    """The models whose rows may hold what the scan found: those of the relations it
    read (when it read the whole file: those of :data:`OWNING_TABLES`, or with
    ``every_table`` every model stored on ``alias``), the content tables first (they
    most often hold a fragment, and the check stops once all are explained)."""
    content = list(ROW_MODELS.values())
    others = [m for m in apps.get_models() if m not in content and not m._meta.proxy]
    existing = set(connections[alias].introspection.table_names())
    if not _whole_file(alias, scanned):
        existing &= {partitioning.table_of(t) or t for t in scanned}
    elif not every_table:
        existing &= OWNING_TABLES
    return [
        m
        for m in [*content, *others]
        if m._meta.db_table in existing and router.allow_migrate_model(alias, m)
    ]


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
