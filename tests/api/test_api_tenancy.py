"""The cross-tenant matrix: a client granted ``acme/`` gets 404 for ``globex/`` data everywhere."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem, SessionSummary

pytestmark = pytest.mark.django_db

GLOBEX, BOB = "globex/web", "globex/bob"


@pytest.fixture
def globex():
    """A row of every kind in globex's namespaces, and a receipt of a globex erasure."""
    mm = MemoryManager(project=GLOBEX, user=BOB)
    live = mm.upsert("roadmap", "globex secret roadmap")
    deleted = mm.upsert("old plan", "globex old plan")
    mm.delete(deleted.id)
    mm.upsert("editor", "emacs", ["preference"])
    mm.save_session_summary("globex session summary")
    (item,) = mm.crystallize_user_messages([{"role": "user", "content": "We decided to use Go."}])
    globex_client = token_client("globex-app", ["globex/"], erase=True)
    receipt = globex_client.post(
        "/api/erasures/", {"ids": [mm.upsert("tmp", "to erase").id]}, format="json"
    ).json()
    return {
        "memory": live.id,
        "deleted": deleted.id,
        "item": item.id,
        "receipt": receipt["id"],
        "namespace": GLOBEX,
        "subject": BOB,
    }


FAKE = {
    "memory": "00000000deadbeef",
    "deleted": "00000000feedface",
    "item": "00000000cafebabe",
    "receipt": "0" * 32,
    "namespace": "globex/nowhere",
    "subject": "globex/nobody",
}


def requests_for(t: dict) -> list[tuple[str, str, dict | None]]:
    """Every endpoint of docs/behaviour.md §13, aimed at the target's rows and namespaces."""
    ns, subject = t["namespace"], t["subject"]
    bound = {"project": ns, "user": subject}
    return [
        # reads
        ("get", f"/api/memories/{t['memory']}/", None),
        ("get", f"/api/memories/?namespace={ns}", None),
        ("get", f"/api/session-summaries/?namespace={ns}", None),
        ("get", f"/api/review-items/?namespace={ns}&status=pending", None),
        ("get", f"/api/review-items/{t['item']}/", None),
        ("get", f"/api/events/?memory_id={t['memory']}", None),
        ("get", f"/api/events/?memory_id={t['deleted']}", None),
        ("get", f"/api/events/?namespace={ns}", None),
        ("get", f"/api/exports/?namespace={ns}", None),
        ("get", f"/api/exports/?subject={subject}", None),
        ("get", f"/api/erasures/{t['receipt']}/", None),
        ("get", f"/api/store-problems/?namespace={ns}", None),
        ("post", "/api/recall/", {**bound, "query": "roadmap"}),
        ("post", "/api/recall/", {"project": "acme/web", "user": subject, "query": "roadmap"}),
        # writes
        ("post", "/api/memories/", {**bound, "key": "k", "value": "v"}),
        (
            "post",
            "/api/memories/",
            {"project": "acme/web", "user": subject, "key": "k", "value": "v"},
        ),
        ("delete", f"/api/memories/{t['memory']}/", None),
        ("post", "/api/session-summaries/", {**bound, "session_id": "s", "summary": "x"}),
        ("post", "/api/crystallize/", {**bound, "messages": []}),
        ("post", f"/api/review-items/{t['item']}/approve/", None),
        ("post", f"/api/review-items/{t['item']}/reject/", None),
        # erase, purge, wipe
        ("post", f"/api/memories/{t['memory']}/erase/", None),
        ("post", f"/api/memories/{t['deleted']}/erase/", None),
        ("post", "/api/erasures/", {"namespace": ns}),
        ("post", "/api/erasures/", {"ids": [t["memory"]]}),
        ("post", "/api/erasures/", {"subject": subject}),
        ("post", "/api/erasures/", {"subject": subject, "namespace": ns}),
        ("post", "/api/review-items/purge/", {"namespace": ns}),
        ("post", "/api/wipe-all/", bound),
    ]


def call(client, method, path, body):
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


def snapshot():
    return {
        model.__name__: sorted(
            model.objects.values_list("pk", flat=True)
            if model is not Memory
            else model.objects.values_list("pk", "deleted_at")
        )
        for model in (Memory, SessionSummary, ReviewItem, MemoryEvent, ErasureReceipt)
    }


def test_acme_gets_404_for_every_globex_route_and_cannot_tell_them_from_missing(globex):
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    before = snapshot()
    hidden = requests_for(globex)
    missing = requests_for(FAKE)
    assert len(hidden) == len(missing) >= 29
    for (method, path, body), fake in zip(hidden, missing, strict=True):
        r = call(acme, method, path, body)
        assert r.status_code == 404, (method, path, r.status_code, r.content)
        assert b"globex" not in r.content
        twin = call(acme, *fake)
        assert (twin.status_code, twin.json()) == (404, r.json()), (method, path)
    assert snapshot() == before  # nothing of globex was read, changed or erased


def test_lists_without_a_namespace_leave_globex_out(globex):
    acme = token_client("acme-app", ["acme/"], write=True, erase=True)
    MemoryManager(project="acme/web").upsert("ours", "acme row")
    for path in (
        "/api/memories/",
        "/api/session-summaries/",
        "/api/review-items/",
        "/api/events/",
    ):
        r = acme.get(path)
        assert r.status_code == 200
        assert b"globex" not in r.content, path
    assert acme.post("/api/review-items/purge/", {}, format="json").json()["purged"] == 0
    assert ReviewItem.objects.filter(namespace=GLOBEX).exists()


def test_globex_still_works_for_globex(globex):
    client = token_client("globex-reader", ["globex/"])
    assert client.get(f"/api/memories/{globex['memory']}/").status_code == 200
    assert client.get("/api/exports/", {"namespace": GLOBEX}).status_code == 200
