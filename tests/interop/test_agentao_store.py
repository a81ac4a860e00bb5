"""DjangoMemoryStore under Agentao's own MemoryManager and MemoryRetriever, against Agentao's store.

The same operations run on an Agentao ``MemoryManager`` over Agentao's own
``SQLiteMemoryStore`` files and over two ``DjangoMemoryStore`` namespaces on
the test database (SQLite or PostgreSQL, per pass); the transcripts —
records, search and tag results, recall order and scores, prompt blocks,
summaries, review queue, wipe result — must be equal.
"""

from __future__ import annotations

import datetime as dt
import inspect
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

agentao_memory = pytest.importorskip("agentao.memory")

from agentao.capabilities import MemoryStore  # noqa: E402
from agentao.memory import (  # noqa: E402
    MemoryManager,
    MemoryPromptRenderer,
    MemoryRetriever,
    SQLiteMemoryStore,
)
from agentao.memory.models import (  # noqa: E402
    MemoryRecord,
    MemoryReviewItem,
    SessionSummaryRecord,
)

from memoryapp import MemoryManager as AppManager  # noqa: E402
from memoryapp.agentao import DjangoMemoryStore  # noqa: E402
from memoryapp.interop.store import StoreDatabaseError, parse_iso  # noqa: E402
from memoryapp.models import Memory, MemoryEvent  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?$")

SAVES = [
    # key, value, tags, scope, type
    ("user_name", "Alice Smith, backend engineer in Berlin", ["profile"], None, None),
    ("Preferred editor", "Prefers Neovim with the LSP client enabled", ["preference"], None, None),
    (
        "Deploy target",
        "We deploy the web app to Kubernetes with Helm charts from deploy/chart.yaml",
        ["decision", "deployment"],
        None,
        None,
    ),
    (
        "Test command",
        "Run pytest -q from the repo root; the API tests live in tests/test_api.py",
        ["workflow", "testing"],
        None,
        None,
    ),
    ("No tabs", "Never use tabs for indentation in Python files", ["constraint"], None, None),
    ("DB engine", "PostgreSQL 15 in production, SQLite for local development", [], None, None),
    ("API version", "The public API is v3 and lives under /api/v3/", ["project_fact"], None, None),
    ("Release cadence", "Releases ship every second Tuesday after the demo", [], None, None),
    (
        "Frontend stack",
        "The frontend uses React with TypeScript in web/src/App.tsx",
        [],
        None,
        None,
    ),
    ("Timezone", "Alice works on Central European Time", [], "user", "profile"),
    ("Build tool", "The build uses make and the Makefile at the root", [], "project", "workflow"),
]
BAD_SAVES = [
    ("   ", "empty key", []),
    ("a\nb", "two-line key", []),
    ("empty", "   ", []),
    ("too long", "x" * 4001, []),
    ("api key", "the key is sk-abcdefghijklmnopqrstuvwxyz0123456789", []),
]
QUERIES = [
    ("kubernetes deploy", None, 5, False),
    ("how do I run the tests", ["edit tests/test_api.py please"], 5, False),
    ("editor preference neovim", None, 5, False),
    ("python indentation", None, 2, False),
    ("v3 api", None, 5, False),
    ("database postgresql production", None, 5, True),
    ("release", None, 5, False),
    ("nothing matches this", None, 5, False),
]
MESSAGES = [
    {"role": "user", "content": "I prefer dark mode in every editor."},
    {"role": "user", "content": "We decided to use Redis for caching sessions."},
    {"role": "assistant", "content": "I prefer to answer briefly."},
    {"role": "user", "content": [{"type": "text", "text": "Never commit directly to main."}]},
]


def _plain(record: MemoryRecord) -> dict:
    """A record without the values that differ between two runs (ids, clock readings)."""
    fields = dict(vars(record))
    for name in ("id", "created_at", "updated_at"):
        fields.pop(name)
    return fields


