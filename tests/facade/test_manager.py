"""The facade: writes, reads, deletes, wipe, summaries, isolation (docs/behaviour.md §2–§4, §10)."""

from __future__ import annotations

import json
import logging

import pytest

from memoryapp import MemoryManager, SensitiveMemoryError
from memoryapp.models import Memory, MemoryEvent, SessionSummary
from memoryapp.rules.errors import MemoryValidationError

pytestmark = pytest.mark.django_db


@pytest.fixture
def mm():
    return MemoryManager(project="acme/web", user="acme/alice")


# ------------------------------------------------------------------ upsert
def test_upsert_fills_in_the_guarded_fields(mm):
    m = mm.upsert("  Build Command ", "Run `make test` before pushing src/app/main.py", ["CI"])
    assert m.key_normalized == "build_command"
    assert m.title == "Build Command"
    assert m.scope == "project" and m.type == "note"
    assert m.source == "explicit" and m.confidence == "explicit_user"
    assert m.namespace == "acme/web" and m.subject == "acme/alice"
    assert "src/app/main.py" in m.keywords and "ci" in m.keywords
    assert m.tags == ["CI"]


def test_same_key_updates_in_place(mm):
    first = mm.upsert("Deploy target", "staging")
    second = mm.upsert("deploy   TARGET", "production")
    assert second.id == first.id
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert Memory.objects.filter(key_normalized="deploy_target").count() == 1
    assert Memory.objects.get(pk=first.id).content == "production"
    events = list(
        MemoryEvent.objects.filter(memory_id=first.id).values_list("event_type", flat=True)
    )
    assert events == ["create", "update"]


def test_events_never_hold_the_content(mm):
    m = mm.upsert("favourite colour", "ultramarine-marker-7731")
    mm.delete(m.id)
    for e in MemoryEvent.objects.filter(memory_id=m.id):
        assert "ultramarine" not in (e.detail or "")
        assert "favourite" not in (e.detail or "")


def test_scope_and_type_inference(mm):
    assert mm.upsert("user_name", "Alice").scope == "user"
    assert mm.upsert("editor", "vim", ["Preference"]).scope == "user"
    pref = mm.upsert("editor", "vim", ["Preference"])
    assert pref.type == "preference"
    assert mm.upsert("ship it", "on fridays", ["decision", "workflow"]).type == "workflow"
    assert mm.upsert("user_x", "y", scope="project").scope == "project"


def test_invalid_and_sensitive_input_raise(mm):
    with pytest.raises(MemoryValidationError):
        mm.upsert("!!!", "value")
    with pytest.raises(MemoryValidationError):
        mm.upsert("k", "   ")
    with pytest.raises(SensitiveMemoryError):
        mm.upsert("k", "my key is sk-abcdefghijklmnopqrstuvwxyz123456")
    assert not Memory.objects.exists()


def test_save_memory_never_raises_and_reports(mm):
    assert mm.save_memory("Hello World!!", "hi") == "Saved memory: hello_world"
    assert mm.save_memory("k", "password=hunter2hunter2") == (
        "Refused to save: content appears to contain sensitive credentials"
    )
    assert (
        mm.save_memory("   ", "x") == "Error saving memory: Memory key is empty after normalization"
    )
    assert (
        mm.save_memory("a\nb", "x") == "Error saving memory: Memory key/title must be single-line"
    )
    assert mm.save_memory("k", "") == "Error saving memory: Memory content is empty"
    assert mm.save_memory("k", "x" * 4001) == (
        "Error saving memory: Memory content exceeds max length (4001 > 4000)"
    )


