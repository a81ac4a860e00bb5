"""``memoryapp.clients.MemoryClient`` against a live server: the facade's answers, over HTTP."""

from __future__ import annotations

import httpx
import pytest

from memoryapp import MemoryManager
from memoryapp.api.grants import provision_client
from memoryapp.api.throttles import SCOPES, MemoryScopedThrottle
from memoryapp.clients.memory import (
    REFUSED_SECRET,
    MemoryClient,
    NotFound,
    PaginationError,
    Refused,
    Throttled,
)

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT, USER = "remote/web", "remote/alice"
AWS = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _token(name: str, grants: list[str], **rights) -> str:
    provisioned = provision_client(name, grants, **rights)
    for scope in SCOPES:  # test databases reuse user ids; the throttle cache outlives them
        key = MemoryScopedThrottle.cache_format % {"scope": scope, "ident": provisioned.user.pk}
        MemoryScopedThrottle.cache.delete(key)
    return provisioned.token


@pytest.fixture
def remote(live_server):
    token = _token("remote-agent", ["remote/"], write=True)
    with MemoryClient(
        live_server.url, token, project=PROJECT, user=USER, session_id="s-1"
    ) as client:
        yield client


def test_the_remote_agent_gets_the_facades_answers(remote):
    assert remote.save_memory("Preferred editor", "vim", ["preference"]) == (
        "Saved memory: preferred_editor"
    )
    remote.save_memory("deploy target", "kubernetes on the staging cluster")
    remote.save_memory("home city", "Lisbon", scope="user")
    local = MemoryManager(project=PROJECT, user=USER, session_id="s-1")

    query = "which editor do I prefer"
    hits = remote.recall(query)
    assert [h.memory_id for h in hits] == [c.memory_id for c in local.recall(query)]
    assert hits[0].title == "Preferred editor" and hits[0].score > 0
    assert remote.render_stable_block() == local.render_stable_block()
    assert remote.render_context_block("deploy") == local.render_context_block("deploy")

    keys = {m.key_normalized for m in remote.list_memories()}
    assert keys == {"preferred_editor", "deploy_target", "home_city"}
    mine = {m.key_normalized for m in local.get_all_entries(scope="user")}
    assert {m.key_normalized for m in remote.list_memories(scope="user")} == mine
    assert "home_city" in mine and "deploy_target" not in mine


def test_summaries_crystallizer_and_delete(remote):
    summary = remote.save_session_summary("We set up the CI pipeline.", tokens_before=1200)
    assert summary.session_id == "s-1" and summary.summary_text.startswith("We set up")
    items = remote.crystallize_user_messages(
        [{"role": "user", "content": "I prefer dark mode in every editor."}]
    )
    assert items and items[0].status == "pending"
    memory = remote.upsert("scratch", "to be deleted")
    assert remote.delete(memory.id) is True
    assert remote.delete(memory.id) is False  # already gone


def test_refusals_are_clear(remote):
    assert remote.save_memory("aws keys", AWS) == REFUSED_SECRET
    with pytest.raises(Refused) as caught:
        remote.upsert("aws keys", AWS)
    assert caught.value.status == 400 and caught.value.is_secret
    assert "value" in caught.value.fields
    assert remote.save_memory("", "no key").startswith("Error saving memory: ")


def test_a_token_without_a_grant_sees_nothing(live_server):
    MemoryManager(project=PROJECT).save_memory("secret plan", "launch on Friday")
    token = _token("other-tenant", ["elsewhere/"], write=True)
    with MemoryClient(live_server.url, token, project=PROJECT) as stranger:
        with pytest.raises(NotFound) as caught:
            stranger.recall("plan")
        assert caught.value.status == 404
        assert "launch" not in str(caught.value.body)
        assert stranger.save_memory("x", "y").startswith("Error saving memory: ")


