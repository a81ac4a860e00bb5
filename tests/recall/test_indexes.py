"""The process-wide recall index cache (memoryapp.recall.cache): its byte cap across namespaces."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager


@pytest.mark.django_db
def test_the_indexes_of_many_namespaces_stay_under_the_byte_cap(settings):
    from memoryapp.recall.cache import INDEXES

    managers = [MemoryManager(project=f"tenant/{i}") for i in range(6)]
    for i, mm in enumerate(managers):
        for j in range(30):
            mm.upsert(f"fact {j}", f"tenant {i} rockets fact number {j} " + "word " * 20)
    one = None
    for mm in managers[:1]:
        assert mm.recall("rockets")
        one = INDEXES._entries["default", "tenant/0", "project"].nbytes
    settings.MEMORYAPP_RECALL_CACHE_BYTES = int(2.5 * one)
    for mm in managers:
        assert len(mm.recall("rockets", top_k=50)) == 30
    cached = [key[1] for key in INDEXES._entries]
    assert cached == ["tenant/4", "tenant/5"]  # the two most recently used
    assert sum(e.nbytes for e in INDEXES._entries.values()) <= settings.MEMORYAPP_RECALL_CACHE_BYTES
    builds = INDEXES.builds
    hits = managers[0].recall("rockets", top_k=50)  # evicted: rebuilt, same answer
    assert INDEXES.builds == builds + 1 and len(hits) == 30
    assert [key[1] for key in INDEXES._entries] == ["tenant/5", "tenant/0"]


def _total_is_exact() -> bool:
    from memoryapp.recall.cache import INDEXES

    held = list(INDEXES._entries.values())
    return INDEXES.usage() == (len(held), sum(e.nbytes for e in held)) and all(
        e.counted == e.nbytes for e in held
    )


@pytest.mark.django_db
def test_the_running_byte_total_follows_every_change(settings):
    """The LRU keeps its byte total as entries come, grow, shrink and go, never by summing."""
    from memoryapp.recall.cache import INDEXES

    INDEXES.clear()
    assert INDEXES.usage() == (0, 0)
    managers = [MemoryManager(project=f"tenant/{i}") for i in range(5)]
    for i, mm in enumerate(managers):
        for j in range(20):
            mm.upsert(f"fact {j}", f"tenant {i} rockets fact number {j} " + "word " * (5 + j))
        assert mm.recall("rockets")  # built, held
        assert _total_is_exact()
    before = INDEXES.usage()[1]
    managers[0].upsert("a long one", "rockets " + "payload words " * 200)  # own write: grows
    managers[0].recall("rockets")
    assert INDEXES.usage()[1] > before and _total_is_exact()
    gone = managers[1].search("fact 3")[0].id
    managers[1].delete(gone)  # shrinks (own write)
    managers[1].recall("rockets")
    assert _total_is_exact()
    INDEXES.discard("default", "tenant/2", "project")
    assert len(INDEXES._entries) == 4 and _total_is_exact()
    settings.MEMORYAPP_RECALL_CACHE_BYTES = INDEXES.usage()[1] // 2
    managers[2].recall("rockets")  # goes in again: the oldest ones go out
    assert len(INDEXES._entries) < 4 and _total_is_exact()
    assert INDEXES.usage()[1] <= settings.MEMORYAPP_RECALL_CACHE_BYTES
    INDEXES.clear()
    assert INDEXES.usage() == (0, 0)
