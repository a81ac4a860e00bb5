"""One SQLite file, two writers: this app and Agentao's own ``SQLiteMemoryStore``.

A file migrated here opens cleanly in Agentao and rows either side writes are
read correctly by the other (namespace ``''``); a ``memory.db`` created by
Agentao itself is adopted into this app's schema with ``memory adopt``. These
tests use their own SQLite files, so they run in both vendor passes.
"""

from __future__ import annotations

import contextlib
import copy
import io
import shutil
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connections

pytest.importorskip("agentao.memory")

from agentao.memory import MemoryManager, MemoryRetriever, SQLiteMemoryStore  # noqa: E402
from agentao.memory.models import MemoryReviewItem  # noqa: E402

from memoryapp import MemoryManager as AppManager  # noqa: E402
from memoryapp.agentao import DjangoMemoryStore  # noqa: E402
from memoryapp.db.meta import read_change_counter  # noqa: E402
from memoryapp.interop import adopt as adoption  # noqa: E402
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary  # noqa: E402

pytestmark = pytest.mark.django_db

MEMORY_TABLES = adoption.TABLES


def _schema(path: Path) -> list[tuple]:
    """The memory tables' DDL (tables, indexes, triggers) of a file, sorted."""
    with sqlite3.connect(path) as con:
        rows = con.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE tbl_name IN "
            f"({', '.join('?' * len(MEMORY_TABLES))})",
            MEMORY_TABLES,
        ).fetchall()
    con.close()
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _meta(path: Path) -> dict[str, str]:
    con = sqlite3.connect(path)
    try:
        return dict(con.execute("SELECT key, value FROM schema_meta"))
    finally:
        con.close()


def _next_second() -> None:
    """Agentao stamps whole seconds: its next row must not share our last row's second."""
    time.sleep(1.0 - (time.time() % 1.0) + 0.01)


def _seconds(text: str | None) -> str | None:
    # This app writes "….ffffff"; a whole-second value reads back without the fraction.
    return text[:-7] if text and text.endswith(".000000") else text


def _comparable(records) -> list[tuple]:
    return [
        (
            r.id,
            r.scope,
            r.type,
            r.key_normalized,
            r.title,
            r.content,
            r.tags,
            r.keywords,
            r.source,
            r.confidence,
            r.sensitivity,
            _seconds(r.created_at),
            _seconds(r.updated_at),
            _seconds(r.deleted_at),
        )
        for r in records
    ]


@pytest.fixture(scope="module")
def _migrated_once(tmp_path_factory, django_db_blocker):
    """One SQLite file migrated by this app, for the module's tests to copy: migrating
    took 3-5 s a test (issue #39's test time); a copy of the file is the same file."""
    path = tmp_path_factory.mktemp("migrated") / "memory.db"
    alias = f"template_{uuid.uuid4().hex[:8]}"
    settings = copy.deepcopy(connections.settings["default"])
    settings.update(ENGINE="django.db.backends.sqlite3", NAME=str(path), TEST={"NAME": str(path)})
    connections.settings[alias] = settings
    try:
        with django_db_blocker.unblock():
            call_command("migrate", database=alias, verbosity=0, interactive=False)
            with connections[alias].cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connections[alias].close()
    finally:
        del connections.settings[alias]
        with contextlib.suppress(AttributeError, KeyError):
            del connections[alias]
    return path


@pytest.fixture
def migrated(_migrated_once, extra_alias, tmp_path):
    """A fresh SQLite file migrated by this app (a copy of the module's), and its alias."""
    path = tmp_path / "memory.db"
    shutil.copyfile(_migrated_once, path)
    return path, extra_alias(path)


def test_agentao_opens_a_file_migrated_here(migrated):
    path, alias = migrated
    before = _schema(path)
    store = SQLiteMemoryStore(str(path))  # runs Agentao's start-up script
    assert _schema(path) == before  # nothing created, nothing replaced
    triggers = {name: sql for kind, name, _, sql in before if kind == "trigger"}
    counters = {
        f"trg_{counter}_{e}"
        for counter in ("memories_change", "memory_slice_change")
        for e in ("ins", "upd", "del")
    }
    # The counters, and the trigger that forgets a slice's recall snapshot on a delete.
    assert set(triggers) == counters | {"trg_memory_snapshot_forget"}
    assert all("ON CONFLICT" in triggers[name] for name in counters)  # ours, not Agentao's
    assert _meta(path) == {"memories_change": "0", "version": "3"}
    assert store.change_version() == read_change_counter(alias) == 0
    assert store.list_memories() == [] and store.list_session_summaries() == []
    assert SQLiteMemoryStore(str(path)).list_review_items(None) == []  # a second start-up too


