"""The services every entry point calls (docs/design.md, "Layers"): one path per write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memoryapp import MemoryManager
from memoryapp.conf import get_guard
from memoryapp.fields import now
from memoryapp.interop import writes as records
from memoryapp.interop.store import RowStore
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from memoryapp.recall.cache import INDEXES
from memoryapp.services import memories, review, wipe
from memoryapp.services.slices import Binding
from memoryapp.writes import store

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
    from memoryapp.facade.children import ChildManager
    from memoryapp.facade.core import MemoryManager as Facade

    overridden = {
        name
        for name, value in vars(ChildManager).items()
        if callable(value) and name.startswith("_") and not name.startswith("__")
    }
    assert overridden == set()
    assert set(vars(ChildManager)) - set(vars(Facade)) <= {"_route", "__doc__", "__module__"}


def _protocol_record(key: str, content: str, scope: str = "project", **fields):
    """A memory as Agentao's store protocol hands it over (the API's validated input)."""
    values = dict(
        id="",
        scope=scope,
        type="note",
        key_normalized=key,
        title=key,
        content=content,
        tags=[],
        keywords=[],
        source="explicit",
        confidence="explicit_user",
        sensitivity="normal",
        created_at=None,
    )
    return SimpleNamespace(**{**values, **fields})


def test_the_store_protocol_s_memory_writes_fold_into_a_cached_index():
    mm = MemoryManager(project="acme/web", user="acme/alice")
    mm.upsert("alpha", "rockets launch daily", scope="project")
    mm.upsert("gamma", "rockets in the garden", scope="user")
    assert len(mm.recall("rockets")) == 2  # both slices' indexes are cached now
    counts = (INDEXES.builds, INDEXES.deltas)
    project, user = RowStore("acme/web", actor="agent"), RowStore("acme/alice", actor="agent")

    row = project.upsert_memory(_protocol_record("beta", "rockets at dawn", id="beef0001"))
    assert row.id == "beef0001"
    assert row.id in [h.memory_id for h in mm.recall("rockets")]
    again = project.upsert_memory(_protocol_record("beta", "rockets at dusk", id="beef0002"))
    assert again.id == "beef0001" and again.content == "rockets at dusk"  # updated in place
    assert project.soft_delete_memory(row.id) and not project.soft_delete_memory(row.id)
    assert row.id not in [h.memory_id for h in mm.recall("rockets")]
    assert user.clear_memories(None) == 1
    assert [h.title for h in mm.recall("rockets")] == ["alpha"]
    # Each write told the cached index what it did: no delta, no rebuild.
    assert (INDEXES.builds, INDEXES.deltas) == counts
    kinds = list(
        MemoryEvent.objects.filter(memory_id=row.id).order_by("id").values_list("event_type")
    )
    assert kinds == [("create",), ("update",), ("soft_delete",)]


def test_the_store_protocol_s_clear_takes_every_scope_of_its_namespace_only():
    MemoryManager(project="acme/web", user="acme/alice").upsert("tz", "Paris", scope="user")
    for scope in ("project", "user"):
        records.upsert_memory(
            record=_protocol_record(f"k_{scope}", "v", scope=scope),
            created_at=now(),
            stamp=now(),
            using="default",
            namespace="acme/web",
        )
    assert records.clear_memories(using="default", namespace="acme/web", scope="") == 2
    assert Memory.objects.live().filter(namespace="acme/web").count() == 0
    assert Memory.objects.live().filter(namespace="acme/alice").count() == 1
    assert records.clear_memories(using="default", namespace="acme/web") == 0


def test_the_store_protocol_s_summary_and_review_writes_keep_agentao_s_rows():
    stamp = now()
    summary = SimpleNamespace(
        id="5e55a000",
        session_id="s1",
        summary_text="we talked",
        tokens_before=10,
        messages_summarized=3,
    )
    row = records.save_session_summary(
        record=summary, created_at=stamp, using="default", namespace="acme/web", subject="acme/bo"
    )
    assert (row.id, row.subject, row.created_at) == ("5e55a000", "acme/bo", stamp)
    cleared = records.clear_session_summaries(using="default", namespace="acme/web", session_id="")
    assert cleared == 1 and not SessionSummary.objects.filter(namespace="acme/web").exists()

    item = SimpleNamespace(
        id="ae000001",
        scope="project",
        type="note",
        key_normalized="k",
        title="k",
        content="v",
        tags=["x"],
        evidence="said so",
        source_session="s1",
        occurrences=1,
        confidence="auto_summary",
        status="pending",
    )
    first = records.upsert_review_item(
        item=item, created_at=stamp, stamp=stamp, using="default", namespace="acme/web"
    )
    folded = records.upsert_review_item(
        item=SimpleNamespace(**{**vars(item), "id": "ae000002", "content": "v2"}),
        created_at=stamp,
        stamp=now(),
        using="default",
        namespace="acme/web",
    )
    assert folded.id == first.id == "ae000001"
    assert (folded.occurrences, folded.confidence, folded.content) == (2, "inferred", "v2")
    assert records.update_review_status(
        item_id=first.id, status="rejected", using="default", namespace="acme/web"
    )
    assert not records.update_review_status(
        item_id=first.id, status="approved", using="default", namespace="globex"
    )
    assert ReviewItem.objects.get(pk=first.id).status == "rejected"


def test_a_review_purge_applies_its_statuses_to_every_namespace_even_as_an_iterator():
    for project in ("acme/web", "acme/api"):
        MemoryManager(project=project).crystallize_user_messages(
            [{"role": "user", "content": "Never use tabs"}]
        )
    assert ReviewItem.objects.filter(status="pending").count() == 2
    review.purge(
        namespaces=["acme/web", "acme/api"],
        status=(s for s in ["pending"]),  # read once; it must still narrow both erasures
        actor="op",
        purge=False,
    )
    assert not ReviewItem.objects.exists()
