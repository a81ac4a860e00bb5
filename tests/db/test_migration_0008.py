"""Migration 0008 carries its own SQL: a later change to the live conversion in
memoryapp/db/partitioning.py must not change what the migration does."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from django.db import connection

from memoryapp.db import partitioning

MIGRATION = "memoryapp.migrations.0008_partition_by_namespace"
SOURCE = Path(__file__).resolve().parents[2] / "memoryapp/migrations/0008_partition_by_namespace.py"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_migration_imports_no_live_app_code():
    imported = _imported_modules(SOURCE)
    assert not any(name.startswith("memoryapp") for name in imported), imported
    assert "memoryapp.db.partitioning" not in imported


def test_the_frozen_tables_and_modulus_are_what_the_live_code_expects():
    # The live code reads the schema the migration built: they must agree on it.
    migration = importlib.import_module(MIGRATION)
    assert migration.TABLES == partitioning.TABLES
    assert migration.PARTITIONS == partitioning.PARTITIONS


def _shape(cursor, table: str) -> tuple:
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass ORDER BY conname",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass ORDER BY 1",
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal "
        "ORDER BY tgname",
        [table],
    )
    return constraints, indexes, cursor.fetchall()


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_frozen_steps_undo_and_redo_the_partitioning():
    migration = importlib.import_module(MIGRATION)
    with connection.cursor() as cursor:  # DDL is transactional: the test rolls it back
        before = {table: _shape(cursor, table) for table in migration.TABLES}
        for table in migration.TABLES:
            migration._unpartition_table(cursor, table)
            assert not partitioning.is_partitioned(cursor, table)
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'memories'::regclass AND contype = 'p'"
        )
        assert cursor.fetchall() == [("PRIMARY KEY (id)",)]
        for table in migration.TABLES:
            migration._partition_table(cursor, table)
            assert len(partitioning.leaves(cursor, table)) == migration.PARTITIONS
        assert {table: _shape(cursor, table) for table in migration.TABLES} == before
