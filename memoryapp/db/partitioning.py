"""Hash partitioning of the personal-data tables by namespace (PostgreSQL).

Why: an erasure must rewrite what held the erased rows (a lazy ``VACUUM``
leaves their bytes in the pages, docs/compliance.md §3), and a rewrite costs
what it copies. With one table for every tenant, erasing 1,000 rows of a
10,000,000-row database rewrote and then byte-scanned all of it (minutes,
bench/ERASURE.md). Partitioned by ``HASH (namespace)`` into :data:`PARTITIONS`
leaves, a namespace's rows — a user's too: its user-scope rows live in the
user's namespace — sit in one leaf, so the purge rewrites and the byte scan
reads only the leaves that held the erased rows.

The same modulus is used for every table in :data:`TABLES`, so a namespace's
rows are in the leaves of the same number in each of them (``memories_p17``,
``memory_events_p17`` …): the leaves of an erasure's rows name the leaves of
the recall snapshots a trigger deleted with them.

What partitioning changes in the schema, and why the model does not say so:
PostgreSQL requires the partition key in every unique constraint, so the
primary key is ``(namespace, id)``, and an index on ``id`` serves the lookups
by id (Django's ``…_like`` index of a text id, or :func:`id_index`). Django's
models keep ``id`` as their primary key: ids are random (an identity for
events), the app never writes a row whose namespace changes, and every query
by ``pk`` reads the same. SQLite keeps the plain tables (one file is purged page by page).

The conversion (:func:`partition_table`; migration 0008 holds a frozen copy) copies each
table once into its partitioned form and recreates its indexes, constraints
and triggers from the catalog; :func:`unpartition_table` undoes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

PARTITIONS = 64
"""Leaves per partitioned table. A purge rewrites ~1/64 of a table per namespace
erased (bench/ERASURE.md measures one leaf of a 10,000,000-row table)."""

TABLES = (
    "memories",
    "memory_events",
    "session_summaries",
    "memory_review_queue",
    "memory_recall_snapshots",
)
"""Every table whose rows hold a namespace's personal data and grow with it."""

KEY = "namespace"
_LEAF = re.compile(r"^(?P<table>.+)_p(?P<remainder>\d{2,})$")


def leaf_name(table: str, remainder: int) -> str:
    """The leaf of ``table`` holding hash remainder ``remainder``."""
    return f"{table}_p{remainder:02d}"


def remainder_of(leaf: str) -> int | None:
    """The hash remainder a leaf's name carries (None for a table that is no leaf)."""
    match = _LEAF.match(leaf)
    if match is None or match["table"] not in TABLES:
        return None
    return int(match["remainder"])


def id_index(table: str) -> str:
    """The plain index on ``id`` a partitioned table gets for lookups by id."""
    return f"ix_{table}_id"


def claim_id(cursor, table: str, value: str) -> bool:
    """Whether no row of ``table`` has id ``value``, that id held for this transaction.

    The primary key of a partitioned table is ``(namespace, id)``: it no longer
    refuses an id that a row of another namespace has. The app draws its own
    ids at random; a writer that brings its own (Agentao's 8 hex digits, chosen
    per file) calls this first, inside its transaction: a transaction-scoped
    advisory lock on the id makes a concurrent claim of the same id wait until
    this one commits, and then see its row.
    """
    cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{table}:{value}"])
    cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {_quote(table)} WHERE id = %s)", [value])
    return not cursor.fetchone()[0]


# ------------------------------------------------------------------ the schema
def is_partitioned(cursor, table: str) -> bool:
    """Whether ``table`` is a partitioned table here (relkind ``p``)."""
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [table])
    row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def leaves(cursor, table: str) -> list[str]:
    """The leaf tables of a partitioned ``table``, in remainder order."""
    cursor.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree(%s::regclass) "
        "WHERE isleaf ORDER BY relid::regclass::text",
        [table],
    )
    return [row[0] for row in cursor.fetchall()]


def storage_tables(
    cursor, tables: Iterable[str], remainders: Sequence[int] | None
) -> tuple[list[str], dict[str, str]]:
    """The tables that hold rows, for the purge and the byte scan of ``tables``.

    A partitioned table becomes its leaves of ``remainders`` (those that held the
    erased rows), or all of its leaves when ``remainders`` is None (an erasure
    recorded before partitioning, or of everything). Returns the list and, per
    partitioned table, a line saying which leaves were chosen (for the receipt).
    """
    out: list[str] = []
    chosen: dict[str, str] = {}
    for table in tables:
        if not is_partitioned(cursor, table):
            out.append(table)
            continue
        everything = leaves(cursor, table)
        if remainders is None:
            picked = everything
        else:
            wanted = {leaf_name(table, r) for r in remainders}
            picked = [leaf for leaf in everything if leaf in wanted]
        out.extend(picked)
        chosen[table] = f"{len(picked)} of {len(everything)} partitions"
    return out, chosen


