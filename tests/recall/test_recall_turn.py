"""``POST /api/recall/`` scores once: ``recall_turn`` gives both answers of one recall."""

from __future__ import annotations

import random

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.facade import blocks

pytestmark = pytest.mark.django_db


def _seed(mm: MemoryManager) -> None:
    rng = random.Random(5)
    words = ["deploy", "python", "tests", "ci", "docker", "review", "docs", "api", "db"]
    for i in range(60):
        text = " ".join(rng.choice(words) for _ in range(8))
        mm.upsert(f"note {i} {rng.choice(words)}", text, tags=[rng.choice(words)])
    mm.upsert("user_editor", "prefers vim for python", tags=["preference"])


@pytest.mark.parametrize("top_k", [1, 3, 5, 12, 50])
def test_recall_turn_equals_recall_and_the_context_block(top_k, monkeypatch):
    mm = MemoryManager(project="acme/web", user="acme/bob")
    _seed(mm)
    clock = blocks.time.time()
    monkeypatch.setattr(blocks.time, "time", lambda: clock)  # recency decays with the clock
    messages = [{"role": "user", "content": "see src/app/deploy.py"}]
    for query in ("deploy python tests", "docker api", "vim", "nothing matches zzz"):
        candidates, context = mm.recall_turn(query, messages=messages, top_k=top_k)
        assert candidates == mm.recall(query, messages=messages, top_k=top_k)
        assert context == mm.render_context_block(query, messages=messages)


def test_the_recall_endpoint_scores_once(monkeypatch):
    mm = MemoryManager(project="acme/web")
    _seed(mm)
    calls = []
    real = blocks.PromptBlocks._recall

    def counted(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(blocks.PromptBlocks, "_recall", counted)
    client = token_client("acme-app", ["acme/"])
    body = {"project": "acme/web", "query": "deploy python", "messages": [], "top_k": 3}
    r = client.post("/api/recall/", body, format="json")
    assert r.status_code == 200
    assert len(calls) == 1
    assert len(r.json()["candidates"]) == 3 and "<memory-context>" in r.json()["context_block"]


def test_a_turn_reads_the_slice_counters_once(monkeypatch):
    """Stable block and recall share one counter read: one round trip per API recall."""
    from memoryapp.services import prompt

    mm = MemoryManager(project="acme/web", user="acme/bob")
    _seed(mm)
    reads = []  # one entry per statement that reads counters (with snapshots or without)
    real, real_with = prompt.read_slice_counters, prompt.stored_snapshots.read_with_counters

    def counted(alias, slices, **kwargs):
        reads.append(list(slices))
        return real(alias, slices, **kwargs)

    def counted_with(alias, slices, wanted):
        reads.append(list(slices))
        return real_with(alias, slices, wanted)

    monkeypatch.setattr(prompt, "read_slice_counters", counted)
    monkeypatch.setattr(prompt.stored_snapshots, "read_with_counters", counted_with)
    fresh = MemoryManager(project="acme/web", user="acme/bob")  # nothing cached per manager
    candidates, _ = fresh.recall_turn("deploy python", top_k=3)
    assert candidates and len(reads) == 1
    assert sorted(reads[0]) == [("acme/bob", "user"), ("acme/web", "project")]

    # The next turn reads again, and sees a write another manager made in between.
    MemoryManager(project="acme/web").upsert("zebra_fact", "zebras deploy quickly")
    candidates, _ = fresh.recall_turn("zebras", top_k=3)
    assert len(reads) == 2 and candidates[0].title == "zebra_fact"


def test_turn_counters_keep_a_read_not_a_failure(monkeypatch):
    """A failed read is not kept: the turn's recall reads (and reports) on its own."""
    from django.db import DatabaseError

    from memoryapp.services import prompt

    stores = MemoryManager(project="acme/web")._stores()
    outcomes = [DatabaseError("down"), [("default", "acme/web", "project", 7)]]

    def read(_stores):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(prompt.TurnCounters, "_versions", lambda self, stores: read(stores))
    counters = prompt.TurnCounters()
    with pytest.raises(DatabaseError):
        counters(stores)
    assert counters(stores) == [("default", "acme/web", "project", 7)]
    assert counters(stores) == [("default", "acme/web", "project", 7)]  # kept: no third read
    assert outcomes == []


def test_the_recall_body_is_what_the_output_serializer_writes():
    """The endpoint writes its body without the serializer; the schema's serializer agrees."""
    from memoryapp.api.serializers import recall as serializers

    mm = MemoryManager(project="acme/web", user="acme/bob")
    _seed(mm)
    candidates, context = mm.recall_turn("deploy python vim", top_k=8)
    assert len(candidates) == 8
    stable = mm.render_stable_block()
    body = serializers.recall_output(candidates, stable, context)
    expected = serializers.RecallOutputSerializer(
        {"candidates": candidates, "stable_block": stable, "context_block": context}
    ).data
    assert body == expected
    assert list(body) == list(expected)
    assert [list(c) for c in body["candidates"]] == [list(c) for c in expected["candidates"]]
    fields = set(serializers.RecallCandidateSerializer().fields)
    assert all(set(c) == fields for c in body["candidates"])