def test_our_recall_sees_agentaos_writes_on_the_next_call(migrated):
    path, alias = migrated
    theirs = MemoryManager(project_store=SQLiteMemoryStore(str(path)))
    ours = AppManager(project="", using=alias)
    ours.upsert("Release day", "Releases ship on Tuesdays")
    assert [h.title for h in ours.recall("releases tuesdays")] == ["Release day"]
    # Agentao's connection fires our slice-counter triggers: the index catches up.
    assert theirs.save_from_tool("Release train", "Release trains leave on Tuesdays", [])
    assert {h.title for h in ours.recall("releases tuesdays")} == {"Release day", "Release train"}
    theirs.delete(theirs.project_store.get_memory_by_scope_key("project", "release_day").id)
    assert [h.title for h in ours.recall("releases tuesdays")] == ["Release train"]


def test_rows_written_by_either_side_are_read_by_the_other(migrated):
    path, alias = migrated
    theirs = MemoryManager(project_store=SQLiteMemoryStore(str(path)))
    ours = AppManager(project="", using=alias)
    django_side = MemoryManager(project_store=DjangoMemoryStore("", using=alias))
    counter = [read_change_counter(alias)]

    def advanced() -> bool:
        value = theirs.project_store.change_version()
        assert value == read_change_counter(alias)
        moved = value > counter[-1]
        counter.append(value)
        return moved

    assert theirs.save_from_tool("Deploy target", "Kubernetes via Helm", ["decision", "部署"])
    assert advanced()
    deploy = theirs.project_store.get_memory_by_scope_key("project", "deploy_target")
    ours.upsert("CI system", "GitHub Actions runs the tests in tests/ci.yml", tags=["ci", "构建"])
    assert advanced()
    _next_second()
    assert theirs.save_from_tool("Release day", "Releases ship on Tuesdays", [])
    assert advanced()
    ours.upsert("Deploy target", "Kubernetes via Helm, staging first", tags=["decision"])
    assert advanced()
    ci = ours.get_all_entries()[1]
    _next_second()
    theirs.save_from_tool("CI system", "GitHub Actions and a nightly job", ["ci"])
    assert advanced()
    ours.upsert("Style guide", "Black with line length 100", tags=["workflow"])
    assert advanced()

    # Same rows, same order (created_at), same fields, whichever side reads.
    by_agentao = theirs.project_store.list_memories()
    by_django = django_side.project_store.list_memories()
    assert _comparable(by_django) == _comparable(by_agentao)
    expected = ["deploy_target", "ci_system", "release_day", "style_guide"]
    assert [r.key_normalized for r in by_agentao] == expected
    assert [m.key_normalized for m in ours.get_all_entries()] == expected
    # Updates in place across writers: ids and created_at kept.
    assert by_agentao[0].id == deploy.id and by_agentao[0].created_at == deploy.created_at
    assert by_agentao[0].content == "Kubernetes via Helm, staging first"
    assert by_agentao[1].id == ci.id and by_agentao[1].content == "GitHub Actions and a nightly job"
    assert by_agentao[1].tags == ["ci"]
    assert ours.get_entry(deploy.id).tags == ["decision"]
    assert theirs.project_store.filter_by_tag("构建") == []
    assert [r.key_normalized for r in theirs.search("部署")] == []  # our update replaced the tag
    # Ordering by updated_at (the stable selection) and recall agree.
    assert _comparable(django_side.get_stable_entries()) == _comparable(theirs.get_stable_entries())
    query = "github actions nightly"
    hits = [
        [
            (h.memory_id, round(h.score, 3), h.reasons)
            for h in MemoryRetriever(m).recall_candidates(query)
        ]
        for m in (theirs, django_side)
    ]
    assert hits[0] == hits[1] and hits[0][0][0] == ci.id

    # Soft deletes by either side.
    assert theirs.delete(ci.id)
    assert advanced()
    assert ci.id not in {m.id for m in ours.get_all_entries()}
    assert ours.delete(deploy.id)
    assert advanced()
    assert [r.key_normalized for r in theirs.get_all_entries()] == ["release_day", "style_guide"]
    assert Memory.objects.using(alias).filter(deleted_at__isnull=False).count() == 2

    # Session summaries and review items, both ways.
    theirs.save_session_summary("Agentao's session summary", 1000, 12)
    django_side.save_session_summary("Summary through the Django store", 500, 6)
    texts = [s.summary_text for s in theirs.project_store.list_session_summaries()]
    assert texts == ["Summary through the Django store", "Agentao's session summary"]
    assert [s.summary_text for s in django_side.project_store.list_session_summaries()] == texts
    assert [s.summary_text for s in ours.list_session_summaries()] == texts[::-1]
    theirs.crystallize_user_messages([{"role": "user", "content": "I prefer tabs over spaces."}])
    django_side.project_store.upsert_review_item(
        MemoryReviewItem(
            id="review000001",
            scope="user",
            type="preference",
            key_normalized="preference_tabs_over_spaces",
            title="Preference: tabs over spaces",
            content="tabs over spaces",
            tags=["preference"],
        )
    )
    (item,) = theirs.list_review_items()
    assert (item.occurrences, item.confidence) == (2, "inferred")  # folded across writers
    assert ReviewItem.objects.using(alias).get().occurrences == 2

    # Agentao's reset, seen by this app.
    result = theirs.wipe_all()
    assert (result.memories_cleared, result.summaries_cleared, result.ok) == (2, 2, True)
    assert advanced()
    assert ours.get_all_entries() == [] and ours.list_session_summaries() == []
    assert SessionSummary.objects.using(alias).count() == 0