def remainder_for(cursor, namespace: str, table: str = "memories") -> int | None:
    """The hash remainder (the leaf number) ``namespace`` falls in; None if unpartitioned."""
    if not is_partitioned(cursor, table):
        return None
    modulus = len(leaves(cursor, table))
    cursor.execute(
        "SELECT r FROM generate_series(0, %s - 1) AS r "
        "WHERE satisfies_hash_partition(%s::regclass, %s, r, %s::varchar)",
        [modulus, table, modulus, namespace],
    )
    return int(cursor.fetchone()[0])


def written_relations(cursor, table: str, namespaces: Iterable[str] | None) -> list[str]:
    """What holds ``namespaces``' rows of ``table``: its partitions for them, or the
    table itself when it is not partitioned or ``namespaces`` is None."""
    if namespaces is None or not is_partitioned(cursor, table):
        return [table]
    remainders = {remainder_for(cursor, namespace, table) for namespace in namespaces}
    return [leaf_name(table, r) for r in sorted(r for r in remainders if r is not None)]


def holding_remainders(querysets: Iterable) -> set[int]:
    """The hash remainders of the leaves holding the rows of ``querysets`` (PostgreSQL).

    Read from each row's ``tableoid`` — where the row really is, not where its
    namespace says it should be — so a leaf is named even for a row a raw writer
    moved there. Rows of unpartitioned tables name none.
    """
    from django.db.models.expressions import RawSQL

    found: set[int] = set()
    for qs in querysets:
        rels = (
            qs.annotate(_leaf=RawSQL("tableoid::regclass::text", ()))
            .order_by()
            .values_list("_leaf", flat=True)
            .distinct()
        )
        for rel in rels:
            remainder = remainder_of(str(rel))
            if remainder is not None:
                found.add(remainder)
    return found


def leaf_rows(cursor, leaf: str, columns: Sequence[str], chunk: int) -> Iterable[list[tuple]]:
    """``(namespace, id, *columns)`` rows of one leaf, ``chunk`` per query, in primary-key
    order (keyset pagination on ``(namespace, id)``: each query costs its chunk only)."""
    names = ", ".join(_quote(c) for c in columns)
    base = f"SELECT {KEY}, id, {names} FROM {_quote(leaf)}"
    last: tuple | None = None
    while True:
        if last is None:
            cursor.execute(f"{base} ORDER BY {KEY}, id LIMIT %s", [chunk])
        else:
            cursor.execute(
                f"{base} WHERE ({KEY}, id) > (%s, %s) ORDER BY {KEY}, id LIMIT %s",
                [*last, chunk],
            )
        rows = cursor.fetchall()
        if rows:
            yield rows
        if len(rows) < chunk:
            return
        last = (rows[-1][0], rows[-1][1])


def table_of(leaf: str) -> str | None:
    """The partitioned table a leaf belongs to (by its name), or None."""
    match = _LEAF.match(leaf)
    return match["table"] if match and match["table"] in TABLES else None


# ------------------------------------------------------------------ conversion
def partition_table(cursor, table: str, partitions: int = PARTITIONS) -> None:
    """Rebuild ``table`` as ``PARTITION BY HASH (namespace)`` with ``partitions`` leaves.

    Idempotent: a table already partitioned is left alone. Copies every row;
    indexes, constraints and triggers are recreated under their own names (the
    primary key becomes ``(namespace, id)``, plus :func:`id_index`).
    """
    if is_partitioned(cursor, table):
        return
    _rebuild(cursor, table, partitions)


def unpartition_table(cursor, table: str) -> None:
    """Undo :func:`partition_table`: one plain table again, primary key ``id``."""
    if not is_partitioned(cursor, table):
        return
    _rebuild(cursor, table, 0)


def _rebuild(cursor, table: str, partitions: int) -> None:
    """``table`` copied into its new form, then its schema put back from the catalog."""
    constraints, indexes, triggers, identity = _schema_of(cursor, table)
    _copy_rows(cursor, table, partitions)
    if identity:
        _restore_identity(cursor, table, identity)
    _restore_constraints(cursor, table, constraints, partitions)
    _restore_indexes(cursor, table, indexes, partitions)
    if partitions:
        _name_leaf_indexes(cursor, table)
    for definition in triggers:
        cursor.execute(definition)
    cursor.execute(f"ANALYZE {_quote(table)}")


