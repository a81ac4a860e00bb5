"""Eight threads saving one key at once end with one live row, every call a success."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def _race(key: str, values: list[str]) -> list[str]:
    barrier = threading.Barrier(len(values))
    results: list[str] = [""] * len(values)

    def worker(i: int) -> None:
        try:
            mm = MemoryManager(project="race", user="u")
            barrier.wait()
            results[i] = mm.save_memory(key, values[i])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(values))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("round_", range(3))
def test_same_key_from_eight_threads(round_):
    values = [f"value {i}" for i in range(THREADS)]
    results = _race("Shared Key", values)
    assert results == ["Saved memory: shared_key"] * THREADS
    live = Memory.objects.live().filter(namespace="race", key_normalized="shared_key")
    assert live.count() == 1
    assert live.get().content in values
    row = live.get()
    events = MemoryEvent.objects.filter(memory_id=row.id)
    assert events.filter(event_type="create").count() == 1
    assert events.filter(event_type="update").count() == THREADS - 1
