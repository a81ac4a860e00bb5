"""``manage.py memory demo``: realistic tenants through the facade, idempotent, careful."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.cli.demo import TENANTS, demo_namespaces
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary

pytestmark = pytest.mark.django_db


def demo(*args) -> str:
    out = io.StringIO()
    call_command("memory", "demo", *args, stdout=out)
    return out.getvalue()


def _state():
    return (
        sorted(Memory.objects.values_list("namespace", "key_normalized", "content", "updated_at")),
        sorted(SessionSummary.objects.values_list("namespace", "session_id")),
        sorted(ReviewItem.objects.values_list("namespace", "key_normalized", "occurrences")),
        MemoryEvent.objects.count(),
    )


def test_demo_fills_tenants_with_memories_summaries_and_review_items():
    out = demo("--actor", "demo-test")
    memories = sum(len(t.memories) + sum(len(p.memories) for p in t.people) for t in TENANTS)
    people = [p for t in TENANTS for p in t.people]
    assert f"{memories} memories written" in out
    assert f"{len(people)} session summaries" in out
    assert Memory.objects.live().count() == memories
    assert set(Memory.objects.values_list("namespace", flat=True)) == demo_namespaces()
    assert SessionSummary.objects.count() == len(people)
    assert ReviewItem.objects.filter(status="pending").count() >= len(people)
    # Through the facade: classified, evented, and recalled like anything an agent wrote.
    assert set(MemoryEvent.objects.filter(event_type="create").values_list("actor", flat=True)) == {
        "demo-test"
    }
    alice = MemoryManager(project="acme/web", user="acme/alice")
    assert any("fly.io" in c.excerpt for c in alice.recall("how do we deploy"))
    user_rows = Memory.objects.filter(namespace="acme/alice")
    assert set(user_rows.values_list("scope", "subject")) == {("user", "acme/alice")}


def test_running_the_demo_again_changes_nothing():
    demo()
    before = _state()
    out = demo()
    assert _state() == before
    assert "0 memories written" in out and "0 session summaries and 0 review items added" in out


def test_the_demo_refuses_a_database_with_other_data_unless_forced():
    MemoryManager(project="real/tenant").upsert("Real fact", "Not demo data")
    with pytest.raises(CommandError, match="1 row that is not demo data") as refused:
        demo()
    assert "Not demo data" not in str(refused.value)
    assert not Memory.objects.filter(namespace__in=demo_namespaces()).exists()
    demo("--force")
    assert Memory.objects.filter(namespace="acme/web").exists()
    assert Memory.objects.get(namespace="real/tenant").content == "Not demo data"


def test_an_extra_memory_in_a_demo_namespace_counts_as_other_data():
    MemoryManager(project="acme/web").upsert("Our real roadmap", "Ship v2 in March")
    with pytest.raises(CommandError, match="not demo data"):
        demo()
