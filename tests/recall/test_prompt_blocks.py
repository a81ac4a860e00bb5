"""Recall and prompt blocks via the facade (docs/behaviour.md §5): freshness, caching, exclusion."""

from __future__ import annotations

import datetime as dt
import logging
import random

import pytest

from memoryapp import MemoryManager
from memoryapp.models import Memory
from memoryapp.recall.cache import INDEXES
from memoryapp.rules import render as render_mod
from memoryapp.services.prompt import fact

pytestmark = pytest.mark.django_db

NOW = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "")


@pytest.fixture
def mm():
    return MemoryManager(project="acme/web", user="acme/alice")


def _raw_insert(raw_sql, mid, key, title, content, namespace="acme/web", type_="note"):
    raw_sql(
        "INSERT INTO memories (id, namespace, scope, type, key_normalized, title, content, "
        "tags_json, keywords_json, created_at, updated_at) "
        "VALUES (%s, %s, 'project', %s, %s, %s, %s, '[]', '[]', %s, %s)",
        [mid, namespace, type_, key, title, content, NOW, NOW],
    )


def test_recall_returns_candidates_with_excerpt_and_reasons(mm):
    m = mm.upsert("deploy checklist", "x" * 300 + " deploy with fabric", ["deploy"])
    mm.upsert("unrelated", "nothing to see")
    (hit,) = mm.recall("how do I deploy")
    assert hit.memory_id == m.id and hit.scope == "project" and hit.type == "note"
    assert hit.title == "deploy checklist" and hit.excerpt == m.content[:200]
    assert hit.reasons[:2] == ["tag_match", "title_overlap"] and hit.reasons[-1] == "explicit"
    assert hit.score > 0


def test_recall_empty_and_stopword_queries(mm):
    mm.upsert("deploy", "fabric")
    assert mm.recall("") == []
    assert mm.recall("the and of to") == []
    assert mm.recall("deploy", top_k=0) == []