def _labels(records) -> list[str]:
    return [f"{r.scope}/{r.key_normalized}" for r in records]


def _check_timestamps(records) -> None:
    for r in records:
        assert ISO.match(r.created_at), r.created_at
        assert ISO.match(r.updated_at), r.updated_at
        assert r.created_at <= r.updated_at
        assert r.deleted_at is None


def run_scenario(mm: MemoryManager, *, server_ids: bool = False) -> dict:
    """Drive an Agentao MemoryManager through every protocol path; return its transcript.

    ``server_ids``: the store hands back ids of its own (the API's store endpoints draw
    every new row's id, docs/agentao.md) instead of keeping Agentao's 8 hex digits.
    """
    out: dict = {}
    retriever = MemoryRetriever(mm)
    renderer = MemoryPromptRenderer()
    label_of: dict[str, str] = {}

    def recall(query, hints, top_k, exclude_stable):
        for r in mm.get_all_entries():
            label_of[r.id] = f"{r.scope}/{r.key_normalized}"
        exclude = {r.id for r in mm.get_stable_entries()} if exclude_stable else None
        hits = retriever.recall_candidates(query, hints, top_k=top_k, exclude_ids=exclude)
        return [(label_of[h.memory_id], round(h.score, 3), h.reasons, h.excerpt) for h in hits]

    out["saves"] = [mm.save_from_tool(k, v, t, scope=s, type=ty) for k, v, t, s, ty in SAVES]
    out["bad_saves"] = [mm.save_from_tool(k, v, t) for k, v, t in BAD_SAVES]
    first = {r.key_normalized: r for r in mm.get_all_entries()}
    id_shape = r"[0-9a-f]{16}" if server_ids else r"[0-9a-f]{8}"
    assert all(re.fullmatch(id_shape, r.id) for r in first.values())
    _check_timestamps(first.values())

    out["recall_before_update"] = [recall(*q) for q in QUERIES]
    out["update"] = mm.save_from_tool(
        "deploy target", "We deploy to Kubernetes with Helm; staging first", ["decision"]
    )
    updated = mm.get_entry(first["deploy_target"].id)
    assert updated is not None
    assert updated.created_at == first["deploy_target"].created_at
    assert updated.updated_at > first["deploy_target"].updated_at
    out["updated"] = _plain(updated)

    out["all"] = [_plain(r) for r in mm.get_all_entries()]
    out["all_project"] = _labels(mm.get_all_entries("project"))
    out["all_user"] = _labels(mm.get_all_entries("user"))
    out["search"] = {
        q: _labels(mm.search(q)) for q in ("kubernetes", "PYTEST", "tests/", "alice", "zzz")
    }
    out["search_scoped"] = [_labels(mm.search("e", scope=s)) for s in ("user", "project")]
    out["tags"] = {t: _labels(mm.filter_by_tag(t)) for t in ("Decision", "testing", "nope")}
    out["tags_scoped"] = [
        _labels(mm.filter_by_tag("profile", scope=s)) for s in ("user", "project")
    ]
    out["recall"] = [recall(*q) for q in QUERIES]
    out["stable"] = _labels(mm.get_stable_entries())

    # Session summaries, across three sessions.
    out["archive_empty"] = mm.archive_session() is not None
    mm.save_session_summary("Session one: set up CI with GitHub Actions.", 1200, 14)
    mm.save_session_summary("Session one, later: added the deploy job.", 900, 8)
    out["archive_1"] = mm.archive_session() is not None
    mm.save_session_summary("Session two: migrated the database to PostgreSQL 15.", 1500, 20)
    out["recent"] = [s.summary_text for s in mm.get_recent_session_summaries()]
    out["archive_2"] = mm.archive_session("resumed-conversation") is not None
    out["tail"] = mm.get_cross_session_tail()
    mm.save_session_summary("Resumed: wrote the release notes.", 300, 4)
    mm.clear_session()  # the current session's summaries only
    out["summaries_after_clear_session"] = [
        (s.summary_text, s.tokens_before, s.messages_summarized)
        for s in mm.project_store.list_session_summaries()
    ]
    out["stable_block"] = renderer.render_stable_block(
        mm.get_stable_entries(), mm.get_cross_session_tail()
    )
    out["context_block"] = renderer.render_dynamic_block(
        retriever.recall_candidates("kubernetes helm deploy staging")
    )

    # Review queue: crystallize (one message per call: a batch shares one
    # timestamp, and Agentao's order among equal timestamps is whatever SQLite's
    # planner leaves), fold, approve one, reject one.
    first_items = [i for m in MESSAGES for i in mm.crystallize_user_messages([m])]
    folded = mm.crystallize_user_messages(MESSAGES[:1])
    assert folded[0].id in {i.id for i in first_items}
    review = lambda items: [  # noqa: E731
        (i.scope, i.type, i.key_normalized, i.title, i.content, i.tags, i.evidence)
        + (i.occurrences, i.confidence, i.status)
        for i in items
    ]
    out["review_pending"] = review(mm.list_review_items())
    out["review_batch"] = sorted(review(mm.crystallize_user_messages(MESSAGES[1:])))
    out["review_after_batch"] = review(mm.list_review_items())
    pending = {i.key_normalized: i for i in mm.list_review_items()}
    approved = mm.approve_review_item(pending["preference_dark_mode_in_every"].id)
    out["approved"] = _plain(approved)
    out["approve_again"] = mm.approve_review_item(pending["preference_dark_mode_in_every"].id)
    out["reject"] = mm.reject_review_item(pending["decision_use_redis_for_caching"].id)
    out["reject_again"] = mm.reject_review_item(pending["decision_use_redis_for_caching"].id)
    out["reject_missing"] = mm.reject_review_item("no-such-item")
    out["review_by_status"] = {
        s: review(mm.list_review_items(status=s)) for s in ("pending", "approved", "rejected")
    }
    out["review_all"] = review(mm.list_review_items(status=None))

    # Deletes.
    out["delete"] = mm.delete(first["release_cadence"].id)
    out["delete_again"] = mm.delete(first["release_cadence"].id)
    out["delete_by_title"] = mm.delete_by_title("FRONTEND STACK")
    out["recall_after_delete"] = [recall(*q) for q in QUERIES]
    out["all_after_delete"] = _labels(mm.get_all_entries())
    out["stable_after_delete"] = _labels(mm.get_stable_entries())

    # Clear one scope, then the seed's reset.
    out["clear_user"] = mm.clear("user")
    out["all_after_clear"] = _labels(mm.get_all_entries())
    mm.save_from_tool("After clear", "Saved after clearing the user scope", [])
    wipe = mm.wipe_all()
    out["wipe"] = (wipe.memories_cleared, wipe.summaries_cleared, wipe.not_cleared, wipe.ok)
    out["after_wipe"] = (
        mm.get_all_entries(),
        mm.project_store.list_session_summaries(),
        review(mm.list_review_items(status=None)),
        mm.get_cross_session_tail(),
        retriever.recall_candidates("kubernetes"),
    )
    out["problems"] = mm.take_store_problems()
    return out


