"""PostgreSQL's hash partitioning by namespace (memoryapp/db/partitioning.py, migration 0008).

What it must keep: every row, every index, constraint and trigger the app relies
on, one leaf number per namespace across the tables. What it must give: an erasure
that rewrites and scans only the leaves its rows were in, and says which.
"""

from __future__ import annotations

import pytest
from django.db import connection

from memoryapp import MemoryManager
from memoryapp.compliance import erase
from memoryapp.db import partitioning
from memoryapp.models import Memory, MemoryEvent


def _rows(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.fetchall()


def _shape(table: str) -> dict:
    """What a rebuild must keep: constraints, indexes, triggers, the identity."""
    return {
        "constraints": _rows(
            "SELECT conname, contype FROM pg_constraint WHERE conrelid = %s::regclass "
            "ORDER BY conname",
            [table],
        ),
        "indexes": _rows(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = %s::regclass "
            "ORDER BY 1",
            [table],
        ),
        "triggers": _rows(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
            "WHERE tgrelid = %s::regclass AND NOT tgisinternal ORDER BY tgname",
            [table],
        ),
    }


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_every_personal_data_table_is_partitioned_with_its_triggers():
    with connection.cursor() as cursor:
        for table in partitioning.TABLES:
            assert partitioning.is_partitioned(cursor, table), table
            assert len(partitioning.leaves(cursor, table)) == partitioning.PARTITIONS
        assert not partitioning.is_partitioned(cursor, "memory_slice_changes")
    assert _rows(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'memories'::regclass AND contype = 'p'"
    ) == [("PRIMARY KEY (namespace, id)",)]
    names = {name for name, _ in _shape("memories")["triggers"]}
    assert {"trg_memories_change_ins", "trg_memory_snapshot_forget"} <= names


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_namespace_has_one_leaf_number_in_every_table():
    mm = MemoryManager(project="acme/part", user="acme/part-user")
    mm.save_memory("Deploy day", "Tuesday")
    assert mm.save_session_summary("we talked about deploys") is not None
    with connection.cursor() as cursor:
        wanted = partitioning.remainder_for(cursor, "acme/part")
    where = _rows(
        "SELECT 'm', tableoid::regclass::text FROM memories WHERE namespace = 'acme/part' "
        "UNION ALL SELECT 'e', tableoid::regclass::text FROM memory_events "
        " WHERE namespace = 'acme/part' "
        "UNION ALL SELECT 's', tableoid::regclass::text FROM session_summaries "
        " WHERE namespace = 'acme/part'"
    )
    assert {kind for kind, _ in where} == {"m", "e", "s"}
    assert {partitioning.remainder_of(leaf) for _, leaf in where} == {wanted}


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_rebuild_round_trip_keeps_rows_schema_and_identity():
    mm = MemoryManager(project="acme/round")
    for i in range(30):
        mm.save_memory(f"fact {i}", f"value {i}")
    before_rows = sorted(Memory.objects.values_list("id", "namespace", "content"))
    before_events = MemoryEvent.objects.count()
    shapes = {t: _shape(t) for t in ("memories", "memory_events")}
    with connection.cursor() as cursor:  # DDL is transactional: the test rolls it back
        for table in ("memories", "memory_events"):
            partitioning.unpartition_table(cursor, table)
            assert not partitioning.is_partitioned(cursor, table)
        assert _rows(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'memories'::regclass AND contype = 'p'"
        ) == [("PRIMARY KEY (id)",)]
        for table in ("memories", "memory_events"):
            partitioning.partition_table(cursor, table)
    assert {t: _shape(t) for t in shapes} == shapes
    assert sorted(Memory.objects.values_list("id", "namespace", "content")) == before_rows
    mm.save_memory("after", "the rebuild")  # the triggers and the event identity still work
    assert MemoryEvent.objects.count() == before_events + 1
    assert len(set(MemoryEvent.objects.values_list("id", flat=True))) == before_events + 1
    assert mm.recall("rebuild")[0].title == "after"


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_unique_constraint_without_the_namespace_cannot_be_partitioned():
    with connection.cursor() as cursor:
        partitioning.unpartition_table(cursor, "memory_recall_snapshots")
        cursor.execute(
            "ALTER TABLE memory_recall_snapshots ADD CONSTRAINT uix_test_scope UNIQUE (scope)"
        )
        with pytest.raises(ValueError, match="does not include 'namespace'"):
            partitioning.partition_table(cursor, "memory_recall_snapshots")


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_erasure_names_only_the_leaves_of_its_rows_and_no_namespace():
    gone, kept = "acme/erased-tenant", "acme/kept-tenant"
    for ns in (gone, kept):
        mm = MemoryManager(project=ns)
        for i in range(5):
            mm.save_memory(f"fact {i}", f"{ns} says {i}")
    with connection.cursor() as cursor:
        wanted = partitioning.remainder_for(cursor, gone)
        other = partitioning.remainder_for(cursor, kept)
    receipt = erase(namespace=gone)
    assert receipt.verified, receipt.verification
    info = receipt.details["aliases"]["default"]
    assert info["partitions"] == [wanted]
    purged = info["purge"]["tables"]
    assert partitioning.leaf_name("memories", wanted) in purged
    assert partitioning.leaf_name("memory_events", wanted) in purged
    if other != wanted:
        assert partitioning.leaf_name("memories", other) not in purged
    assert info["purge"]["partitions"]["memories"] == "1 of 64 partitions"
    assert gone not in str(receipt.details)
    assert Memory.objects.filter(namespace=kept).count() == 5


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_storage_tables_without_remainders_means_every_leaf():
    with connection.cursor() as cursor:
        every, notes = partitioning.storage_tables(
            cursor, ["memories", "memory_slice_changes"], None
        )
        some, _ = partitioning.storage_tables(cursor, ["memories"], [3, 40])
    assert len(every) == partitioning.PARTITIONS + 1 and every[-1] == "memory_slice_changes"
    assert notes == {"memories": "64 of 64 partitions"}
    assert some == ["memories_p03", "memories_p40"]


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_sqlite_keeps_one_file_and_purges_the_tables_as_they_are():
    from memoryapp.db.purge.vendors import for_connection

    mm = MemoryManager(project="acme/erased-tenant")
    mm.save_memory("fact", "the tenant says hello")
    tables = ["memories", "memory_events"]
    assert for_connection(connection).storage_tables(connection, tables, None) == (
        tables,
        {},
    )
    receipt = erase(namespace="acme/erased-tenant")
    assert receipt.verified, receipt.verification
    info = receipt.details["aliases"]["default"]
    assert "partitions" not in info and "partitions" not in info["purge"]


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_kept_row_check_reads_the_scanned_partitions_only():
    from django.test.utils import CaptureQueriesContext

    from memoryapp.compliance import kept

    here, elsewhere = "acme/here", None
    with connection.cursor() as cursor:
        wanted = partitioning.remainder_for(cursor, here)
        for i in range(100):
            if partitioning.remainder_for(cursor, f"acme/else{i}") != wanted:
                elsewhere = f"acme/else{i}"
                break
    MemoryManager(project=here).save_memory("a", "the sentence stored beside it")
    MemoryManager(project=elsewhere).save_memory("b", "the sentence stored far away")
    leaf = partitioning.leaf_name("memories", wanted)
    beside, far = b"stored beside it", b"stored far away"
    with CaptureQueriesContext(connection) as queries:
        assert kept.explained("default", [beside], [leaf]) == {0}
    # Indexed lookups of whole keys (none is this slice of content), then the rows of the
    # scanned partition only.
    chunks = [q["sql"] for q in queries.captured_queries if "LIMIT" in q["sql"]]
    assert chunks and all(leaf in sql for sql in chunks), chunks
    # A fragment only a row of a partition the scan did not read holds: not read, so not
    # explained (the bytes the scan found are in the partitions it read).
    assert kept.explained("default", [beside, far, b"held by no row"], [leaf]) == {0}
    # A whole key of a row anywhere is found through its index.
    assert kept.explained("default", [elsewhere.encode(), far], [leaf]) == {0}


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_an_erasure_inside_a_transaction_leaves_the_planner_as_it_was():
    """The deletes read partitions through their indexes, for their own statements only."""
    MemoryManager(project="acme/in-tx").save_memory("fact", "said once")
    receipt = erase(namespace="acme/in-tx")  # inside the test's transaction
    assert receipt.counts["memories"] == 1
    assert _rows("SELECT current_setting('enable_seqscan')") == [("on",)]
