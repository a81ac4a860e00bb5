"""PostgreSQL: the personal-data tables partitioned by ``HASH (namespace)``.

An erasure then rewrites and byte-scans only the partitions that held the erased
rows, not whole tables (memoryapp/db/partitioning.py says why). SQLite is
unchanged. On a large database this migration copies each table once (it needs
the tables' size again in free disk, and holds them locked meanwhile): run it in
a maintenance window.

The SQL is frozen here, as every migration's is: a later change to the live
conversion in memoryapp/db/partitioning.py must not change what this step did
to a database that already ran it.
"""

import re

from django.db import migrations, router

PARTITIONS = 64
TABLES = (
    "memories",
    "memory_events",
    "session_summaries",
    "memory_review_queue",
    "memory_recall_snapshots",
)
KEY = "namespace"
_LEAF = re.compile(r"^(?P<table>.+)_p(?P<remainder>\d{2,})$")


def _quote(name):
    return '"' + name.replace('"', '""') + '"'


def _leaf_name(table, remainder):
    return f"{table}_p{remainder:02d}"


def _id_index(table):
    return f"ix_{table}_id"


def _is_partitioned(cursor, table):
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [table])
    row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def _schema_of(cursor, table):
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


def _copy_rows(cursor, table, partitions):
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
            f"CREATE TABLE {_quote(_leaf_name(table, remainder))} PARTITION OF {qt} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    cursor.execute(f"INSERT INTO {qt} OVERRIDING SYSTEM VALUE SELECT * FROM {old}")
    cursor.execute(f"DROP TABLE {old}")


def _restore_identity(cursor, table, identity):
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


def _restore_constraints(cursor, table, constraints, partitions):
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


def _restore_indexes(cursor, table, indexes, partitions):
    for name, definition in indexes:
        if name == _id_index(table):
            continue  # recreated below when partitioned; the primary key serves otherwise
        # An index of a partitioned table reads "ON ONLY t": that form would not
        # recurse into the leaves of the rebuilt table.
        cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))
    by_id = any(re.search(r"USING btree \(id\b", d) for n, d in indexes if n != _id_index(table))
    if partitions and not by_id:  # Django's "_like" index of a text id serves equality too
        cursor.execute(f"CREATE INDEX {_quote(_id_index(table))} ON {_quote(table)} (id)")


def _name_leaf_indexes(cursor, table):
    """Each leaf's index named after the table's (``uix_memories_scope_key_p17``)."""
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
        match = _LEAF.match(leaf)
        if match is None or match["table"] not in TABLES:
            continue
        wanted = f"{parent}_p{int(match['remainder']):02d}"
        if child != wanted and len(wanted) <= 63:
            cursor.execute(f"ALTER INDEX {_quote(child)} RENAME TO {_quote(wanted)}")


def _rebuild(cursor, table, partitions):
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


def _partition_table(cursor, table):
    if not _is_partitioned(cursor, table):
        _rebuild(cursor, table, PARTITIONS)


def _unpartition_table(cursor, table):
    if _is_partitioned(cursor, table):
        _rebuild(cursor, table, 0)


def _each_table(apps, schema_editor, change) -> None:
    connection = schema_editor.connection
    if not router.allow_migrate(connection.alias, "memoryapp"):
        return
    # Only PostgreSQL partitions by namespace; SQLite keeps its plain tables.
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for table in TABLES:
            change(cursor, table)


def partition(apps, schema_editor) -> None:
    _each_table(apps, schema_editor, _partition_table)


def unpartition(apps, schema_editor) -> None:
    _each_table(apps, schema_editor, _unpartition_table)


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0007_erasure_receipt_states"),
    ]

    operations = [migrations.RunPython(partition, unpartition)]