@pytest.fixture
def fine_clock(monkeypatch):
    """Agentao's clocks at microsecond resolution, for both runs alike.

    Agentao stamps rows with whole seconds, so rows written within one second
    tie and its own store returns them in whatever order SQLite's sorter
    leaves ties — not an order two stores can be compared on. The comparison
    runs with the same finer clock on both sides; the unmodified clock is
    exercised by ``test_manager_works_unmodified``.
    """
    import agentao.memory.crystallizer as crystallizer
    import agentao.memory.manager as manager
    import agentao.memory.storage as storage

    def stamp() -> str:
        return dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S.%f")

    monkeypatch.setattr(manager, "_now", stamp)
    monkeypatch.setattr(storage, "_now_iso", stamp)
    monkeypatch.setattr(crystallizer, "_now_iso", stamp)


def _agentao_manager(tmp_path) -> MemoryManager:
    return MemoryManager(
        project_store=SQLiteMemoryStore(str(tmp_path / "project.db")),
        user_store=SQLiteMemoryStore(str(tmp_path / "user.db")),
    )


def _django_manager(project="acme/web", user="acme/alice") -> MemoryManager:
    return MemoryManager(
        project_store=DjangoMemoryStore(project), user_store=DjangoMemoryStore(user)
    )


@pytest.mark.django_db
def test_same_operations_same_results(tmp_path, fine_clock):
    reference = run_scenario(_agentao_manager(tmp_path))
    ours = run_scenario(_django_manager())
    assert set(ours) == set(reference)
    for key in reference:
        assert ours[key] == reference[key], key
    # The transcript is not vacuous.
    assert reference["wipe"] == (7, 3, (), True)
    assert reference["recall"][0] and reference["recall"][1]


