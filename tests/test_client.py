"""``memoryapp.client.MemoryClient`` against a live server: the facade's answers, over HTTP."""

from __future__ import annotations

import httpx
import pytest

from memoryapp import MemoryManager
from memoryapp.api.grants import provision_client
from memoryapp.api.throttles import SCOPES, MemoryScopedThrottle
from memoryapp.client import (
    REFUSED_SECRET,
    MemoryClient,
    NotFound,
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
    monkeypatch.setattr("memoryapp.client.time.sleep", slept.append)
    client = MemoryClient("http://memory.test", "t0k", transport=httpx.MockTransport(handler))
    assert client.render_stable_block() == "S"
    assert len(seen) == 2 and slept == [0.0]
    assert seen[0].headers["Authorization"] == "Token t0k"
    assert str(seen[0].url) == "http://memory.test/api/recall/"


def test_the_client_needs_no_django():
    import subprocess
    import sys

    code = "import sys, memoryapp.client; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