def test_recall_spans_both_scopes_and_respects_top_k(mm):
    for i in range(4):
        mm.upsert(f"editor choice {i}", "the editor is vim")
        mm.upsert(f"user_editor {i}", "my editor is emacs")
    hits = mm.recall("editor", top_k=5)
    assert len(hits) == 5
    assert {h.scope for h in hits} == {"user", "project"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_raw_sql_insert_is_recalled_next_call_while_stable_block_is_unchanged(mm, raw_sql):
    mm.upsert("build tool", "we use make", ["decision"])
    block = mm.render_stable_block()
    assert "build tool" in block
    assert mm.recall("kubernetes") == []
    _raw_insert(raw_sql, "rawk8s", "k8s", "kubernetes cluster", "the kubernetes cluster is eks")
    assert [h.memory_id for h in mm.recall("kubernetes")] == ["rawk8s"]
    assert mm.render_stable_block() == block  # another writer never moves the stable block
    mm.upsert("another", "own write")
    assert mm.render_stable_block() != block or "another" not in mm.render_stable_block()


def test_stable_block_is_rebuilt_only_for_own_writes(mm):
    mm.upsert("rule one", "always lint", ["constraint"])
    first = mm.render_stable_block()
    MemoryManager(project="acme/web").upsert("rule two", "never force push", ["constraint"])
    assert mm.render_stable_block() == first
    mm.save_session_summary("a summary")  # an own write: the block is rebuilt
    rebuilt = mm.render_stable_block()
    assert "rule two" in rebuilt and "<session>" not in rebuilt  # own session not in the tail
    mm.archive_session()
    second = mm.render_stable_block()
    assert "rule two" in second and "<session>" in second and "a summary" in second


def test_context_block_excludes_exactly_what_the_stable_block_showed(mm):
    shown = mm.upsert("deploy rule", "deploy on tuesdays", ["constraint"])
    # a huge stable candidate that cannot fit the 2000-character budget
    big = mm.upsert(
        "deploy giant", "deploy big", ["decision", *(f"t{i:02d}" + "x" * 60 for i in range(40))]
    )
    block = mm.render_stable_block()
    assert "deploy rule" in block and "deploy giant" not in block
    context = mm.render_context_block("deploy")
    assert "deploy giant" in context and "deploy rule" not in context
    ids = [h.memory_id for h in mm.recall("deploy")]
    assert shown.id in ids and big.id in ids


def test_lazy_stable_block_equals_rendering_the_whole_selection(mm):
    for i in range(150):
        mm.upsert(f"user_pref {i}", f"value {i} " + "z" * (i % 7) * 30)
    for i in range(40):
        mm.upsert(f"note {i}", f"a note {i}")
    block = mm.render_stable_block()
    facts = [fact(m) for m in mm.get_stable_entries()]
    expected, _ = render_mod.render_stable_block(facts, mm.get_cross_session_tail())
    assert block == expected
    assert len(block) <= 2000
    notes = [m for m in mm.get_stable_entries() if m.type == "note" and m.scope == "project"]
    assert [m.key_normalized for m in notes] == ["note_37", "note_38", "note_39"]


def test_own_writes_update_the_index_without_a_rebuild(mm):
    mm.upsert("alpha", "first memory about rockets")
    assert mm.recall("rockets")
    builds = INDEXES.builds
    m = mm.upsert("beta", "second memory about rockets")
    assert m.id in [h.memory_id for h in mm.recall("rockets")]
    mm.delete(m.id)
    assert m.id not in [h.memory_id for h in mm.recall("rockets")]
    mm.clear()
    assert mm.recall("rockets") == []
    assert INDEXES.builds == builds


def test_a_write_in_another_namespace_does_not_rebuild(mm):
    mm.upsert("alpha", "rockets")
    mm.recall("rockets")
    builds, deltas = INDEXES.builds, INDEXES.deltas
    MemoryManager(project="globex").upsert("beta", "rockets too")
    assert [h.title for h in mm.recall("rockets")] == ["alpha"]
    # Not even a delta: A's slice counter did not move.
    assert (INDEXES.builds, INDEXES.deltas) == (builds, deltas)


def test_a_raw_write_in_another_namespace_costs_no_delta(mm, raw_sql):
    mm.upsert("alpha", "rockets")
    mm.recall("rockets")
    deltas = INDEXES.deltas
    _raw_insert(raw_sql, "rawb", "beta", "beta", "rockets", namespace="globex")
    assert [h.title for h in mm.recall("rockets")] == ["alpha"]
    assert INDEXES.deltas == deltas
    _raw_insert(raw_sql, "rawa", "gamma", "gamma", "rockets")
    assert {h.title for h in mm.recall("rockets")} == {"alpha", "gamma"}
    assert INDEXES.deltas == deltas + 1


def test_a_delta_re_tokenises_only_rows_that_changed(mm, raw_sql, monkeypatch):
    from memoryapp.recall.core.index import RecallIndex

    for i in range(3):
        mm.upsert(f"rockets {i}", "rockets")  # all inside the delta slack
    assert len(mm.recall("rockets")) == 3
    added = []
    real_add = RecallIndex.add
    monkeypatch.setattr(RecallIndex, "add", lambda self, r: (added.append(r.id), real_add(self, r)))
    _raw_insert(raw_sql, "rawc", "rockets raw", "rockets raw", "rockets")
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)).replace(tzinfo=None)
    first = Memory.objects.get(key_normalized="rockets_0")
    raw_sql(
        "UPDATE memories SET content = 'rockets changed', updated_at = %s WHERE id = %s",
        [later.isoformat(timespec="microseconds"), first.id],
    )
    hits = mm.recall("rockets changed")
    assert sorted(added) == sorted(["rawc", first.id])
    assert hits[0].memory_id == first.id and hits[0].excerpt == "rockets changed"


def test_hard_deletes_by_others_are_noticed(mm, raw_sql):
    a = mm.upsert("alpha", "rockets")
    mm.upsert("beta", "rockets")
    assert len(mm.recall("rockets")) == 2
    raw_sql("DELETE FROM memories WHERE id = %s", [a.id])
    assert [h.title for h in mm.recall("rockets")] == ["beta"]
    # The erased row's tokens left this process's index at once (a compaction).
    index = INDEXES._entries["default", "acme/web", "project"].index
    assert "alpha" not in index._postings and "beta" in index._postings


def test_auto_cap_removals_leave_the_index(mm):
    for i in range(51):
        mm.upsert(f"auto rockets {i}", "rockets", source="auto")
        if i == 0:
            mm.recall("rockets")
    ids = {h.memory_id for h in mm.recall("rockets", top_k=100)}
    assert len(ids) == 50
    assert Memory.objects.get(key_normalized="auto_rockets_0").id not in ids