@pytest.mark.django_db
def test_manager_works_unmodified():
    """Agentao's clock and code as shipped; the back office sees every row live."""
    mm = _django_manager()
    assert mm.save_from_tool("user_name", "Alice", ["profile"]) == "Saved memory: user_name"
    assert mm.save_from_tool("Deploy", "We deploy with Helm", ["decision"]) == (
        "Saved memory: deploy"
    )
    assert mm.save_from_tool("Deploy", "We deploy with Helm to staging first", ["decision"])
    app = AppManager(project="acme/web", user="acme/alice")
    rows = {m.key_normalized: m for m in app.get_all_entries()}
    assert set(rows) == {"user_name", "deploy"}
    assert (rows["user_name"].namespace, rows["user_name"].scope) == ("acme/alice", "user")
    assert rows["deploy"].content == "We deploy with Helm to staging first"
    events = MemoryEvent.objects.filter(memory_id=rows["deploy"].id)
    assert list(events.values_list("event_type", "actor")) == [
        ("create", "agentao"),
        ("update", "agentao"),
    ]
    # Agentao writes, our manager reads; our manager writes, Agentao recalls.
    app.upsert("Release day", "Releases ship on Tuesdays", tags=["process"])
    retriever = MemoryRetriever(mm)
    hits = retriever.recall_candidates("release tuesdays")
    assert [h.title for h in hits] == ["Release day"]
    mm.save_session_summary("first session", 100, 3)
    mm.archive_session()
    assert mm.get_cross_session_tail() == "first session"
    assert [s.summary_text for s in app.list_session_summaries()] == ["first session"]
    items = mm.crystallize_user_messages(MESSAGES)
    assert len(items) == 3
    assert len(app.list_review_items()) == 3
    result = mm.wipe_all()
    assert (result.memories_cleared, result.summaries_cleared, result.ok) == (3, 1, True)
    assert app.get_all_entries() == []
    assert Memory.objects.filter(namespace__in=["acme/web", "acme/alice"]).count() == 3


