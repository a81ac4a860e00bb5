"""``Memory.objects.in_namespace(ns).recall(...)``: the design card's "managers implement
retrieval scoring", with the same candidates as ``MemoryManager.recall``."""

from __future__ import annotations

import random

import pytest

from memoryapp import MemoryManager
from memoryapp.facade import blocks
from memoryapp.models import Memory

pytestmark = pytest.mark.django_db

WORDS = ["deploy", "python", "tests", "ci", "docker", "review", "docs", "api", "db", "helm"]


@pytest.fixture
def seeded(monkeypatch):
    rng = random.Random(11)
    for ns in ("acme/web", "acme/api"):
        mm = MemoryManager(project=ns)
        for i in range(40):
            text = " ".join(rng.choice(WORDS) for _ in range(7))
            mm.upsert(f"note {i} {rng.choice(WORDS)}", text, tags=[rng.choice(WORDS)])
    MemoryManager(project="acme/web", user="acme/bob").upsert("user_editor", "uses vim for python")
    clock = blocks.time.time()
    monkeypatch.setattr(blocks.time, "time", lambda: clock)  # recency decays with the clock


@pytest.mark.parametrize("query", ["deploy python", "docker helm ci", "vim", "zzz nothing"])
@pytest.mark.parametrize("top_k", [1, 5, 20])
def test_queryset_recall_equals_the_facades(seeded, query, top_k):
    messages = [{"role": "user", "content": "see deploy/chart.yaml"}]
    ours = MemoryManager(project="acme/web").recall(query, messages=messages, top_k=top_k)
    assert Memory.objects.in_namespace("acme/web").recall(query, messages, top_k) == ours
    assert (
        Memory.objects.live()
        .in_namespace("acme/web")
        .in_scope("project")
        .recall(query, messages, top_k)
        == ours
    )
    # the user slice through the user namespace, as a manager bound to it reads it
    bob = MemoryManager(project="nobody/none", user="acme/bob").recall(query, messages, top_k)
    assert (
        Memory.objects.in_namespace("acme/bob").in_scope("user").recall(query, messages, top_k)
        == bob
    )


def test_recall_refuses_a_queryset_it_would_not_honour(seeded):
    for qs in (
        Memory.objects.all(),
        Memory.objects.filter(type="note").in_namespace("acme/web"),
        Memory.objects.in_namespace("acme/web").filter(type="note"),
        Memory.objects.in_namespace("acme/web").in_namespace("acme/api"),
    ):
        with pytest.raises(TypeError, match="in_namespace"):
            qs.recall("deploy")
    with pytest.raises(TypeError):
        Memory.objects.recall("deploy")


def test_a_recalls_shown_rows_are_looked_up_by_id_not_by_scanning_the_namespace(seeded):
    """The hits' columns are read by primary key; the namespace is checked beside the ids.

    Naming the namespace as a plain term made SQLite's planner scan the namespace's
    ``(namespace, …)`` index (30 ms a recall at 100,000 memories); PostgreSQL names
    it so that one partition is read.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        hits = MemoryManager(project="acme/web").recall("deploy")
    assert hits
    shown = [q["sql"] for q in ctx.captured_queries if "SELECT id, scope, type" in q["sql"]]
    assert len(shown) == 1
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + shown[0])
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert "sqlite_autoindex_memories_1 (id=?)" in plan, plan
            assert "ix_memories" not in plan, plan
        else:
            cursor.execute("EXPLAIN " + shown[0])
            plan = [row[0] for row in cursor.fetchall()]
            partitions = {word for line in plan for word in line.split() if "memories_p" in word}
            assert len(partitions) == 1, plan