def _agentao_file_view(store) -> dict:
    """Summaries and review items as either store returns them."""
    return {
        "summaries": [
            (s.id, s.session_id, s.summary_text, s.tokens_before, s.messages_summarized)
            + (_seconds(s.created_at),)
            for s in store.list_session_summaries()
        ],
        "review": [
            (i.id, i.key_normalized, i.occurrences, i.status, _seconds(i.created_at))
            for i in store.list_review_items(None)
        ],
    }


def _agentao_file(path: Path) -> dict:
    """A memory.db written by Agentao itself, with every kind of row; returns Agentao's view."""
    mm = MemoryManager(project_store=SQLiteMemoryStore(str(path)))
    mm.save_from_tool("user_name", "Alice", ["profile"])  # user scope, downgraded to project
    mm.save_from_tool("Deploy target", "Kubernetes via Helm", ["decision"])
    mm.save_from_tool("Deploy target", "Kubernetes via Helm, staging first", ["decision"])
    mm.save_from_tool("Old note", "Something obsolete", [])
    mm.delete(mm.project_store.get_memory_by_scope_key("project", "old_note").id)
    mm.save_from_tool("Old note", "Something current", ["库"])
    mm.save_session_summary("First session: set up CI", 800, 9)
    mm.archive_session()
    mm.save_session_summary("Second session: deployed", 400, 5)
    mm.crystallize_user_messages([{"role": "user", "content": "Never use tabs for indentation."}])
    mm.crystallize_user_messages([{"role": "user", "content": "I prefer dark mode editors."}])
    mm.approve_review_item(mm.list_review_items()[0].id)
    store = mm.project_store
    con = sqlite3.connect(path)
    try:
        raw = con.execute("SELECT id, content, deleted_at FROM memories ORDER BY rowid").fetchall()
        events = con.execute("SELECT id, memory_id, event_type FROM memory_events").fetchall()
    finally:
        con.close()
    return {
        "memories": _comparable(store.list_memories()),
        **_agentao_file_view(store),
        "raw": raw,
        "events": events,
        "counter": store.change_version(),
    }