@pytest.mark.django_db
def test_store_round_trips_agentao_records():
    store = DjangoMemoryStore("ns/a")
    record = MemoryRecord(
        id="abcd1234",
        scope="project",
        type="decision",
        key_normalized="use_redis",
        title="Use Redis",
        content="Redis caches sessions",
        tags=["decision", "Cache", "缓存"],
        keywords=["redis", "sessions"],
        source="auto",
        confidence="auto_summary",
        sensitivity="sensitive",
        created_at="2026-01-02T03:04:05",
        updated_at="ignored",
    )
    saved = store.upsert_memory(record)
    assert isinstance(saved, MemoryRecord)
    assert saved.id == "abcd1234"
    assert saved.created_at == "2026-01-02T03:04:05"  # an import keeps its time
    assert ISO.match(saved.updated_at) and saved.updated_at > saved.created_at
    assert (saved.tags, saved.keywords) == (["decision", "Cache", "缓存"], ["redis", "sessions"])
    assert (saved.source, saved.confidence, saved.sensitivity) == (
        "auto",
        "auto_summary",
        "sensitive",
    )
    assert store.get_memory_by_id("abcd1234") == saved
    assert store.get_memory_by_scope_key("project", "use_redis") == saved
    assert store.get_memory_by_scope_key("user", "use_redis") is None
    row = Memory.objects.get(pk="abcd1234")
    assert (row.namespace, row.subject, row.tags) == ("ns/a", None, ["decision", "Cache", "缓存"])

    # Same (scope, key), another id: updates the live row in place.
    again = store.upsert_memory(
        MemoryRecord(
            id="ffff0000",
            scope="project",
            type="constraint",
            key_normalized="use_redis",
            title="Use Redis!",
            content="Redis caches sessions and rate limits",
            tags=[],
            keywords=["redis"],
        )
    )
    assert again.id == "abcd1234"
    assert again.created_at == saved.created_at
    assert again.updated_at > saved.updated_at
    assert (again.type, again.title, again.tags, again.sensitivity) == (
        "constraint",
        "Use Redis!",
        [],
        "normal",
    )
    assert Memory.objects.filter(namespace="ns/a").count() == 1


@pytest.mark.django_db
def test_copy_an_agentao_file_into_the_database(tmp_path):
    """The recipe of docs/agentao.md: Agentao's store read, DjangoMemoryStore written."""
    source = SQLiteMemoryStore(str(tmp_path / "memory.db"))
    base = {"type": "note", "title": "t", "tags": ["a"], "keywords": ["k"]}
    for i, day in enumerate((3, 5, 9)):
        stamp = f"2026-01-{day:02d}T10:00:00"
        source.upsert_memory(
            MemoryRecord(
                id=f"0000000{i}",
                scope="project",
                key_normalized=f"k{i}",
                content=f"fact {i}",
                created_at=stamp,
                **base,
            )
        )
        source.save_session_summary(
            SessionSummaryRecord(
                id=f"s{i}",
                session_id="old",
                summary_text=f"summary {i}",
                tokens_before=i,
                messages_summarized=i,
                created_at=stamp,
            )
        )
    target = DjangoMemoryStore("imported")
    for record in source.list_memories():
        target.upsert_memory(record)
    for summary in reversed(source.list_session_summaries(limit=-1)):
        target.save_session_summary(summary)

    def memories(store):
        return [(r.id, r.key_normalized, r.content, r.created_at) for r in store.list_memories()]

    def summaries(store):
        return [vars(s) for s in store.list_session_summaries()]

    assert memories(target) == memories(source)
    assert summaries(target) == summaries(source)


@pytest.mark.django_db
def test_soft_delete_semantics():
    store = DjangoMemoryStore("ns/del")
    mm = MemoryManager(project_store=store)
    mm.save_from_tool("note one", "first note about caching", ["x"])
    mm.save_from_tool("note two", "second note about caching", ["x"])
    one = store.get_memory_by_scope_key("project", "note_one")
    assert store.soft_delete_memory(one.id) is True
    assert store.soft_delete_memory(one.id) is False
    assert store.get_memory_by_id(one.id) is None
    assert store.get_memory_by_scope_key("project", "note_one") is None
    assert _labels(store.list_memories()) == ["project/note_two"]
    assert _labels(store.search_memories("caching")) == ["project/note_two"]
    assert _labels(store.filter_by_tag("X")) == ["project/note_two"]
    row = Memory.objects.get(pk=one.id)
    assert row.deleted_at is not None and row.content == "first note about caching"
    assert row.updated_at == row.deleted_at
    # The key is free again: a new row, a new id.
    mm.save_from_tool("note one", "first note, again", [])
    assert store.get_memory_by_scope_key("project", "note_one").id != one.id
    assert store.clear_memories("user") == 0
    assert store.clear_memories("") == 2  # Agentao: an empty scope means every scope
    assert store.list_memories() == []
    assert Memory.objects.filter(namespace="ns/del").count() == 3
    events = MemoryEvent.objects.filter(memory_id=one.id).values_list("event_type", flat=True)
    assert list(events) == ["create", "soft_delete"]