def test_throttled_requests_raise_after_the_retries(live_server, settings):
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], recall="1/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    token = _token("hasty-agent", ["remote/"])
    with MemoryClient(live_server.url, token, project=PROJECT, retries=0) as client:
        client.recall("anything")
        with pytest.raises(Throttled) as caught:
            client.recall("anything")
    assert caught.value.status == 429


def test_a_429_is_retried_after_retry_after(monkeypatch):
    answers = iter(
        [
            httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": "slow down"}),
            httpx.Response(200, json={"candidates": [], "stable_block": "S", "context_block": "C"}),
        ]
    )
    seen: list[httpx.Request] = []

    def handler(request):
        seen.append(request)
        return next(answers)

    slept: list[float] = []
    monkeypatch.setattr("memoryapp.clients.memory.time.sleep", slept.append)
    client = MemoryClient("http://memory.test", "t0k", transport=httpx.MockTransport(handler))
    assert client.render_stable_block() == "S"
    assert len(seen) == 2 and slept == [0.0]
    assert seen[0].headers["Authorization"] == "Token t0k"
    assert str(seen[0].url) == "http://memory.test/api/recall/"


def test_the_client_needs_no_django():
    import subprocess
    import sys

    code = "import sys, memoryapp.clients.memory; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ pagination
