"""Bulk import: validate everything first, then write in one transaction."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.db import partitioning
from memoryapp.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db


def _lines(*records) -> list[str]:
    return [json.dumps(r) if not isinstance(r, str) else r for r in records]


def _import(mm, *records, **kwargs):
    from memoryapp.writes.bulk import parse_json_lines

    return mm.import_memories(parse_json_lines(_lines(*records)), **kwargs)


def test_import_creates_and_updates_like_upsert():
    mm = MemoryManager(project="p", user="u")
    existing = mm.upsert("Deploy target", "staging")
    report = _import(
        mm,
        {"key": "Deploy target", "value": "production"},
        {"key": "user_lang", "value": "French"},
        {"key": "rule", "value": "always lint", "tags": ["constraint"]},
        "",
        {"key": "rule", "value": "always lint twice", "tags": ["constraint"]},
    )
    assert (report.created, report.updated, report.invalid) == (2, 1, [])
    again = Memory.objects.get(pk=existing.id)
    assert again.content == "production" and again.created_at == existing.created_at
    rule = Memory.objects.get(key_normalized="rule")
    assert rule.content == "always lint twice" and rule.type == "constraint"
    assert rule.keywords == mm.upsert("rule", "always lint twice", ["constraint"]).keywords
    assert Memory.objects.get(key_normalized="user_lang").namespace == "u"
    assert MemoryEvent.objects.filter(memory_id=rule.id, event_type="create").count() == 1


def test_one_invalid_line_writes_nothing():
    mm = MemoryManager(project="p")
    report = _import(
        mm,
        {"key": "good", "value": "fine"},
        {"key": "bad", "value": "token=abcdefghijklmnop"},
        "{broken",
        {"key": "", "value": "x"},
        {"key": "k", "value": "v", "colour": "red"},
    )
    assert not report.written and report.total == 0
    assert [n for n, _ in report.invalid] == [2, 3, 4, 5]
    assert "abcdefghijklmnop" not in " ".join(r for _, r in report.invalid)
    assert not Memory.objects.exists()
    report = _import(mm, {"key": "good", "value": "fine"}, "{broken", skip_invalid=True)
    assert report.written and report.created == 1


def test_import_is_seen_by_recall():
    mm = MemoryManager(project="p")
    mm.upsert("seed", "rockets")
    mm.recall("rockets")
    _import(mm, *({"key": f"k{i}", "value": f"rockets number {i}"} for i in range(30)))
    assert len(mm.recall("rockets", top_k=50)) == 31


def test_import_command(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(_lines({"key": "a", "value": "1"}, {"key": "b", "value": "2"})))
    out = io.StringIO()
    call_command("memory", "import", str(f), "--project", "p", "--dry-run", stdout=out)
    assert "every line is valid" in out.getvalue() and not Memory.objects.exists()
    call_command("memory", "import", str(f), "--project", "p", stdout=out)
    assert "Imported 2 memories (2 new, 0 updated)." in out.getvalue()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "x"}\n')
    with pytest.raises(CommandError, match="1 invalid line"):
        call_command("memory", "import", str(bad), stdout=io.StringIO())


@pytest.mark.postgres_only
def test_an_import_gives_postgresql_planner_statistics(raw_sql):
    # pg_class.reltuples is -1 until a table is first analysed (PostgreSQL 14+); ANALYZE
    # sets it at once, inside the transaction (unlike the cumulative statistics views).
    # The tables are partitioned by namespace: the import analyses the namespace's
    # partitions only (an ANALYZE of the whole table would sample all 64).
    with connection.cursor() as cursor:
        remainder = partitioning.remainder_for(cursor, "p")

    def reltuples(table):
        leaf = partitioning.leaf_name(table, remainder)
        return raw_sql("SELECT reltuples FROM pg_class WHERE relname = %s", [leaf])[0][0]

    before = reltuples("memories")
    mm = MemoryManager(project="p")
    with CaptureQueriesContext(connection) as queries:
        report = _import(mm, *({"key": f"fact {i}", "value": f"value {i}"} for i in range(37)))
    assert report.created == 37 and before != 37
    assert reltuples("memories") == 37 and reltuples("memory_events") == 37
    analysed = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("ANALYZE")]
    leaves = [partitioning.leaf_name(t, remainder) for t in ("memories", "memory_events")]
    assert analysed == [f'ANALYZE "{leaf}"' for leaf in leaves]


def test_import_and_its_dry_run_count_lines_merged_by_key(tmp_path):
    """160 lines, 101 keys: the message says where the other 59 lines went; a dry run counts."""
    MemoryManager(project="p").upsert("k0", "already here")
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(101)]
    records += [{"key": f"k{i}", "value": f"second v{i}"} for i in range(59)]
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(_lines(*records)) + "\n\n")

    out = io.StringIO()
    call_command("memory", "import", str(f), "--project", "p", "--dry-run", stdout=out)
    assert out.getvalue().strip() == (
        "Dry run: every line is valid; it would import 101 memories (100 new, 1 updated) "
        "from 160 lines: 59 of them gave way to a later line with the same key "
        "(the last line of a key wins). Nothing was written."
    )
    assert Memory.objects.filter(namespace="p").count() == 1

    out = io.StringIO()
    call_command("memory", "import", str(f), "--project", "p", stdout=out)
    assert out.getvalue().strip() == (
        "Imported 101 memories (100 new, 1 updated) from 160 lines: 59 of them gave way to "
        "a later line with the same key (the last line of a key wins)."
    )
    assert Memory.objects.get(namespace="p", key_normalized="k3").content == "second v3"
    assert Memory.objects.get(namespace="p", key_normalized="k80").content == "v80"


def test_a_dry_run_report_counts_what_the_import_would_write():
    mm = MemoryManager(project="p", user="u")
    mm.upsert("rule", "always lint")
    records = ({"key": "rule", "value": "x"}, {"key": "user_lang", "value": "en"}, "")
    dry = _import(mm, *records, {"key": "new one", "value": "y"}, dry_run=True)
    assert (dry.created, dry.updated, dry.lines, dry.merged, dry.written) == (2, 1, 3, 0, False)
    real = _import(mm, *records, {"key": "new one", "value": "y"})
    assert (real.created, real.updated, real.lines, real.merged) == (dry.created, dry.updated, 3, 0)