@pytest.mark.django_db
def test_namespaces_are_isolated():
    a, b = DjangoMemoryStore("tenant/a"), DjangoMemoryStore("tenant/b")
    ma, mb = MemoryManager(project_store=a), MemoryManager(project_store=b)
    ma.save_from_tool("shared key", "tenant a's value", ["t"])
    mb.save_from_tool("shared key", "tenant b's value", ["t"])
    ra = a.get_memory_by_scope_key("project", "shared_key")
    rb = b.get_memory_by_scope_key("project", "shared_key")
    assert ra.content == "tenant a's value" and rb.content == "tenant b's value"
    assert a.get_memory_by_id(rb.id) is None
    assert a.soft_delete_memory(rb.id) is False
    assert _labels(a.search_memories("value")) == ["project/shared_key"]
    assert [r.content for r in a.filter_by_tag("t")] == ["tenant a's value"]
    ma.save_session_summary("a's summary")
    assert b.list_session_summaries() == []
    assert b.clear_session_summaries() == 0
    assert a.clear_memories() == 1
    assert b.get_memory_by_id(rb.id) is not None


@pytest.mark.django_db
def test_agentao_ids_colliding_across_namespaces_get_fresh_ids():
    a, b = DjangoMemoryStore("tenant/a"), DjangoMemoryStore("tenant/b")
    base = {"scope": "project", "type": "note", "title": "t", "content": "c"}
    first = a.upsert_memory(MemoryRecord(id="00000001", key_normalized="k1", **base))
    second = b.upsert_memory(MemoryRecord(id="00000001", key_normalized="k2", **base))
    assert first.id == "00000001"
    assert second.id != "00000001" and b.get_memory_by_id(second.id).key_normalized == "k2"
    summary = {"session_id": "s", "summary_text": "x", "tokens_before": 1}
    a.save_session_summary(
        SessionSummaryRecord(id="s1", messages_summarized=0, created_at="", **summary)
    )
    b.save_session_summary(
        SessionSummaryRecord(id="s1", messages_summarized=0, created_at="", **summary)
    )
    assert len(a.list_session_summaries()) == len(b.list_session_summaries()) == 1
    item = {"scope": "project", "type": "decision", "title": "t", "content": "c"}
    a.upsert_review_item(MemoryReviewItem(id="r1", key_normalized="k", **item))
    other = b.upsert_review_item(MemoryReviewItem(id="r1", key_normalized="k", **item))
    assert other.id != "r1" and b.get_review_item(other.id) is not None
    assert a.get_review_item(other.id) is None


