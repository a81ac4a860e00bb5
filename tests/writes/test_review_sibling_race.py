"""Two reviewers approve alice's and dave's sibling items of one project key at once.

Each approval locks every sibling, in one order (by id): neither deadlocks, one of them
approves both items into one memory owned by nobody, the other finds nothing pending.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent, ReviewItem

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 6
NS = "race/web"


def _approve(item_id: str, barrier: threading.Barrier, result: dict, name: str) -> None:
    try:
        barrier.wait()
        result[name] = MemoryManager(project=NS).approve_review_item(item_id, actor=name)
    except Exception as exc:  # reported by the assertion below, not lost in the thread
        result[name] = exc
    finally:
        connections.close_all()


def test_approvals_of_sibling_items_never_deadlock_nor_write_twice():
    for n in range(ROUNDS):
        words = {"role": "user", "content": f"We decided to use Postgres for ledger {n}."}
        # Alternate which subject's item has the smaller id: both lock orders are tried.
        subjects = ("race/alice", "race/dave") if n % 2 else ("race/dave", "race/alice")
        items = [
            MemoryManager(project=NS, user=s).crystallize_user_messages([words])[0]
            for s in subjects
        ]
        barrier = threading.Barrier(2)
        result: dict[str, object] = {}
        threads = [
            threading.Thread(target=_approve, args=(item.pk, barrier, result, f"r{k}"))
            for k, item in enumerate(items)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(isinstance(v, Exception) for v in result.values()), result
        written = [m for m in result.values() if m is not None]
        assert len(written) == 1  # the other approval found its item already approved
        rows = ReviewItem.objects.filter(pk__in=[i.pk for i in items])
        assert set(rows.values_list("status", flat=True)) == {"approved"}
        memory = Memory.objects.get(namespace=NS, key_normalized=items[0].key_normalized)
        assert memory.subject is None
        events = MemoryEvent.objects.filter(
            event_type="review_approve", memory_id__in=[i.pk for i in items]
        )
        assert events.count() == 2
        assert all(memory.pk in e.detail for e in events)
