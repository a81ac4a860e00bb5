"""The five tables, the change-counter triggers and the migrations, on both vendors."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.db import connection, connections

from memoryapp.db.meta import read_change_counter
from memoryapp.models import Memory

pytestmark = pytest.mark.django_db

NOW = "2026-01-01T00:00:00"


def _trigger_names() -> set[str]:
    with connection.cursor() as c:
        if connection.vendor == "sqlite":
            c.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memories'"
            )
        else:
            c.execute(
                "SELECT tgname FROM pg_trigger "
                "WHERE tgrelid = 'memories'::regclass AND NOT tgisinternal"
            )
        return {r[0] for r in c.fetchall()}


def test_tables_have_the_spec_names():
    tables = set(connection.introspection.table_names())
    assert {
        "memories",
        "session_summaries",
        "memory_review_queue",
        "memory_events",
        "schema_meta",
    } <= tables


def test_memories_columns_are_agentaos_plus_ours():
    with connection.cursor() as c:
        columns = {
            col.name for col in connection.introspection.get_table_description(c, "memories")
        }
    assert columns == {
        "id", "scope", "type", "key_normalized", "title", "content", "tags_json",
        "keywords_json", "source", "confidence", "sensitivity", "created_at",
        "updated_at", "deleted_at", "namespace", "subject",
        # The semantic ranking's vectors: nullable, so Agentao's own inserts leave them NULL
        # (recall embeds such rows as it reads them).
        "embedding", "embedding_model",
    }  # fmt: skip


def test_triggers_exist():
    assert {"trg_memories_change_ins", "trg_memories_change_upd", "trg_memories_change_del"} <= (
        _trigger_names()
    )


def test_meta_rows_exist():
    assert read_change_counter() >= 0
    with connection.cursor() as c:
        c.execute("SELECT value FROM schema_meta WHERE key = 'version'")
        assert c.fetchone()[0] == "3"


def test_raw_sql_insert_update_delete_move_the_counter(raw_sql):
    start = read_change_counter()
    # namespace, subject, type, tags... omitted: database defaults fill them.
    raw_sql(
        "INSERT INTO memories (id, scope, key_normalized, title, content, created_at, updated_at) "
        "VALUES ('raw1', 'project', 'raw_key', 'raw key', 'raw content', %s, %s)",
        [NOW, NOW],
    )
    after_insert = read_change_counter()
    assert after_insert > start
    raw_sql("UPDATE memories SET content = 'changed' WHERE id = 'raw1'")
    after_update = read_change_counter()
    assert after_update > after_insert
    raw_sql("DELETE FROM memories WHERE id = 'raw1'")
    assert read_change_counter() > after_update


def test_raw_insert_gets_database_defaults(raw_sql):
    raw_sql(
        "INSERT INTO memories (id, scope, key_normalized, title, content, created_at, updated_at) "
        "VALUES ('raw2', 'project', 'k2', 'k2', 'c', %s, %s)",
        [NOW, NOW],
    )
    m = Memory.objects.get(pk="raw2")
    assert (m.namespace, m.subject, m.type, m.tags, m.keywords) == ("", None, "note", [], [])
    assert (m.source, m.confidence, m.sensitivity) == ("explicit", "explicit_user", "normal")
    assert m.created_at == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_live_key_is_unique_per_namespace_but_not_across(raw_sql):
    from django.db import IntegrityError, transaction

    Memory.objects.create(
        namespace="a", scope="project", key_normalized="k", title="k", content="x"
    )
    Memory.objects.create(
        namespace="b", scope="project", key_normalized="k", title="k", content="x"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(
            namespace="a", scope="project", key_normalized="k", title="k", content="y"
        )


def test_soft_deleted_rows_do_not_block_the_key():
    from memoryapp.fields import now

    Memory.objects.create(
        namespace="a", scope="project", key_normalized="k", title="k", content="x", deleted_at=now()
    )
    Memory.objects.create(
        namespace="a", scope="project", key_normalized="k", title="k", content="y"
    )
    assert Memory.objects.filter(key_normalized="k").count() == 2


@pytest.mark.sqlite_only
def test_sqlite_timestamps_are_iso_text_with_T(raw_sql):
    Memory.objects.create(namespace="", scope="project", key_normalized="t", title="t", content="x")
    (stamp,) = raw_sql("SELECT created_at || '' FROM memories WHERE key_normalized = 't'")[0]
    assert stamp[10] == "T" and len(stamp) == 26  # YYYY-MM-DDTHH:MM:SS.ffffff


@pytest.mark.django_db(transaction=True)
def test_counter_row_survives_a_flush():
    call_command("flush", "--noinput")
    with connection.cursor() as c:
        c.execute("SELECT COUNT(*) FROM schema_meta WHERE key = 'memories_change'")
        assert c.fetchone()[0] == 1
    before = read_change_counter()
    Memory.objects.create(namespace="", scope="project", key_normalized="f", title="f", content="x")
    assert read_change_counter() > before


@pytest.mark.django_db(transaction=True)
def test_migrate_to_zero_and_back():
    call_command("migrate", "memoryapp", "zero", verbosity=0)
    assert "memories" not in connection.introspection.table_names()
    call_command("migrate", "memoryapp", verbosity=0)
    assert {"trg_memories_change_ins", "trg_memories_change_upd", "trg_memories_change_del"} <= (
        _trigger_names()
    )
    assert read_change_counter() == 0


@pytest.mark.django_db(databases=["default", "memoryapp_ephemeral"])
def test_makemigrations_is_clean():
    # makemigrations checks the migration history of every database memoryapp may use
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_unsupported_vendor_fails_the_system_check(monkeypatch):
    from memoryapp.ops.checks import check_database_vendor

    assert check_database_vendor() == []
    monkeypatch.setattr(type(connections["default"]), "vendor", "mysql")
    errors = check_database_vendor()
    assert errors and {e.id for e in errors} == {"memoryapp.E001"}
    assert any("'default'" in e.msg and "'mysql'" in e.msg for e in errors)


def test_sqlite_without_immediate_transactions_fails_the_system_check(monkeypatch):
    import copy

    from memoryapp.ops.checks import check_sqlite_transactions

    assert check_sqlite_transactions() == []
    deferred = copy.deepcopy(connections.settings["default"])
    deferred.update(ENGINE="django.db.backends.sqlite3", NAME="/tmp/x.sqlite3", OPTIONS={})
    monkeypatch.setitem(connections.settings, "deferred", deferred)
    errors = check_sqlite_transactions()
    assert [e.id for e in errors] == ["memoryapp.E003"]
    assert "'deferred'" in errors[0].msg and "IMMEDIATE" in errors[0].hint
    deferred["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
    assert check_sqlite_transactions() == []


def test_migration_operation_refuses_an_unknown_vendor(monkeypatch):
    from types import SimpleNamespace

    from django.db import NotSupportedError

    from memoryapp.db.operations import VendorSQL

    executed = []
    editor = SimpleNamespace(connection=connections["default"], execute=executed.append)
    op = VendorSQL(forwards={"sqlite": ["SELECT 1"]}, backwards={"sqlite": []})
    monkeypatch.setattr(type(connections["default"]), "vendor", "oracle")
    with pytest.raises(NotSupportedError, match="oracle"):
        op.database_forwards("memoryapp", editor, None, None)
    assert executed == []


def _slices() -> dict[tuple[str, str], int]:
    with connection.cursor() as c:
        c.execute("SELECT namespace, scope, value FROM memory_slice_changes")
        return {(ns, scope): int(value) for ns, scope, value in c.fetchall()}


def test_slice_counters_move_only_for_the_slices_a_statement_touches(raw_sql):
    from memoryapp.db.meta import read_slice_counters

    insert = (
        "INSERT INTO memories (id, namespace, scope, key_normalized, title, content, "
        "created_at, updated_at) VALUES (%s, %s, %s, %s, 't', 'c', %s, %s)"
    )
    raw_sql(insert, ["s1", "acme", "project", "k1", NOW, NOW])
    first = _slices()
    assert ("acme", "project") in first and ("globex", "project") not in first
    raw_sql(insert, ["s2", "globex", "project", "k2", NOW, NOW])
    second = _slices()
    assert second[("acme", "project")] == first[("acme", "project")]
    assert ("globex", "project") in second
    # An update that moves a row to another slice moves both counters.
    raw_sql("UPDATE memories SET namespace = 'initech' WHERE id = 's1'")
    third = _slices()
    assert third[("acme", "project")] != second[("acme", "project")]
    assert ("initech", "project") in third
    assert third[("globex", "project")] == second[("globex", "project")]
    raw_sql("DELETE FROM memories WHERE id = 's2'")
    fourth = _slices()
    assert fourth[("globex", "project")] != third[("globex", "project")]
    assert fourth[("initech", "project")] == third[("initech", "project")]
    counters = read_slice_counters("default", [("globex", "project"), ("nobody", "user")])
    assert counters == {("globex", "project"): fourth[("globex", "project")], ("nobody", "user"): 0}


def test_slice_versions_are_not_reused_after_a_rollback(raw_sql):
    from django.db import transaction

    Memory.objects.create(
        namespace="a", scope="project", key_normalized="k", title="k", content="x"
    )
    committed = _slices()[("a", "project")]
    seen = set()
    for _ in range(5):
        with pytest.raises(RuntimeError), transaction.atomic():
            raw_sql("UPDATE memories SET content = 'phantom' WHERE namespace = 'a'")
            seen.add(_slices()[("a", "project")])
            raise RuntimeError("roll back")
        assert _slices()[("a", "project")] == committed
    raw_sql("UPDATE memories SET content = 'real' WHERE namespace = 'a'")
    # A version a rolled-back transaction saw is never the one a later commit makes
    # (a cache keyed by it would otherwise take the phantom rows for current).
    assert _slices()[("a", "project")] not in seen | {committed}


def test_one_bulk_statement_moves_each_touched_slice(raw_sql):
    raw_sql(
        "INSERT INTO memories (id, namespace, scope, key_normalized, title, content, "
        "created_at, updated_at) VALUES "
        "('b1', 'acme', 'project', 'k1', 't', 'c', %s, %s), "
        "('b2', 'acme', 'project', 'k2', 't', 'c', %s, %s), "
        "('b3', 'acme', 'user', 'k3', 't', 'c', %s, %s)",
        [NOW] * 6,
    )
    after = _slices()
    assert ("acme", "project") in after and ("acme", "user") in after
    raw_sql("UPDATE memories SET content = 'x' WHERE namespace = 'acme'")
    moved = _slices()
    assert moved[("acme", "project")] != after[("acme", "project")]
    assert moved[("acme", "user")] != after[("acme", "user")]


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_truncate_moves_every_slice_on_postgresql(raw_sql):
    Memory.objects.create(
        namespace="a", scope="project", key_normalized="k", title="k", content="x"
    )
    Memory.objects.create(
        namespace="b", scope="project", key_normalized="k", title="k", content="x"
    )
    raw_sql("DELETE FROM memory_slice_changes WHERE namespace = 'b'")  # as before 0004 ran
    before = _slices()
    raw_sql("TRUNCATE memories")
    after = _slices()
    assert after[("a", "project")] != before[("a", "project")]
    assert ("b", "project") in after  # a slice with rows but no counter moves too


def test_slice_counter_triggers_exist():
    assert {
        "trg_memory_slice_change_ins",
        "trg_memory_slice_change_upd",
        "trg_memory_slice_change_del",
    } <= _trigger_names()
