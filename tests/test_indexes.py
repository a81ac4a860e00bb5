"""The process-wide recall index cache (memoryapp.indexes): its byte cap across namespaces."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager


@pytest.mark.django_db
def test_the_indexes_of_many_namespaces_stay_under_the_byte_cap(settings):
    from memoryapp.indexes import INDEXES

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
