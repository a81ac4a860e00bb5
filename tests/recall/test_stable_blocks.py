"""The stable-block cache (memoryapp.recall.stable_blocks): reuse, bounds, no stale text."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.recall.stable_blocks import StableBlocks


def _key(tail: str, *versions: tuple[str, str, str, int]) -> tuple:
    return (tail, *versions)


def test_newer_counters_drop_the_older_blocks_of_the_same_slices():
    blocks = StableBlocks()
    p1, u1 = ("default", "acme/web", "project", 1), ("default", "acme/bob", "user", 4)
    blocks.put(_key("", p1, u1), "v1", ["a"])
    blocks.put(_key("tail of session 2", p1, u1), "v1 other session", ["a"])
    blocks.put(_key("", ("default", "globex/web", "project", 1)), "globex", ["g"])
    blocks.put(_key("", p1), "project alone", ["a"])  # other slices: kept
    assert len(blocks) == 4
    p2 = ("default", "acme/web", "project", 2)
    blocks.put(_key("", p2, u1), "v2", ["b"])
    assert blocks.get(_key("", p1, u1)) is None
    assert blocks.get(_key("tail of session 2", p1, u1)) is None
    assert blocks.get(_key("", p2, u1)) == ("v2", ("b",))
    assert blocks.get(_key("", ("default", "globex/web", "project", 1))) is not None
    assert blocks.get(_key("", p1)) is not None
    assert len(blocks) == 3


def test_the_cache_stays_within_its_bound(monkeypatch):
    monkeypatch.setattr(StableBlocks, "MAX", 3)
    blocks = StableBlocks()
    for i in range(5):
        blocks.put(_key("", ("default", f"t{i}", "project", 1)), f"block {i}", [])
    assert len(blocks) == 3
    assert blocks.get(_key("", ("default", "t0", "project", 1))) is None
    assert blocks.get(_key("", ("default", "t4", "project", 1))) == ("block 4", ())
    assert set(blocks._by_slices) == {(("default", f"t{i}", "project"),) for i in (2, 3, 4)}


@pytest.mark.django_db
def test_an_edited_fact_leaves_the_process_cache_at_the_next_turn():
    from memoryapp.recall.cache import INDEXES

    INDEXES.clear()
    mm = MemoryManager(project="acme/web")
    mm.upsert("deploy_rule", "always deploy from the zebra branch", type="constraint")
    assert "zebra" in MemoryManager(project="acme/web").render_stable_block()
    mm.upsert("deploy_rule", "always deploy from the main branch", type="constraint")
    assert "main branch" in MemoryManager(project="acme/web").render_stable_block()
    held = [text for text, _ in INDEXES.stable_blocks._blocks.values()]
    assert held and not any("zebra" in text for text in held)
