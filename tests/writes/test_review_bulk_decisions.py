"""Approving and rejecting many review items at once: the same result as one by one, cheaply."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent, ReviewItem, ReviewStatus, Source

pytestmark = pytest.mark.django_db

NS = "bulk/web"


def _queue(subject: str, n: int, *, start: int = 0) -> list[str]:
    """``n`` pending items of ``subject`` with distinct keys, as the crystallizer writes them."""
    items = [
        ReviewItem(
            namespace=NS,
            subject=subject,
            scope="user",
            type="preference",
            key_normalized=f"prefers_chart_colour_{i}",
            title=f"Prefers chart colour {i}",
            content=f"The user prefers chart colour number {i}.",
            tags_json='["preference"]',
            evidence=f"I prefer chart colour {i}",
            source_session="s",
        )
        for i in range(start, start + n)
    ]
    ReviewItem.objects.bulk_create(items)
    return [item.pk for item in items]


def _memory_shape(m: Memory) -> tuple:
    return (m.namespace, m.subject, m.scope, m.type, m.key_normalized, m.content, m.source)


def test_bulk_approval_writes_what_single_approvals_write():
    alice = _queue("bulk/alice", 3)
    bob = _queue("bulk/bob", 2, start=10)
    # One by one, for reference, in a twin namespace built the same way.
    single = MemoryManager(project=NS)
    expected = []
    for pk in alice[:1]:
        m = single.approve_review_item(pk, actor="ref")
        expected.append(_memory_shape(m))
        m.delete()  # hard, to approve it again below
    ReviewItem.objects.filter(pk__in=alice[:1]).update(status=ReviewStatus.PENDING)

    approved, refused = MemoryManager(project=NS).approve_review_items(alice + bob, actor="op")
    assert (approved, refused) == (5, [])
    assert not ReviewItem.objects.filter(status=ReviewStatus.PENDING).exists()
    rows = Memory.objects.filter(namespace__in=[NS, "bulk/alice", "bulk/bob"]).live()
    assert rows.count() == 5
    assert all(m.source == Source.CRYSTALLIZED for m in rows)
    first = Memory.objects.live().get(
        key_normalized=ReviewItem.objects.get(pk=alice[0]).key_normalized
    )
    assert _memory_shape(first) == expected[0]
    # Each memory belongs to its item's subject, and an event links item and memory.
    for pk in alice + bob:
        item = ReviewItem.objects.get(pk=pk)
        event = MemoryEvent.objects.get(memory_id=pk, event_type="review_approve", actor="op")
        assert event.actor == "op" and event.namespace == NS
        memory = Memory.objects.get(pk=json.loads(event.detail)["memory"])
        assert memory.subject == item.subject and memory.key_normalized == item.key_normalized


def test_a_refused_item_stays_pending_and_is_reported(monkeypatch):
    ids = _queue("bulk/alice", 3)
    bad = ReviewItem.objects.get(pk=ids[1])
    ReviewItem.objects.filter(pk=bad.pk).update(content="token ghp_" + "a" * 36)
    approved, refused = MemoryManager(project=NS).approve_review_items(ids)
    assert approved == 2
    assert [item.pk for item, _ in refused] == [bad.pk] and "credential" in refused[0][1]
    assert ReviewItem.objects.get(pk=bad.pk).status == ReviewStatus.PENDING


def test_bulk_rejection_and_items_of_other_namespaces_are_left_alone():
    ids = _queue("bulk/alice", 4)
    MemoryManager(project="other/ns", user="other/u").crystallize_user_messages(
        [{"role": "user", "content": "I prefer tea over coffee."}]
    )
    foreign = ReviewItem.objects.get(namespace="other/ns").pk
    assert MemoryManager(project=NS).reject_review_items([*ids, foreign], actor="op") == 4
    assert ReviewItem.objects.get(pk=foreign).status == ReviewStatus.PENDING
    assert MemoryEvent.objects.filter(event_type="review_reject").count() == 4
    assert MemoryManager(project=NS).reject_review_items(ids) == 0  # no longer pending


def test_many_decisions_cost_a_few_statements_per_chunk():
    ids = _queue("bulk/alice", 120)
    with CaptureQueriesContext(connection) as approving:
        approved, _ = MemoryManager(project=NS).approve_review_items(ids)
    assert approved == 120
    # One by one this is a dozen statements per item (over 1,400 here).
    assert len(approving.captured_queries) < 60, len(approving.captured_queries)


@pytest.mark.postgres_only
def test_a_large_approval_analyses_the_partitions_it_wrote_only():
    from memoryapp.db import partitioning

    ids = _queue("bulk/alice", 300) + _queue("bulk/bob", 300, start=300)
    with CaptureQueriesContext(connection) as approving:
        approved, _ = MemoryManager(project=NS).approve_review_items(ids)
    assert approved == 600
    analysed = {q["sql"] for q in approving.captured_queries if q["sql"].startswith("ANALYZE")}
    with connection.cursor() as cursor:
        numbers = {
            partitioning.remainder_for(cursor, ns) for ns in (NS, "", "bulk/alice", "bulk/bob")
        }
    wanted = {
        f'ANALYZE "{partitioning.leaf_name(table, n)}"'
        for table in ("memories", "memory_events")
        for n in numbers
    }
    assert analysed == wanted  # never the whole table: its 64 partitions would all be sampled
