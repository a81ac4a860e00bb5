"""Recall, session summaries, wipe-all, store problems and the audit log over the API."""

from __future__ import annotations

import re

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import Memory, SessionSummary

pytestmark = pytest.mark.django_db


@pytest.fixture
def mm():
    return MemoryManager(project="acme/web", user="acme/alice")


# ------------------------------------------------------------------ recall
def test_recall_returns_candidates_and_both_blocks(acme, mm):
    hit = mm.upsert("deploy target", "staging cluster in eu-west", ["deploy"])
    for i in range(4):  # notes beyond the stable block's three newest
        mm.upsert(f"note {i}", f"unrelated fact number {i}")
    mm.upsert("editor", "vim", ["preference"])
    body = {
        "project": "acme/web",
        "user": "acme/alice",
        "query": "where do we deploy?",
        "messages": [{"role": "user", "content": "see deploy/config.yaml"}],
        "top_k": 3,
    }
    r = acme.post("/api/recall/", body, format="json")
    assert r.status_code == 200, r.content
    out = r.json()
    assert out["candidates"][0]["memory_id"] == hit.id
    first = out["candidates"][0]
    assert set(first) == {"memory_id", "scope", "type", "title", "excerpt", "score", "reasons"}
    assert first["excerpt"] == hit.content[:200] and "tag_match" in first["reasons"]
    assert len(out["candidates"]) <= 3
    assert out["stable_block"].startswith("<memory-stable>")
    assert "key: editor" in out["stable_block"]
    assert out["context_block"] == mm.render_context_block(body["query"], body["messages"])


def test_recall_with_nothing_to_find(acme):
    r = acme.post("/api/recall/", {"project": "acme/web", "query": ""}, format="json")
    assert r.json() == {"candidates": [], "stable_block": "", "context_block": ""}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"project": "acme/web"}, "query"),
        ({"project": "acme/web", "query": "q", "top_k": 0}, "top_k"),
        ({"project": "acme/web", "query": "q", "top_k": 51}, "top_k"),
        ({"project": "acme/web", "query": "q", "top_k": "many"}, "top_k"),
        ({"project": "acme/web", "query": "q", "messages": [{}]}, "messages"),
        ({"query": "q"}, "namespace"),  # or its deprecated alias, project
    ],
)
def test_recall_input_errors(acme, body, field):
    r = acme.post("/api/recall/", body, format="json")
    assert r.status_code == 400 and field in r.json()


def test_recall_only_in_granted_namespaces(mm):
    mm.upsert("deploy target", "staging", ["deploy"])
    other = token_client("globex-app", ["globex/"], write=True)
    body = {"project": "acme/web", "query": "deploy"}
    assert other.post("/api/recall/", body, format="json").status_code == 404
    writer = token_client("writer", ["acme/"], write=False)
    assert writer.post("/api/recall/", body, format="json").status_code == 200


# -------------------------------------------------------- session summaries
def test_save_and_list_session_summaries(acme):
    body = {
        "project": "acme/web",
        "user": "acme/alice",
        "session_id": "sess-1",
        "summary": "  We set up CI.  ",
        "tokens_before": 12000,
        "messages_summarized": 40,
    }
    r = acme.post("/api/session-summaries/", body, format="json")
    assert r.status_code == 201, r.content
    out = r.json()
    assert out["summary_text"] == "We set up CI." and out["session_id"] == "sess-1"
    assert (out["namespace"], out["subject"]) == ("acme/web", "acme/alice")
    acme.post("/api/session-summaries/", {**body, "session_id": "sess-2"}, format="json")
    assert acme.get("/api/session-summaries/").json()["count"] == 2
    listed = acme.get("/api/session-summaries/", {"session_id": "sess-2"}).json()
    assert [s["session_id"] for s in listed["results"]] == ["sess-2"]
    assert acme.get("/api/session-summaries/", {"namespace": "acme/web"}).json()["count"] == 2
    assert acme.get("/api/session-summaries/", {"namespace": "globex/x"}).status_code == 404


