"""``HttpMemoryStore`` under Agentao's own MemoryManager, against a live server.

The scenario of ``test_agentao_store`` (every protocol path, driven by an
unmodified Agentao ``MemoryManager`` and ``MemoryRetriever``) runs once on
Agentao's own SQLite files and once on two ``HttpMemoryStore`` namespaces of a
live server: the transcripts must be equal. Then what only a remote store can
get wrong: the other writers it must see, the refusals it must report, and a
token without a grant, which gets clear errors and no data.
"""

from __future__ import annotations

import pytest

pytest.importorskip("agentao.memory")

from agentao.memory import MemoryManager, MemoryRetriever  # noqa: E402
from agentao.memory.models import MemoryRecord, MemoryReviewItem  # noqa: E402

from memoryapp import MemoryManager as AppManager  # noqa: E402
from memoryapp.clients.memory import MemoryClient, Refused
from memoryapp.clients.store import HttpMemoryStore, RemoteStoreError
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary  # noqa: E402
from tests.interop.test_agentao_store import (  # noqa: E402
    MESSAGES,
    _agentao_manager,
    assert_implements_the_protocol,
    fine_clock,  # noqa: F401 - a fixture
    run_scenario,
)

from .test_client import _token  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT, USER = "acme/web", "acme/alice"
AWS = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def token():
    return _token("remote-agentao", ["acme/"], write=True)


@pytest.fixture
def stores(live_server, token):
    project = HttpMemoryStore(live_server.url, token, PROJECT)
    user = HttpMemoryStore(live_server.url, token, USER)
    yield project, user
    project.close()
    user.close()


def test_same_operations_same_results_over_http(tmp_path, fine_clock, stores):  # noqa: F811
    reference = run_scenario(_agentao_manager(tmp_path))
    project, user = stores
    ours = run_scenario(MemoryManager(project_store=project, user_store=user), server_ids=True)
    assert set(ours) == set(reference)
    for key in reference:
        assert ours[key] == reference[key], key
    assert reference["wipe"] == (7, 3, (), True)
    assert ours["problems"] == []
    # The rows are the server's, in the two namespaces, with the API client as actor.
    assert set(Memory.objects.values_list("namespace", flat=True)) == {PROJECT, USER}
    actors = set(MemoryEvent.objects.values_list("actor", flat=True))
    assert actors == {"api:remote-agentao"}


def test_the_manager_works_unmodified_and_sees_other_writers(stores):
    project, user = stores
    mm = MemoryManager(project_store=project, user_store=user)
    assert mm.save_from_tool("user_name", "Alice", ["profile"]) == "Saved memory: user_name"
    assert mm.save_from_tool("Deploy", "We deploy with Helm", ["decision"]) == (
        "Saved memory: deploy"
    )
    app = AppManager(project=PROJECT, user=USER)
    rows = {m.key_normalized: m for m in app.get_all_entries()}
    assert (rows["user_name"].namespace, rows["user_name"].scope) == (USER, "user")
    assert rows["deploy"].content == "We deploy with Helm"

    retriever = MemoryRetriever(mm)
    assert [h.title for h in retriever.recall_candidates("helm deploy")] == ["Deploy"]
    before = project.change_version()
    AppManager(project="acme/other").upsert("Unrelated", "another namespace's fact")
    assert project.change_version() == before  # other tenants' writes cost nothing
    app.upsert("Release day", "Releases ship on Tuesdays", tags=["process"])
    assert project.change_version() != before
    assert [h.title for h in retriever.recall_candidates("release tuesdays")] == ["Release day"]

    mm.save_session_summary("first session", 100, 3)
    mm.archive_session()
    assert mm.get_cross_session_tail() == "first session"
    items = mm.crystallize_user_messages(MESSAGES)
    assert len(items) == 3 and len(app.list_review_items()) == 3
    approved = mm.approve_review_item(items[0].id)
    assert approved is not None and approved.source == "crystallized"
    assert ReviewItem.objects.get(pk=items[0].id).status == "approved"
    result = mm.wipe_all()
    assert (result.memories_cleared, result.summaries_cleared, result.ok) == (4, 1, True)
    assert app.get_all_entries() == [] and mm.take_store_problems() == []


def test_the_servers_guard_refuses_what_reaches_it(stores):
    project, _ = stores
    record = MemoryRecord(
        id="abcd1234",
        scope="project",
        type="note",
        key_normalized="aws_keys",
        title="aws keys",
        content=AWS,
    )
    with pytest.raises(Refused) as caught:
        project.upsert_memory(record)
    assert caught.value.is_secret and "content" in caught.value.fields
    assert "AKIA" not in str(caught.value)
    bad_key = MemoryRecord(
        id="", scope="project", type="note", key_normalized="!!!", title="t", content="c"
    )
    with pytest.raises(Refused):
        project.upsert_memory(bad_key)
    item = MemoryReviewItem(
        id="", scope="project", type="note", key_normalized="k", title="t", content=AWS
    )
    with pytest.raises(Refused):
        project.upsert_review_item(item)
    assert not Memory.objects.exists() and not ReviewItem.objects.exists()
    mm = MemoryManager(project_store=project)
    assert mm.save_from_tool("deploy notes", "x" * 4001, []).startswith("Error saving memory:")


