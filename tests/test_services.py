"""The services every entry point calls (docs/design.md, "Layers"): one path per write."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager, store
from memoryapp.conf import get_guard
from memoryapp.models import Memory, MemoryEvent, ReviewItem
from memoryapp.services import memories, review, wipe
from memoryapp.services.slices import Binding

pytestmark = pytest.mark.django_db


def test_an_edit_renames_in_place_and_recall_sees_the_new_key_at_once():
    mm = MemoryManager(project="acme/web")
    row = mm.upsert("Deploy target", "staging servers")
    assert [h.memory_id for h in mm.recall("deploy")] == [row.id]  # the index is cached now
    prepared = store.prepare(get_guard(), "Release host", "staging servers", (), "project")
    result = memories.edit(memory_id=row.id, prepared=prepared, using="default", actor="op")
    assert result.memory.id == row.id and result.memory.key_normalized == "release_host"
    assert Memory.objects.get(pk=row.id).created_at == row.created_at
    assert [h.memory_id for h in mm.recall("release")] == [row.id]
    assert mm.recall("deploy") == []
    kinds = list(
        MemoryEvent.objects.filter(memory_id=row.id)
        .order_by("id")
        .values_list("event_type", "actor")
    )
    assert kinds[-2:] == [("rename", "op"), ("update", "op")]


def test_an_approval_lands_in_the_item_s_subject_whoever_approves():
    bob = MemoryManager(project="acme/web", user="acme/bob")
    [item] = bob.crystallize_user_messages([{"role": "user", "content": "I prefer dark mode"}])
    memory = review.approve(item_id=item.id, namespace="acme/web", actor="api:root")
    assert memory is not None and memory.subject == "acme/bob"
    assert memory.namespace == ("acme/bob" if item.scope == "user" else "acme/web")
    assert ReviewItem.objects.get(pk=item.id).status == "approved"
    assert review.approve(item_id=item.id, namespace="acme/web") is None  # decided already


def test_bulk_decisions_group_by_each_item_s_namespace():
    ids = []
    for project in ("acme/web", "acme/api"):
        mm = MemoryManager(project=project)
        items = mm.crystallize_user_messages([{"role": "user", "content": "Never use tabs"}])
        ids += [i.id for i in items]
    assert review.reject_many(item_ids=ids, actor="op") == len(ids) == 2
    events = MemoryEvent.objects.filter(event_type="review_reject")
    assert set(events.values_list("namespace", flat=True)) == {"acme/web", "acme/api"}


def test_the_wipe_preview_counts_what_the_wipe_clears():
    mm = MemoryManager(project="acme/web", user="acme/alice")
    mm.upsert("build tool", "make")
    mm.upsert("user_tz", "Europe/Paris")
    mm.save_session_summary("a summary")
    found = wipe.preview(binding=Binding.of(project="acme/web", user="acme/alice"))
    assert (found.memories, found.summaries) == (2, 1)
    result = mm.wipe_all()
    assert (result.memories_cleared, result.summaries_cleared) == (found.memories, found.summaries)


def test_a_child_manager_is_a_read_strategy_not_overridden_hooks():
    from memoryapp.manager.children import ChildManager
    from memoryapp.manager.core import MemoryManager as Facade

    overridden = {
        name
        for name, value in vars(ChildManager).items()
        if callable(value) and name.startswith("_") and not name.startswith("__")
    }
    assert overridden == set()
    assert set(vars(ChildManager)) - set(vars(Facade)) <= {"_route", "__doc__", "__module__"}