def test_refused_secret_is_not_stored_or_logged(mm, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "ghp_" + "A" * 40
    mm.save_memory("token", f"use {secret}")
    assert secret not in caplog.text
    assert not Memory.objects.filter(content__contains=secret).exists()


def test_auto_source_is_capped_at_50_per_scope(mm):
    for i in range(53):
        mm.upsert(f"auto {i}", f"value {i}", source="auto")
    live = Memory.objects.live().filter(source="auto", namespace="acme/web")
    assert live.count() == 50
    assert not live.filter(key_normalized__in=["auto_0", "auto_1", "auto_2"]).exists()
    assert Memory.objects.deleted().filter(key_normalized="auto_0").exists()
    # explicit memories are not counted against the cap
    mm.upsert("explicit one", "kept")
    assert Memory.objects.live().filter(key_normalized="explicit_one").exists()
    assert mm.upsert("auto x", "v", source="auto").confidence == "auto_summary"


def test_user_scope_without_user_store_lands_in_project(caplog):
    mm = MemoryManager(project="p")
    caplog.set_level(logging.DEBUG, logger="memoryapp")
    m = mm.upsert("pet", "secret-cat-name-Biscuit", scope="user")
    assert m.scope == "project" and m.namespace == "p"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    caplog.clear()
    m2 = mm.upsert("user_pet", "another-Biscuit")
    assert m2.scope == "project"
    assert [r.levelno for r in caplog.records if r.name.startswith("memoryapp")] == [logging.DEBUG]
    for text in ("pet", "Biscuit"):
        assert text not in caplog.text.replace("project", "")


def test_objects_upsert_entry_point():
    m = Memory.objects.upsert("Hello World", "v", namespace="ns1")
    again = Memory.objects.upsert("hello world", "w", namespace="ns1")
    assert m.id == again.id and again.content == "w"


# ------------------------------------------------------------------- reads
def test_get_all_entries_orders_by_created_at_across_scopes(mm):
    a = mm.upsert("a", "1")
    b = mm.upsert("user_b", "2")
    c = mm.upsert("c", "3")
    assert [m.id for m in mm.get_all_entries()] == [a.id, b.id, c.id]
    assert [m.id for m in mm.get_all_entries("user")] == [b.id]
    assert [m.id for m in mm.get_all_entries("project")] == [a.id, c.id]
    with pytest.raises(MemoryValidationError):
        mm.get_all_entries("global")


def test_search_is_literal_and_case_insensitive(mm):
    mm.upsert("Percent", "growth was 50% this quarter")
    mm.upsert("Under score", "snake_case names")
    mm.upsert("Café", "order a CAFÉ au lait", ["Boisson"])
    mm.upsert("plain", "nothing special")
    assert [m.key_normalized for m in mm.search("%")] == ["percent"]
    assert {m.key_normalized for m in mm.search("_")} == {"under_score"}
    assert [m.key_normalized for m in mm.search("café AU")] == ["café"]
    assert [m.key_normalized for m in mm.search("boisson")] == ["café"]
    assert mm.search("") == []


def test_search_matches_keys_tags_and_keywords(mm):
    mm.upsert("deploy notes", "see src/app/main.py", ["infra"])
    assert len(mm.search("deploy_notes")) == 1
    assert len(mm.search("INFRA")) == 1
    assert len(mm.search("main.py")) == 1
    assert mm.search('", "') == []


def test_filter_by_tag_is_exact_case_insensitive(mm):
    mm.upsert("one", "x", ["Infra", "ci"])
    mm.upsert("two", "y", ["infrastructure"])
    mm.upsert("three", "z", ["用户"])
    assert [m.key_normalized for m in mm.filter_by_tag("infra")] == ["one"]
    assert [m.key_normalized for m in mm.filter_by_tag("用户")] == ["three"]
    assert mm.filter_by_tag("infra", scope="user") == []


def test_get_entry_respects_namespace(mm):
    m = mm.upsert("k", "v")
    assert mm.get_entry(m.id).id == m.id
    assert MemoryManager(project="other").get_entry(m.id) is None


# ---------------------------------------------------------- delete, clear
def test_delete_is_soft(mm):
    m = mm.upsert("k", "v")
    assert mm.delete(m.id) is True
    assert mm.delete(m.id) is False
    row = Memory.objects.get(pk=m.id)
    assert row.deleted_at is not None and row.content == "v"
    assert mm.get_all_entries() == []
    assert MemoryEvent.objects.filter(memory_id=m.id, event_type="soft_delete").count() == 1


def test_delete_by_title(mm):
    mm.upsert("Same Title", "1")
    mm.upsert("user_same", "2")
    mm.upsert("other", "3")
    Memory.objects.filter(key_normalized="user_same").update(title="same title")
    assert mm.delete_by_title("SAME TITLE") == 2
    assert [m.key_normalized for m in mm.get_all_entries()] == ["other"]


def test_clear_by_scope(mm):
    mm.upsert("a", "1")
    mm.upsert("user_b", "2")
    assert mm.clear("user") == 1
    assert [m.key_normalized for m in mm.get_all_entries()] == ["a"]
    assert mm.clear() == 1
    assert Memory.objects.deleted().count() == 2


# ---------------------------------------------------------------- wipe_all
def test_wipe_all_reports_counts_and_ok(mm):
    mm.upsert("a", "1")
    mm.upsert("user_b", "2")
    mm.save_session_summary("summary one", 100, 10)
    mm.save_session_summary("summary two", 100, 10)
    other = MemoryManager(project="other")
    other.upsert("keep", "me")
    other.save_session_summary("other summary")
    result = mm.wipe_all()
    assert (result.memories_cleared, result.summaries_cleared) == (2, 2)
    assert result.not_cleared == () and result.ok is True
    assert SessionSummary.objects.filter(namespace="acme/web").count() == 0
    assert [m.key_normalized for m in other.get_all_entries()] == ["keep"]
    assert SessionSummary.objects.filter(namespace="other").count() == 1
    # not erasure: the rows and their content remain
    assert Memory.objects.deleted().filter(namespace__in=["acme/web", "acme/alice"]).count() == 2


def test_wipe_all_reports_a_failed_summary_delete(mm, monkeypatch):
    mm.upsert("a", "1")
    mm.save_session_summary("summary")

    def boom(self):
        raise RuntimeError("disk full")

    monkeypatch.setattr(MemoryManager, "_delete_summaries", boom)
    result = mm.wipe_all()
    assert result.ok is False
    assert result.not_cleared == ("session summaries",)
    assert result.memories_cleared == 1 and result.summaries_cleared == 0


def test_wipe_all_reads_back_summaries_a_trigger_kept(mm, raw_sql):
    """A delete that reports success but leaves rows is caught by the read-back."""
    from django.db import connection

    mm.save_session_summary("kept by a trigger")
    if connection.vendor == "sqlite":
        raw_sql(
            "CREATE TRIGGER keep_summaries BEFORE DELETE ON session_summaries "
            "BEGIN SELECT RAISE(IGNORE); END"
        )
    else:
        raw_sql(
            "CREATE FUNCTION keep_rows() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RETURN NULL; END; $$"
        )
        raw_sql(
            "CREATE TRIGGER keep_summaries BEFORE DELETE ON session_summaries "
            "FOR EACH ROW EXECUTE FUNCTION keep_rows()"
        )
    result = mm.wipe_all()
    assert result.not_cleared == ("session summaries",) and not result.ok


def test_wipe_all_reports_failed_memories(mm, monkeypatch):
    from django.db import DatabaseError

    def boom(*args, **kwargs):
        raise DatabaseError("locked")

    monkeypatch.setattr("memoryapp.writes.store.clear", boom)
    result = mm.wipe_all()
    assert "memories" in result.not_cleared and not result.ok


def test_wipe_all_leaves_the_review_queue(mm):
    from memoryapp.models import ReviewItem

    ReviewItem.objects.create(
        namespace="acme/web",
        scope="project",
        type="decision",
        key_normalized="k",
        title="t",
        content="c",
    )
    mm.wipe_all()
    assert ReviewItem.objects.count() == 1


# --------------------------------------------------------- session summaries
def test_save_session_summary_carries_namespace_and_subject(mm):
    row = mm.save_session_summary("we did things", 1200, 30)
    assert (row.namespace, row.subject, row.session_id) == ("acme/web", "acme/alice", mm.session_id)
    assert (row.tokens_before, row.messages_summarized) == (1200, 30)
    assert mm.save_session_summary("") is None


def test_archive_session(mm):
    first = mm.session_id
    assert mm.archive_session() is None  # no summaries yet
    second = mm.session_id
    assert second != first and len(second) >= 8
    mm.save_session_summary("s")
    assert mm.archive_session("resumed-id") == second
    assert mm.session_id == "resumed-id"
    assert mm.archive_session("") is None
    assert mm.session_id not in ("", "resumed-id")


def _summary(mm, session, text):
    mm.session_id = session
    mm.save_session_summary(text)


def test_cross_session_tail_takes_the_latest_three_other_sessions(mm):
    for i in range(5):
        _summary(mm, f"s{i}", f"summary {i}")
    _summary(mm, "current", "mine")
    mm.session_id = "current"
    assert mm.get_cross_session_tail() == "summary 2\n\n---\n\nsummary 3\n\n---\n\nsummary 4"


def test_cross_session_tail_cuts_to_800_after_a_newline(mm):
    _summary(mm, "old", "A" * 500 + "\nfirst line\n" + "B" * 700)
    mm.session_id = "now"
    tail = mm.get_cross_session_tail()
    assert tail == ("first line\n" + "B" * 700).strip()
    assert len(tail) <= 800


def test_cross_session_tail_empty(mm):
    assert mm.get_cross_session_tail() == ""
    _summary(mm, "only", "mine")
    assert mm.get_cross_session_tail() == ""


def test_cross_session_tail_looks_at_the_latest_ten_only(mm):
    _summary(mm, "other", "too old")
    for i in range(10):
        _summary(mm, "current", f"mine {i}")
    assert mm.get_cross_session_tail() == ""


# ---------------------------------------------------------------- versions
def test_write_version_and_change_version(mm):
    v0, c0 = mm.write_version, mm.change_version()
    mm.upsert("k", "v")
    assert mm.write_version == v0 + 1
    assert mm.change_version() > c0
    other = MemoryManager(project="elsewhere")
    c1 = mm.change_version()
    other.upsert("k", "v")
    assert mm.change_version() > c1
    assert mm.write_version == v0 + 1


# -------------------------------------------------------------- isolation
def test_namespaces_never_leak():
    a = MemoryManager(project="A", user="X")
    b = MemoryManager(project="B", user="Y")
    a.upsert("shared key", "from A")
    a.upsert("user_pref", "from X")
    b.upsert("shared key", "from B")
    b.upsert("user_pref", "from Y")
    assert {m.content for m in a.get_all_entries()} == {"from A", "from X"}
    assert {m.content for m in a.search("from")} == {"from A", "from X"}
    assert {m.content for m in b.filter_by_tag("nothing")} == set()
    assert a.clear() == 2
    assert {m.content for m in b.get_all_entries()} == {"from B", "from Y"}
    assert a.delete(b.get_all_entries()[0].id) is False
    assert a.delete_by_title("shared key") == 0
    # same user key, other project: the user scope is shared, the project is not
    c = MemoryManager(project="C", user="Y")
    assert {m.content for m in c.get_all_entries()} == {"from Y"}


def test_event_detail_is_json(mm):
    m = mm.upsert("k", "v", ["t"])
    e = MemoryEvent.objects.get(memory_id=m.id, event_type="create")
    assert json.loads(e.detail) == {"scope": "project", "source": "explicit", "type": "note"}
    assert e.namespace == "acme/web"


def test_a_session_without_user_keeps_the_rows_provenance():
    first = MemoryManager(project="p", user="alice").upsert("shared fact", "v1")
    again = MemoryManager(project="p").upsert("shared fact", "v2")
    assert again.id == first.id and again.subject == "alice"
    bob = MemoryManager(project="p", user="bob").upsert("shared fact", "v3")
    assert bob.subject == "bob"


def test_upsert_result_tells_created_from_updated(mm):
    assert mm.upsert_result("k", "v").created is True
    assert mm.upsert_result("k", "w").created is False