def test_a_store_sees_only_its_namespace(stores, live_server, token):
    project, _ = stores
    MemoryManager(project_store=project).save_from_tool("shared key", "project value", ["t"])
    other = HttpMemoryStore(live_server.url, token, "acme/else")
    MemoryManager(project_store=other).save_from_tool("shared key", "else value", ["t"])
    mine = project.get_memory_by_scope_key("project", "shared_key")
    theirs = other.get_memory_by_scope_key("project", "shared_key")
    assert (mine.content, theirs.content) == ("project value", "else value")
    assert project.get_memory_by_id(theirs.id) is None
    assert project.soft_delete_memory(theirs.id) is False
    assert project.update_review_status("no-such-item", "approved") is False
    assert project.get_memory_by_id("../../") is None
    assert [r.content for r in project.filter_by_tag("T")] == ["project value"]
    assert project.clear_memories() == 1
    assert other.get_memory_by_id(theirs.id) is not None
    other.close()


def test_a_token_without_a_grant_gets_clear_errors_and_no_data(live_server):
    AppManager(project=PROJECT).save_memory("secret plan", "launch on Friday")
    AppManager(project=PROJECT).save_session_summary("the launch plan")
    before = (
        list(Memory.objects.values_list("id", "content", "deleted_at")),
        SessionSummary.objects.count(),
    )
    stranger = _token("other-tenant", ["globex/"], write=True)
    store = HttpMemoryStore(live_server.url, stranger, PROJECT)
    with pytest.raises(RemoteStoreError) as caught:
        store.list_memories()
    assert caught.value.status == 404
    assert "'acme/web' is not granted to this token" in str(caught.value)
    assert "launch" not in str(caught.value.body)
    for call in (store.change_version, store.clear_memories, store.clear_session_summaries):
        with pytest.raises(RemoteStoreError):
            call()
    with pytest.raises(RemoteStoreError):
        store.get_memory_by_scope_key("project", "secret_plan")
    assert store.get_memory_by_id(Memory.objects.get().id) is None  # hidden: no such row
    mm = MemoryManager(project_store=store)
    assert mm.get_all_entries() == []
    assert mm.get_cross_session_tail() == ""
    (problem,) = mm.take_store_problems()
    assert "cannot be read" in problem and "not granted" in problem and "launch" not in problem
    assert "not granted" in mm.save_from_tool("k", "v", [])
    with pytest.raises(RemoteStoreError):
        mm.search("launch")
    after = (
        list(Memory.objects.values_list("id", "content", "deleted_at")),
        SessionSummary.objects.count(),
    )
    assert after == before


def test_an_unreachable_service_degrades_the_manager():
    store = HttpMemoryStore("http://127.0.0.1:9", "t0k", PROJECT, retries=0, timeout=2)
    mm = MemoryManager(project_store=store)
    assert mm.get_all_entries() == []
    (problem,) = mm.take_store_problems()
    assert "unreachable" in problem
    store.close()
    store.close()


def test_store_implements_the_whole_protocol():
    assert_implements_the_protocol(HttpMemoryStore)


def test_folding_saturates_at_the_columns_bound(stores):
    project, _ = stores
    base = {"scope": "project", "type": "decision", "key_normalized": "k", "title": "t"}
    project.upsert_review_item(MemoryReviewItem(id="", content="c", occurrences=2**31 - 2, **base))
    folded = project.upsert_review_item(
        MemoryReviewItem(id="", content="c2", occurrences=5, **base)
    )
    assert folded.occurrences == 2**31 - 1 and folded.content == "c2"


def test_lists_read_every_page_of_the_namespace_only(live_server, token, monkeypatch):
    from .test_client import CountingTransport, _fill

    monkeypatch.setattr("memoryapp.clients.store._PAGE", 10)
    mine = _fill(PROJECT, 25)
    _fill("acme/api", 12)  # visible to the token, never in acme/web's store
    transport = CountingTransport()
    store = HttpMemoryStore(live_server.url, token, PROJECT, transport=transport)
    try:
        rows = store.list_memories()
        assert len(rows) == 25 and {r.id for r in rows} == mine
        assert len(transport.urls) == 3
        assert all(u.params["namespace"] == PROJECT for u in transport.urls)
        assert [u.params.get("page") for u in transport.urls] == [None, "2", "3"]
    finally:
        store.close()


def test_a_store_degrades_when_the_list_has_no_end(live_server, token, monkeypatch):
    from .test_client import CountingTransport, _fill

    monkeypatch.setattr("memoryapp.clients.store._PAGE", 10)
    _fill(PROJECT, 35)
    transport = CountingTransport()
    client = MemoryClient(live_server.url, token, transport=transport, max_pages=3)
    store = HttpMemoryStore(None, None, PROJECT, client=client)
    with pytest.raises(RemoteStoreError, match="more than 3 pages"):
        store.list_memories()
    assert len(transport.urls) == 3
    client.close()