def _copy_rows(cursor, table: str, partitions: int) -> None:
    """The table renamed aside, its new form (partitioned or plain) filled from it."""
    qt, old = _quote(table), _quote(f"{table}__rebuilt")
    cursor.execute(f"ALTER TABLE {qt} RENAME TO {old}")
    layout = f" PARTITION BY HASH ({KEY})" if partitions else ""
    cursor.execute(
        f"CREATE TABLE {qt} (LIKE {old} INCLUDING DEFAULTS INCLUDING IDENTITY "
        "INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING GENERATED)"
        + layout
    )
    for remainder in range(partitions):
        cursor.execute(
            f"CREATE TABLE {_quote(leaf_name(table, remainder))} PARTITION OF {qt} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    cursor.execute(f"INSERT INTO {qt} OVERRIDING SYSTEM VALUE SELECT * FROM {old}")
    cursor.execute(f"DROP TABLE {old}")


def _restore_identity(cursor, table: str, identity: str) -> None:
    # LIKE gave the copy a sequence of its own, named aside while the old one
    # existed: take the usual name back.
    cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, identity])
    sequence = cursor.fetchone()[0]
    usual = f"{table}_{identity}_seq"
    if sequence and sequence.split(".")[-1].strip('"') != usual:
        cursor.execute(f"ALTER SEQUENCE {sequence} RENAME TO {_quote(usual)}")
    # The copy carried explicit ids: the new identity starts after them.
    cursor.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, %s), "
        f"COALESCE((SELECT max({_quote(identity)}) FROM {_quote(table)}), 0) + 1, false)",
        [table, identity],
    )


def _restore_constraints(cursor, table: str, constraints, partitions: int) -> None:
    for name, kind, definition in constraints:
        if kind == "p":
            columns = f"{KEY}, id" if partitions else "id"
            definition = f"PRIMARY KEY ({columns})"
        elif partitions and not re.search(rf"\b{KEY}\b", definition):
            raise ValueError(
                f"{table}: constraint {name} ({definition}) does not include {KEY!r}, "
                "so it cannot hold on a table partitioned by it"
            )
        cursor.execute(f"ALTER TABLE {_quote(table)} ADD CONSTRAINT {_quote(name)} {definition}")


def _restore_indexes(cursor, table: str, indexes, partitions: int) -> None:
    for name, definition in indexes:
        if name == id_index(table):
            continue  # recreated below when partitioned; the primary key serves otherwise
        # An index of a partitioned table reads "ON ONLY t": that form would not
        # recurse into the leaves of the rebuilt table.
        cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))
    by_id = any(re.search(r"USING btree \(id\b", d) for n, d in indexes if n != id_index(table))
    if partitions and not by_id:  # Django's "_like" index of a text id serves equality too
        cursor.execute(f"CREATE INDEX {_quote(id_index(table))} ON {_quote(table)} (id)")


def _name_leaf_indexes(cursor, table: str) -> None:
    """Name each leaf's index after the table's: ``uix_memories_scope_key_p17``, not the
    generated ``memories_p17_namespace_scope_key_normalized_idx`` (plans stay readable)."""
    cursor.execute(
        "SELECT c.relname, p.relname, t.relname FROM pg_index x "
        "JOIN pg_class p ON p.oid = x.indexrelid "
        "JOIN pg_inherits i ON i.inhparent = x.indexrelid "
        "JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_index ci ON ci.indexrelid = c.oid "
        "JOIN pg_class t ON t.oid = ci.indrelid "
        "WHERE x.indrelid = %s::regclass",
        [table],
    )
    for child, parent, leaf in cursor.fetchall():
        remainder = remainder_of(leaf)
        if remainder is None:
            continue
        wanted = f"{parent}_p{remainder:02d}"
        if child != wanted and len(wanted) <= 63:
            cursor.execute(f"ALTER INDEX {_quote(child)} RENAME TO {_quote(wanted)}")


def _schema_of(cursor, table: str):
    """Constraints (name, kind, definition), other indexes, triggers, identity column."""
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'x') ORDER BY conname",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = %s::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c "
        " WHERE c.conrelid = i.indrelid AND c.conindid = i.indexrelid) "
        "ORDER BY 1",
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass "
        "AND NOT tgisinternal ORDER BY tgname",
        [table],
    )
    triggers = [row[0] for row in cursor.fetchall()]
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
        "AND attidentity <> '' AND NOT attisdropped",
        [table],
    )
    row = cursor.fetchone()
    return constraints, indexes, triggers, (row[0] if row else None)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