@pytest.mark.parametrize("given", [{}, {"session_id": None}])
def test_a_summary_without_a_session_gets_a_new_one_as_in_python(acme, given):
    body = {"project": "acme/web", "summary": "We set up CI.", **given}
    first = acme.post("/api/session-summaries/", body, format="json")
    second = acme.post("/api/session-summaries/", body, format="json")
    assert first.status_code == second.status_code == 201, first.content
    made = [first.json()["session_id"], second.json()["session_id"]]
    python = MemoryManager(project="acme/web").session_id
    assert all(re.fullmatch(r"[0-9a-f]{12}", s) for s in [*made, python])
    assert made[0] != made[1]  # a new session each time, as each new MemoryManager
    rows = SessionSummary.objects.order_by("created_at")
    assert list(rows.values_list("session_id", flat=True)) == made


def test_the_schema_says_a_session_is_made_up_when_omitted(acme):
    schema = acme.get("/api/schema/", {"format": "json"}).json()
    body = schema["components"]["schemas"]["SessionSummaryWriteRequest"]
    assert "session_id" not in body.get("required", [])
    assert body["properties"]["session_id"]["nullable"] is True
    assert "random id" in body["properties"]["session_id"]["description"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"summary": "   "}, "summary"),
        ({"session_id": ""}, "session_id"),
        ({"tokens_before": -1}, "tokens_before"),
        ({"messages_summarized": 2**31}, "messages_summarized"),
    ],
)
def test_session_summary_input_errors(acme, change, field):
    body = {"project": "acme/web", "session_id": "s", "summary": "text", **change}
    r = acme.post("/api/session-summaries/", body, format="json")
    assert r.status_code == 400 and field in r.json()
    assert not SessionSummary.objects.exists()


# ---------------------------------------------------------------- wipe-all
def test_wipe_all_is_the_soft_reset(acme, mm):
    mm.upsert("a", "one")
    mm.upsert("b", "two", ["preference"])
    mm.save_session_summary("summary")
    r = acme.post("/api/wipe-all/", {"project": "acme/web", "user": "acme/alice"}, format="json")
    assert r.status_code == 200
    assert r.json() == {
        "memories_cleared": 2,
        "summaries_cleared": 1,
        "not_cleared": [],
        "ok": True,
    }
    assert Memory.objects.count() == 2 and not Memory.objects.live().exists()  # not erasure


def test_wipe_all_needs_erase(mm):
    writer = token_client("writer", ["acme/"], write=True)
    body = {"project": "acme/web"}
    assert writer.post("/api/wipe-all/", body, format="json").status_code == 403
    other = token_client("globex-app", ["globex/"], erase=True)
    assert other.post("/api/wipe-all/", body, format="json").status_code == 404


# ---------------------------------------------------------- store problems
def test_store_problems(acme):
    r = acme.get("/api/store-problems/", {"namespace": "acme/web", "subject": "acme/alice"})
    assert r.status_code == 200 and r.json() == {"problems": []}
    assert acme.get("/api/store-problems/", {"namespace": "globex/web"}).status_code == 404
    assert acme.get("/api/store-problems/").status_code == 404  # '' is not granted


# ------------------------------------------------------------------ events
def test_events_of_a_memory(acme, mm):
    m = mm.upsert("secret-free key", "content that never reaches events")
    mm.upsert("secret-free key", "changed content")
    mm.delete(m.id)
    r = acme.get("/api/events/", {"memory_id": m.id})
    assert r.status_code == 200
    events = r.json()["results"]
    assert [e["event_type"] for e in events] == ["create", "update", "soft_delete"]
    assert "content" not in r.content.decode()
    assert events[0]["detail"]["scope"] == "project"
    assert acme.get("/api/events/", {"event_type": "update"}).json()["count"] == 1
    assert acme.get("/api/events/", {"memory_id": "unknown"}).status_code == 404


def test_events_stay_in_the_grants(mm):
    m = mm.upsert("k", "v")
    other = token_client("globex-app", ["globex/"])
    assert other.get("/api/events/", {"memory_id": m.id}).status_code == 404
    assert other.get("/api/events/").json()["count"] == 0
    assert other.get("/api/events/", {"namespace": "acme/web"}).status_code == 404