def test_recall_failure_returns_empty_and_warns(mm, monkeypatch, caplog):
    mm.upsert("alpha", "rockets")

    def boom(*args, **kwargs):
        raise RuntimeError("index exploded")

    monkeypatch.setattr(INDEXES, "get", boom)
    caplog.set_level(logging.WARNING, logger="memoryapp")
    assert mm.recall("rockets") == []
    assert "recall failed" in caplog.text


@pytest.mark.django_db(databases=["default", "memoryapp_ephemeral"])
def test_child_blocks_are_empty(mm):
    mm.upsert("rule", "always lint", ["constraint"])
    kid = mm.child()
    assert kid.recall("lint") == [] and kid.render_stable_block() == ""
    assert kid.render_context_block("lint") == ""


def test_a_delta_reads_only_rows_changed_since_the_last_sync(mm, raw_sql, monkeypatch):
    for i in range(3):
        mm.upsert(f"rockets {i}", "rockets")
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).replace(tzinfo=None)
    raw_sql("UPDATE memories SET updated_at = %s", [old.isoformat(timespec="microseconds")])
    assert len(mm.recall("rockets")) == 3  # first recall: a build
    added = []
    from memoryapp.recall.core.index import RecallIndex

    real_add = RecallIndex.add
    monkeypatch.setattr(RecallIndex, "add", lambda self, r: (added.append(r.id), real_add(self, r)))
    other = MemoryManager(project="globex")
    for i in range(3):
        other.upsert(f"b {i}", "elsewhere")
        assert len(mm.recall("rockets")) == 3
    assert added == []  # nothing of A was re-read, though B's writes moved the counter


def _whole_selection_block(mm) -> str:
    """The stable block rendered from every stable entry at once (no lazy reads)."""
    facts = [fact(m) for m in mm.get_stable_entries()]
    return render_mod.render_stable_block(facts, mm.get_cross_session_tail())[0]


def test_stable_block_filtered_reads_equal_rendering_the_whole_selection(mm):
    """Newest facts that leave a remainder no recent fact fits: an old small one still shows."""
    for i in range(6):
        mm.upsert(f"user_pref tiny {i}", f"t{i}")
    for i in range(140):
        mm.upsert(f"user_pref big {i:03d} " + "k" * 40, "v" * 300, ["x" * 30])
    block = mm.render_stable_block()
    assert block == _whole_selection_block(mm)
    assert "user_pref_tiny_5" in block and "user_pref_big_139" in block
    assert "user_pref_big_000" not in block


def test_fresh_managers_share_the_rendered_stable_block_until_a_slice_changes(mm, raw_sql):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    mm.upsert("user_pref editor", "vim")
    mm.upsert("deploy rule", "ship on fridays", ["constraint"])
    first = MemoryManager(project="acme/web", user="acme/alice").render_stable_block()
    with CaptureQueriesContext(connection) as queries:
        again = MemoryManager(project="acme/web", user="acme/alice").render_stable_block()
    assert again == first
    # The summaries (for the tail) and one counter read: no memory rows selected.
    assert not any('FROM "memories"' in q["sql"] for q in queries.captured_queries)
    assert len(queries.captured_queries) == 2
    old = MemoryManager(project="acme/web", user="acme/alice")
    assert old.render_stable_block() == first
    raw_sql(
        "INSERT INTO memories (id, namespace, scope, type, key_normalized, title, content, "
        "tags_json, keywords_json, created_at, updated_at) "
        "VALUES ('rawrule', 'acme/web', 'project', 'constraint', 'raw_rule', 'raw rule', "
        "'no deploys at night', '[]', '[]', %s, %s)",
        [NOW, NOW],
    )
    fresh = MemoryManager(project="acme/web", user="acme/alice").render_stable_block()
    assert "raw_rule" in fresh and "raw_rule" not in old.render_stable_block()
    # Another namespace's write leaves the shared block of this one in place.
    MemoryManager(project="globex").upsert("their rule", "x", ["constraint"])
    with CaptureQueriesContext(connection) as queries:
        MemoryManager(project="acme/web", user="acme/alice").render_stable_block()
    assert not any('FROM "memories"' in q["sql"] for q in queries.captured_queries)


def test_the_shared_stable_block_follows_the_sessions_tail(mm):
    mm.upsert("deploy rule", "ship on fridays", ["constraint"])
    MemoryManager(project="acme/web", session_id="s1").save_session_summary("first session", 10, 2)
    in_s1 = MemoryManager(project="acme/web", session_id="s1").render_stable_block()
    in_s2 = MemoryManager(project="acme/web", session_id="s2").render_stable_block()
    assert "first session" not in in_s1 and "first session" in in_s2