def _adopt(path: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("memory", "adopt", str(path), *args, stdout=out)
    return out.getvalue()


def test_adopt_a_memory_db_created_by_agentao(tmp_path, extra_alias, migrated):
    path = tmp_path / "agentao" / "memory.db"
    path.parent.mkdir()
    before = _agentao_file(path)
    assert len(before["raw"]) == 5 and sum(1 for r in before["raw"] if r[2]) == 1

    report = _adopt(path, "--dry-run")
    assert "an Agentao memory store" in report and "memories: 5 rows" in report
    assert "Dry run" in report
    assert adoption.inspect_layout(extra_alias(path)) == adoption.AGENTAO

    report = _adopt(path, "--yes")
    assert "Adopted" in report and "memories: 5 rows" in report
    (backup,) = [line[len("Backup: ") :] for line in report.splitlines() if "Backup: " in line]
    assert Path(backup).name.startswith("memory.db.agentao-backup-")
    assert _comparable(SQLiteMemoryStore(backup).list_memories()) == before["memories"]
    with sqlite3.connect(backup) as con:
        assert "namespace" not in {r[1] for r in con.execute("PRAGMA table_info(memories)")}
    con.close()

    # The schema is exactly what a fresh migrate builds.
    assert _schema(path) == _schema(migrated[0])
    alias = extra_alias(path)
    assert adoption.inspect_layout(alias) == adoption.MEMORYAPP

    # Agentao opens the adopted file and reads what it wrote.
    agentao_store = SQLiteMemoryStore(str(path))
    assert _comparable(agentao_store.list_memories()) == before["memories"]
    after = _agentao_file_view(agentao_store)
    assert after["summaries"] == before["summaries"]
    assert after["review"] == before["review"]
    assert agentao_store.change_version() > before["counter"]

    # So does this app, through both of its doors.
    django_store = DjangoMemoryStore("", using=alias)
    assert _comparable(django_store.list_memories()) == before["memories"]
    assert _agentao_file_view(django_store) == after
    app = AppManager(project="", using=alias)
    # (As a set: the manager breaks whole-second ties by id, Agentao by key.)
    assert sorted(m.id for m in app.get_all_entries()) == sorted(r[0] for r in before["memories"])
    raw = list(Memory.objects.using(alias).order_by("created_at").values_list("id", "content"))
    assert sorted(raw) == sorted((i, c) for i, c, _ in before["raw"])  # soft-deleted kept
    deleted = Memory.objects.using(alias).get(deleted_at__isnull=False)
    assert (deleted.content, deleted.namespace) == ("Something obsolete", "")
    events = MemoryEvent.objects.using(alias).order_by("id")
    assert list(
        events.exclude(event_type="adopt").values_list("id", "memory_id", "event_type")
    ) == [tuple(e) for e in before["events"]]
    assert events.filter(event_type="adopt", actor__startswith="cli:").count() == 5

    # Writes after adoption: seen by Agentao, counter included.
    version = agentao_store.change_version()
    app.upsert("New fact", "Written after adoption", tags=["x"])
    assert agentao_store.change_version() > version
    assert "new_fact" in [r.key_normalized for r in agentao_store.list_memories()]

    # Adopting again changes nothing, and writes no backup.
    again = _adopt(path, "--yes")
    assert "nothing to adopt" in again and "Backup" not in again


def test_adopt_after_a_fake_initial_migrate(tmp_path, extra_alias, migrated):
    """The tempting shortcut (``migrate --fake-initial``) records 0001 over Agentao's tables."""
    path = tmp_path / "memory.db.agentao"
    before = _agentao_file(path)
    alias = extra_alias(path)
    # The shortcut fails at 0004 (its indexes need the namespace column Agentao's
    # table lacks), after recording 0001-0003: adoption must still recover.
    with pytest.raises(OperationalError, match="ix_memories_ns_created"):
        call_command("migrate", database=alias, fake_initial=True, verbosity=0, interactive=False)
    assert adoption.inspect_layout(alias) == adoption.AGENTAO  # still no namespace column
    assert "Adopted" in _adopt(path, "--yes", "--no-backup")
    assert not list(tmp_path.glob("*.agentao-backup-*"))
    assert _schema(path) == _schema(migrated[0])
    assert _comparable(SQLiteMemoryStore(str(path)).list_memories()) == before["memories"]


def test_adopt_resumes_an_interrupted_adoption(tmp_path, extra_alias, monkeypatch, migrated):
    path = tmp_path / "interrupted.db"
    before = _agentao_file(path)

    def fail(*args, **kwargs):
        raise RuntimeError("migrate failed")

    monkeypatch.setattr(adoption, "call_command", fail)
    with pytest.raises(RuntimeError):
        _adopt(path, "--yes", "--no-backup")
    monkeypatch.undo()
    assert adoption.inspect_layout(extra_alias(path)) == adoption.INTERRUPTED
    assert "interrupted adoption" in _adopt(path, "--yes", "--no-backup")
    assert _comparable(SQLiteMemoryStore(str(path)).list_memories()) == before["memories"]


def test_adopt_refuses_what_it_does_not_know(tmp_path, migrated):
    with pytest.raises(CommandError, match="No such file"):
        _adopt(tmp_path / "missing.db")
    odd = tmp_path / "odd.db"
    con = sqlite3.connect(odd)
    con.execute("CREATE TABLE memories (id TEXT PRIMARY KEY, body TEXT)")
    con.close()
    with pytest.raises(CommandError, match="neither Agentao's nor this app's"):
        _adopt(odd, "--yes")
    # A file this app migrated is simply migrated again.
    assert "nothing to adopt" in _adopt(migrated[0], "--yes")