class CountingTransport(httpx.HTTPTransport):
    """The real transport, remembering every URL it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[httpx.URL] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(request.url)
        return super().handle_request(request)


def _fill(namespace: str, count: int, *, scope: str = "project") -> set[str]:
    mm = MemoryManager(project=namespace, user=namespace if scope == "user" else None)
    return {mm.upsert(f"fact {namespace} {i}", f"value {i}", scope=scope).id for i in range(count)}


def test_list_memories_reads_every_page_of_its_namespace_only(live_server):
    web = _fill("acme/web", 103)
    _fill("acme/api", 60)  # visible to the token, never part of acme/web's list
    _fill("acme/alice", 7, scope="user")
    _fill("other/web", 55)  # outside the token's grants
    transport = CountingTransport()
    token = _token("pager", ["acme/"])
    with MemoryClient(live_server.url, token, project="acme/web", transport=transport) as client:
        rows = client.list_memories()
    assert len(rows) == 103 and {r.id for r in rows} == web  # each once, none missing
    assert {r.namespace for r in rows} == {"acme/web"}
    assert len(transport.urls) == 3
    assert [u.params.get("page") for u in transport.urls] == [None, "2", "3"]
    assert all(u.params.get("namespace") == "acme/web" for u in transport.urls)

    transport.urls.clear()
    with MemoryClient(
        live_server.url, token, project="acme/web", user="acme/alice", transport=transport
    ) as client:
        assert {r.id for r in client.list_memories(scope="user")} == {
            m.id
            for m in MemoryManager(project="acme/alice", user="acme/alice").get_all_entries(
                scope="user"
            )
        }
        assert len(transport.urls) == 2  # one page each: acme/web (none) and acme/alice
        found = {r.content for r in client.list_memories(q="value 10")}
        assert found == {"value 10", "value 100", "value 101", "value 102"}


def test_pages_stops_at_max_pages(live_server):
    _fill("acme/web", 103)
    transport = CountingTransport()
    token = _token("pager", ["acme/"])
    with (
        MemoryClient(
            live_server.url, token, project="acme/web", transport=transport, max_pages=2
        ) as client,
        pytest.raises(PaginationError, match="more than 2 pages"),
    ):
        client.list_memories()
    assert len(transport.urls) == 2


ROW = {
    "namespace": "acme/web",
    "scope": "project",
    "type": "note",
    "key_normalized": "k",
    "title": "k",
    "content": "v",
    "tags": [],
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}


def _serving(next_link):
    """A server whose every page holds one row and says ``next_link(request)``."""
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        row = dict(ROW, id=f"m{len(seen)}")
        return httpx.Response(200, json={"results": [row], "next": next_link(request)})

    return seen, httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("next_link", "why"),
    [
        # The httpx 0.29 loop: the same page again, forever.
        (lambda r: str(r.url), "does not advance"),
        (lambda r: str(r.url.copy_set_param("page", "1")), "does not advance"),
        # A next link without the namespace would list every namespace the token sees.
        (lambda r: "http://memory.test/api/memories/?page=2", "does not keep the list's"),
        (
            lambda r: str(r.url.copy_set_param("namespace", "acme/api").copy_set_param("page", 2)),
            "does not keep the list's",
        ),
        (lambda r: "http://evil.test/api/memories/?namespace=acme%2Fweb&page=2", "another host"),
        (lambda r: "http://memory.test/api/events/?namespace=acme%2Fweb&page=2", "another host"),
        (lambda r: "http://memory.test/api/memories/?namespace=acme%2Fweb&page=x", "advance"),
        (lambda r: 42, "is not a URL"),
    ],
)
def test_a_next_link_that_is_not_the_lists_next_page_is_refused(next_link, why):
    seen, transport = _serving(next_link)
    client = MemoryClient("http://memory.test", "t0k", project="acme/web", transport=transport)
    with pytest.raises(PaginationError, match=why) as caught:
        client.list_memories()
    assert len(seen) == 1
    assert "acme" not in str(caught.value)  # the link's values are never quoted


def test_a_server_that_always_has_a_next_page_is_bounded():
    seen, transport = _serving(lambda r: str(r.url.copy_set_param("page", len(seen) + 1)))
    client = MemoryClient(
        "http://memory.test", "t0k", project="acme/web", transport=transport, max_pages=25
    )
    with pytest.raises(PaginationError, match="more than 25 pages"):
        client.list_memories()
    assert len(seen) == 25
    assert [u.params.get("page") for u in seen[:3]] == [None, "2", "3"]
    assert all(u.params["namespace"] == "acme/web" for u in seen)


def test_a_next_link_over_plain_http_behind_a_tls_proxy_is_followed():
    def next_link(request):
        page = int(request.url.params.get("page", "1"))
        if page == 3:
            return None
        return f"http://memory.test/api/memories/?namespace=acme%2Fweb&page={page + 1}"

    seen, transport = _serving(next_link)
    client = MemoryClient("https://memory.test", "t0k", project="acme/web", transport=transport)
    assert [m.id for m in client.list_memories()] == ["m1", "m2", "m3"]
    assert all(u.scheme == "https" for u in seen)


def test_pages_takes_its_filters_as_params_only():
    client = MemoryClient("http://memory.test", "t0k", transport=httpx.MockTransport(None))
    with pytest.raises(ValueError, match="no 'page'"):
        next(client.pages("memories/", {"page": 2}))
    with pytest.raises(ValueError, match="in params"):
        next(client.pages("memories/?namespace=acme%2Fweb"))


def test_export_returns_the_apis_document_for_a_namespace_or_a_subject(live_server, remote):
    remote.upsert("deploy day", "Tuesday")
    remote.upsert("user_tz", "Europe/Paris", scope="user")
    MemoryManager(project="globex/web").upsert("plan", "not theirs")
    project = remote.export(namespace=PROJECT)
    assert project["query"] == {"namespace": PROJECT}
    assert [m["key_normalized"] for m in project["memories"]] == ["deploy_day"]
    person = remote.export(USER)
    assert person["query"] == {"subject": USER}
    assert [m["key_normalized"] for m in person["memories"]] == ["user_tz"]
    assert person["counts"]["memories"] == 1
    # Recorded as an API export, as any call of the endpoint is.
    from memoryapp.models import ExportRecord

    assert ExportRecord.objects.filter(via="api").count() == 2


def test_export_outside_the_grants_or_without_a_target_is_refused(live_server, remote):
    MemoryManager(project="globex/web").upsert("plan", "not theirs")
    with pytest.raises(NotFound, match="grants"):
        remote.export(namespace="globex/web")
    with pytest.raises(ValueError, match="subject, a namespace, or both"):
        remote.export()