@pytest.mark.django_db
def test_review_queue_folding():
    store = DjangoMemoryStore("ns/review")
    base = {"scope": "user", "type": "preference", "key_normalized": "preference_dark_mode"}
    first = store.upsert_review_item(
        MemoryReviewItem(
            id="item1",
            title="Preference: dark mode",
            content="dark mode",
            tags=["preference"],
            evidence="I prefer dark mode",
            source_session="s1",
            occurrences=1,
            created_at="2026-01-01T00:00:00",
            **base,
        )
    )
    assert (first.id, first.occurrences, first.confidence, first.status) == (
        "item1",
        1,
        "auto_summary",
        "pending",
    )
    assert first.created_at == "2026-01-01T00:00:00"
    folded = store.upsert_review_item(
        MemoryReviewItem(
            id="item2",
            title="Preference: dark mode everywhere",
            content="dark mode everywhere",
            tags=["preference", "ui"],
            evidence="I prefer dark mode everywhere",
            source_session="s2",
            occurrences=0,  # counts as one
            type="profile",
            **{k: v for k, v in base.items() if k != "type"},
        )
    )
    assert folded.id == "item1"
    assert (folded.occurrences, folded.confidence, folded.type) == (2, "inferred", "profile")
    assert (folded.title, folded.content, folded.tags) == (
        "Preference: dark mode everywhere",
        "dark mode everywhere",
        ["preference", "ui"],
    )
    assert (folded.evidence, folded.source_session) == ("I prefer dark mode everywhere", "s2")
    assert folded.created_at == first.created_at and folded.updated_at > first.updated_at
    assert store.get_review_item("item2") is None
    # Decided items no longer fold: the same key starts a new pending row.
    assert store.update_review_status("item1", "approved") is True
    assert store.update_review_status("missing", "approved") is False
    fresh = store.upsert_review_item(
        MemoryReviewItem(id="item3", title="t", content="c", occurrences=3, **base)
    )
    assert (fresh.id, fresh.occurrences, fresh.status) == ("item3", 3, "pending")
    assert [i.id for i in store.list_review_items()] == ["item3"]
    assert [i.id for i in store.list_review_items("approved")] == ["item1"]
    assert [i.id for i in store.list_review_items(None)] == ["item3", "item1"]
    assert [i.id for i in store.list_review_items(None, limit=1)] == ["item3"]


@pytest.mark.django_db
def test_session_summaries_order_limit_and_clear():
    store = DjangoMemoryStore("ns/sum")
    for i, session in enumerate(["a", "a", "b", "c", "a"]):
        store.save_session_summary(
            SessionSummaryRecord(
                id=f"s{i}",
                session_id=session,
                summary_text=f"summary {i}",
                tokens_before=i * 10,
                messages_summarized=i,
                created_at=dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S"),
            )
        )
    listed = store.list_session_summaries()
    # Agentao's whole-second "now" stamps are refined: newest first, even within a second.
    assert [s.id for s in listed] == ["s4", "s3", "s2", "s1", "s0"]
    assert isinstance(listed[0], SessionSummaryRecord)
    assert (listed[0].tokens_before, listed[0].messages_summarized) == (40, 4)
    assert all(ISO.match(s.created_at) for s in listed)
    assert [s.id for s in store.list_session_summaries("a", limit=2)] == ["s4", "s1"]
    assert len(store.list_session_summaries(limit=-1)) == 5
    assert store.list_session_summaries(limit=0) == []
    assert store.clear_session_summaries("a") == 3  # that session only
    assert [s.session_id for s in store.list_session_summaries()] == ["c", "b"]
    assert store.clear_session_summaries() == 2
    assert store.list_session_summaries() == []


@pytest.mark.django_db
def test_search_is_literal_and_folds_every_script():
    """Two deliberate differences from Agentao's SQL LIKE (docs/agentao.md)."""
    store = DjangoMemoryStore("ns/search")
    mm = MemoryManager(project_store=store)
    mm.save_from_tool("discount", "Give 10% off to members", ["pricing"])
    mm.save_from_tool("drink", "The CAFÉ serves espresso", ["Café"])
    mm.save_from_tool("plain", "nothing special here", [])
    assert _labels(store.search_memories("%")) == ["project/discount"]
    assert _labels(store.search_memories("_")) == []  # keys are discount, drink, plain
    assert _labels(store.search_memories("café")) == ["project/drink"]
    assert _labels(store.filter_by_tag("CAFÉ")) == ["project/drink"]
    assert len(store.search_memories("")) == 3  # as Agentao: the empty query matches all
    assert _labels(store.search_memories('"')) == []