def test_project_stable_block_filtered_reads_equal_rendering_the_whole_selection():
    mm = MemoryManager(project="acme/web")
    for i in range(4):
        mm.upsert(f"tiny rule {i}", f"r{i}", ["constraint"])
    mm.upsert("old note", "n")  # a note: shown only while among the 3 most recent
    for i in range(140):
        kind = ("decision", "workflow", "preference")[i % 3]
        mm.upsert(f"big {kind} {i:03d} " + "k" * 20, "v" * 300, [kind, "x" * 30])
    for i in range(2):
        mm.upsert(f"fresh note {i}", "short")
    block = MemoryManager(project="acme/web").render_stable_block()
    assert block == _whole_selection_block(mm)
    # The newest big facts leave a remainder only an old tiny rule fits.
    assert "tiny_rule_3" in block and "fresh_note_1" in block
    assert "big_decision_000" not in block


def test_a_change_that_keeps_updated_at_is_still_recalled(mm, raw_sql):
    """Agentao stamps in whole seconds and raw SQL may not touch updated_at at all."""
    m = mm.upsert("k1", "alpha apple")
    assert [h.memory_id for h in mm.recall("apple")] == [m.id]
    raw_sql(
        "UPDATE memories SET content = 'zebra zulu', title = 'zebra', "
        'keywords_json = \'["zebra", "zulu"]\' WHERE id = %s',
        [m.id],
    )
    assert [h.memory_id for h in MemoryManager(project="acme/web").recall("zebra")] == [m.id]
    assert MemoryManager(project="acme/web").recall("apple") == []


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_write_leaves_neither_the_index_nor_the_shared_block_stale(raw_sql):
    from django.db import transaction

    mm = MemoryManager(project="p")
    kept = mm.upsert("cherry rule", "cherry pie on fridays", ["decision"])
    # Older than any delta's window: only the rolled-back write can bring it back.
    hour_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).replace(tzinfo=None)
    raw_sql(
        "UPDATE memories SET updated_at = %s WHERE id = %s",
        [hour_ago.isoformat(timespec="microseconds"), kept.id],
    )
    assert [h.memory_id for h in mm.recall("cherry")] == [kept.id]
    with pytest.raises(RuntimeError), transaction.atomic():
        phantom = mm.upsert("phantom rule", "cherry phantom decision", ["decision"])
        mm.upsert("cherry rule", "cherry tart instead", ["decision"])
        assert {h.memory_id for h in mm.recall("cherry")} == {kept.id, phantom.id}
        assert "phantom" in MemoryManager(project="p").render_stable_block()
        raise RuntimeError("roll back")
    fresh = MemoryManager(project="p")
    assert [h.memory_id for h in fresh.recall("cherry")] == [kept.id]
    assert fresh.recall("cherry")[0].excerpt == "cherry pie on fridays"
    assert fresh.recall("tart") == []
    block = fresh.render_stable_block()
    assert "phantom" not in block and "cherry pie on fridays" in block


def test_the_compiled_stable_read_returns_what_the_queryset_does():
    """The stable block's first reads run a statement compiled once per shape; for every
    namespace it gives the rows the queryset gives (namespaces swapped in, not cached)."""
    from memoryapp.services import prompt

    rng = random.Random(11)
    kinds = ["note", "decision", "constraint", "project_fact", "workflow", "preference"]
    for t in range(3):
        mm = MemoryManager(project=f"tenant{t}/web", user=f"tenant{t}/bob")
        for i in range(40 + 20 * t):
            kind = rng.choice(kinds)
            mm.upsert(f"{kind} {t} {i}", f"{kind} text {i} of tenant {t}", type=kind)
    for t in range(3):
        for user in (None, f"tenant{t}/bob"):
            stores = MemoryManager(project=f"tenant{t}/web", user=user)._stores()
            for limit in (prompt.FIRST_BATCH, 4 * prompt.FIRST_BATCH):
                compiled = prompt._newest_stable_facts(stores, limit)
                expected = prompt._newest_facts(prompt._stable_querysets(stores), limit)
                assert compiled == expected and compiled
                assert all(f.content.endswith(f"of tenant {t}") for f in compiled)