@pytest.mark.django_db
def test_change_version_sees_every_writer():
    store = DjangoMemoryStore("acme/web")
    mm = MemoryManager(project_store=store)
    retriever = MemoryRetriever(mm)
    mm.save_from_tool("ci", "CI runs on GitHub Actions", ["ci"])
    assert [h.title for h in retriever.recall_candidates("github actions")] == ["ci"]
    before = store.change_version()
    # Another writer of the same database: this app's own manager.
    AppManager(project="acme/web").upsert("Actions runners", "GitHub Actions uses large runners")
    assert store.change_version() > before
    titles = {h.title for h in retriever.recall_candidates("github actions")}
    assert titles == {"ci", "Actions runners"}
    before = store.change_version()
    Memory.objects.filter(namespace="acme/web", key_normalized="ci").update(content="CI moved")
    assert store.change_version() > before


def test_parse_iso():
    clock = dt.datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    assert parse_iso("", clock) is clock
    assert parse_iso(None, clock) is clock
    assert parse_iso("not a time", clock) is clock
    assert parse_iso("2026-05-01T12:00:01", clock) is clock  # Agentao's "now"
    assert parse_iso("2026-05-01T11:59:59", clock) is clock
    assert parse_iso("2026-05-01T11:00:00", clock) == dt.datetime(2026, 5, 1, 11, tzinfo=dt.UTC)
    exact = parse_iso("2026-05-01T12:00:00.5", clock)
    assert exact == dt.datetime(2026, 5, 1, 12, 0, 0, 500000, tzinfo=dt.UTC)
    aware = parse_iso("2026-05-01T14:00:00+02:00", clock)
    assert aware == dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
    naive_clock = clock.replace(tzinfo=None)  # USE_TZ = False
    assert parse_iso("2026-05-01T14:00:00+02:00", naive_clock) == dt.datetime(2026, 5, 1, 12)
    assert parse_iso("2026-05-01T12:00:00", naive_clock) is naive_clock


def assert_implements_the_protocol(store_class) -> None:
    """Every method of Agentao's ``MemoryStore`` (and the optional two), same signatures."""
    protocol = {
        name: member
        for name, member in vars(MemoryStore).items()
        if callable(member) and not name.startswith("_")
    }
    assert len(protocol) == 15
    for name, member in {**protocol, "change_version": None, "close": None}.items():
        ours = getattr(store_class, name)
        assert callable(ours), name
        if member is not None:
            theirs = inspect.signature(member).parameters
            mine = inspect.signature(ours).parameters
            assert list(mine) == list(theirs), name
            assert [p.default for p in mine.values()] == [p.default for p in theirs.values()]


def test_store_implements_the_whole_protocol():
    assert_implements_the_protocol(DjangoMemoryStore)


@pytest.mark.django_db
def test_database_errors_degrade_agentao_manager(extra_alias, tmp_path):
    """A store that cannot be read is reported by Agentao's manager, not raised into the turn."""
    alias = extra_alias(tmp_path / "no-tables.sqlite3")
    store = DjangoMemoryStore("", using=alias)
    with pytest.raises(StoreDatabaseError) as info:
        store.list_memories()
    assert isinstance(info.value, sqlite3.OperationalError)
    mm = MemoryManager(project_store=store)
    assert mm.get_all_entries() == []
    assert mm.get_cross_session_tail() == ""
    problems = mm.take_store_problems()
    assert len(problems) == 1 and "cannot be read" in problems[0]
    assert mm.save_from_tool("k", "v", []).startswith("Error saving memory:")
    store.close()
    store.close()


def test_core_app_imports_without_agentao():
    code = """
import sys
sys.modules["agentao"] = None  # any "import agentao..." now raises ImportError
import django
django.setup()
import memoryapp.facade, memoryapp.models, memoryapp.agentao, memoryapp.cli.interop
from django.core.management import call_command
from memoryapp.agentao import DjangoMemoryStore
from memoryapp.interop import records
DjangoMemoryStore("acme/web")
try:
    records.agentao_models()
except ImportError as exc:
    assert "memoryapp[agentao]" in str(exc), exc
    print("ok")
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
