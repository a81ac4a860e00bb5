"""The review-queue endpoints: crystallize, list, read, approve, reject, purge."""

from __future__ import annotations

import json

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem

pytestmark = pytest.mark.django_db

MESSAGES = [
    {"role": "user", "content": "I prefer tabs over spaces."},
    {"role": "assistant", "content": "We decided to use MySQL."},  # not a user message
    {"role": "user", "content": [{"type": "text", "text": "We decided to use Postgres."}]},
    {"role": "user", "content": [{"type": "image", "url": "x"}]},
    {"role": "tool", "content": None},
]


def crystallize(client, **body):
    body = {"project": "acme/web", "user": "acme/alice", "messages": MESSAGES, **body}
    return client.post("/api/crystallize/", body, format="json")


def test_crystallize_queues_review_items_never_memories(acme):
    r = crystallize(acme, session_id="s-1")
    assert r.status_code == 200, r.content
    items = r.json()["items"]
    assert {i["key_normalized"] for i in items} == {
        "preference_tabs_over_spaces",
        "decision_use_postgres",
    }
    assert all(i["status"] == "pending" and i["source_session"] == "s-1" for i in items)
    assert all(i["namespace"] == "acme/web" and i["subject"] == "acme/alice" for i in items)
    assert not Memory.objects.exists()
    again = crystallize(acme).json()["items"]  # the same pending keys fold
    assert {i["occurrences"] for i in again} == {2}
    assert ReviewItem.objects.count() == 2


@pytest.mark.parametrize(
    "messages",
    [
        "not a list",
        [{"content": "no role"}],
        [{"role": "user", "content": 42}],
        [{"role": "user", "content": [{"text": "no type"}]}],
        [{"role": "user", "content": [{"type": "text", "text": 7}]}],
        [{"role": "user", "content": "nul \x00 byte"}],
        [{"role": "user", "content": "x"}] * 1001,
    ],
)
def test_malformed_messages_are_400(acme, messages):
    r = crystallize(acme, messages=messages)
    assert r.status_code == 400, r.content
    assert "messages" in r.json()
    assert not ReviewItem.objects.exists()


def test_crystallize_needs_write(acme):
    reader = token_client("reader", ["acme/"])
    assert crystallize(reader).status_code == 403
    assert crystallize(acme, project="globex/web").status_code == 404


@pytest.fixture
def queued():
    mm = MemoryManager(project="acme/web", user="acme/alice")
    return {i.type: i for i in mm.crystallize_user_messages(MESSAGES)}


def test_list_and_read_review_items(acme, queued):
    r = acme.get("/api/review-items/", {"status": "pending", "namespace": "acme/web"})
    assert r.status_code == 200
    assert {i["id"] for i in r.json()["results"]} == {i.id for i in queued.values()}
    assert acme.get("/api/review-items/", {"status": "approved"}).json()["count"] == 0
    assert acme.get("/api/review-items/", {"status": "maybe"}).status_code == 400
    item = queued["decision"]
    assert acme.get(f"/api/review-items/{item.id}/").json()["evidence"] == item.evidence
    assert acme.get("/api/review-items/nope/").status_code == 404


def test_approve_makes_a_memory_and_a_second_approve_is_409(acme, queued):
    item = queued["preference"]
    r = acme.post(f"/api/review-items/{item.id}/approve/")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["review_item"]["status"] == "approved"
    memory = body["memory"]
    assert memory["source"] == "crystallized" and memory["key_normalized"] == item.key_normalized
    assert (memory["scope"], memory["namespace"]) == ("user", "acme/alice")
    again = acme.post(f"/api/review-items/{item.id}/approve/")
    assert again.status_code == 409 and "approved" in again.json()["detail"]
    assert acme.post(f"/api/review-items/{item.id}/reject/").status_code == 409
    # The decision is audited once, with the API client as the actor (as in the admin).
    (event,) = MemoryEvent.objects.filter(memory_id=item.id)
    assert (event.event_type, event.actor) == ("review_approve", "api:acme-app")
    assert json.loads(event.detail) == {"memory": memory["id"]}


def test_an_operation_without_body_takes_an_empty_form_but_no_fields_in_any_type(acme, queued):
    """Before the bodies were checked an approve never read its body: an empty form (Django's
    test client, a plain HTML form) was accepted, and is still; a form naming fields is the
    400 a JSON body naming them is; a body the API cannot parse is a 415."""
    item = queued["decision"]
    url = f"/api/review-items/{item.id}/reject/"
    assert acme.post(url, {"why": "x"}, format="multipart").status_code == 400
    assert acme.post(url, "why=x", content_type="text/plain").status_code == 415
    assert ReviewItem.objects.get(pk=item.id).status == "pending"
    assert acme.post(url, {}, format="multipart").status_code == 200


def test_reject(acme, queued):
    item = queued["decision"]
    r = acme.post(f"/api/review-items/{item.id}/reject/")
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    assert acme.post(f"/api/review-items/{item.id}/approve/").status_code == 409
    assert not Memory.objects.exists()
    (event,) = MemoryEvent.objects.filter(memory_id=item.id)
    assert (event.event_type, event.actor) == ("review_reject", "api:acme-app")


def test_decisions_need_write_and_the_subject_namespace(queued):
    reader = token_client("reader", ["acme/"])
    item = queued["preference"]
    assert reader.post(f"/api/review-items/{item.id}/approve/").status_code == 403
    assert reader.post(f"/api/review-items/{item.id}/reject/").status_code == 403
    # A user-scope item becomes a memory in acme/alice: a client granted only
    # acme/web may reject it but not approve it.
    web = token_client("web", ["acme/web"], write=True)
    assert web.post(f"/api/review-items/{item.id}/approve/").status_code == 403
    assert ReviewItem.objects.get(pk=item.id).status == "pending"
    assert web.post(f"/api/review-items/{queued['decision'].id}/approve/").status_code == 200


def test_purge_erases_review_items_with_a_receipt(acme, queued):
    MemoryManager(project="acme/api").crystallize_user_messages(MESSAGES)
    acme.post(f"/api/review-items/{queued['decision'].id}/reject/")
    r = acme.post("/api/review-items/purge/", {"status": "rejected"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["purged"] == 1
    receipt = ErasureReceipt.objects.get(pk=r.json()["receipts"][0])
    assert receipt.counts["memory_review_queue"] == 1
    assert not ReviewItem.objects.filter(pk=queued["decision"].id).exists()

    r = acme.post("/api/review-items/purge/", {"namespace": "acme/web"}, format="json")
    assert r.json()["purged"] == 1
    r = acme.post("/api/review-items/purge/", {}, format="json")  # every granted namespace
    assert r.json()["purged"] == 2
    assert not ReviewItem.objects.exists()


def test_purge_needs_erase_and_stays_in_the_grants(queued):
    MemoryManager(project="globex/web").crystallize_user_messages(MESSAGES)
    writer = token_client("writer", ["acme/"], write=True)
    assert writer.post("/api/review-items/purge/", {}, format="json").status_code == 403
    eraser = token_client("eraser", ["acme/"], erase=True)
    body = {"namespace": "globex/web"}
    assert eraser.post("/api/review-items/purge/", body, format="json").status_code == 404
    assert eraser.post("/api/review-items/purge/", {}, format="json").json()["purged"] == 2
    assert ReviewItem.objects.filter(namespace="globex/web").count() == 2
    bad = eraser.post("/api/review-items/purge/", {"status": "done"}, format="json")
    assert bad.status_code == 400 and "status" in bad.json()


def test_the_purge_route_is_not_a_review_item(acme):
    assert acme.get("/api/review-items/purge/").status_code == 404


def test_items_say_how_many_others_proposed_the_key_and_whether_subjects_are_uncertain(acme):
    words = [{"role": "user", "content": "We decided to use Postgres for the ledger."}]
    for user in ("acme/alice", "acme/dave", "acme/erin"):
        MemoryManager(project="acme/web", user=user).crystallize_user_messages(words)
    (pref,) = MemoryManager(project="acme/web", user="acme/alice").crystallize_user_messages(
        [{"role": "user", "content": "I prefer tabs over spaces."}]
    )
    ReviewItem.objects.filter(pk=pref.pk).update(subjects_uncertain=True)
    listed = acme.get("/api/review-items/", {"namespace": "acme/web"}).json()["results"]
    by_scope = {}
    for item in listed:
        by_scope.setdefault(item["scope"], []).append(item)
    assert [i["other_proposers"] for i in by_scope["project"]] == [2, 2, 2]
    assert [(i["other_proposers"], i["subjects_uncertain"]) for i in by_scope["user"]] == [
        (0, True)
    ]
    one = acme.get(f"/api/review-items/{by_scope['project'][0]['id']}/").json()
    assert one["other_proposers"] == 2 and one["subjects_uncertain"] is False
    # Approving one approves its siblings: none is left pending, and decided siblings
    # still count each other.
    assert acme.post(f"/api/review-items/{one['id']}/approve/").status_code == 200
    pending = acme.get("/api/review-items/", {"status": "pending"}).json()["results"]
    assert [i["scope"] for i in pending] == ["user"]
    approved = acme.get("/api/review-items/", {"status": "approved"}).json()["results"]
    assert sorted(i["other_proposers"] for i in approved) == [2, 2, 2]


def test_filter_by_subjects_uncertain_and_a_bad_value_is_refused_without_echo(acme):
    words = [{"role": "user", "content": "We decided to use Postgres for the ledger."}]
    (sure,) = MemoryManager(project="acme/web", user="acme/alice").crystallize_user_messages(words)
    (unsure,) = MemoryManager(project="acme/web", user="acme/dave").crystallize_user_messages(
        [{"role": "user", "content": "I prefer tabs over spaces."}]
    )
    ReviewItem.objects.filter(pk=unsure.pk).update(subjects_uncertain=True)

    def ids(value):
        r = acme.get("/api/review-items/", {"subjects_uncertain": value})
        return r.status_code, [i["id"] for i in r.json().get("results", [])]

    assert ids("true") == (200, [unsure.pk])
    assert ids("false") == (200, [sure.pk])
    r = acme.get("/api/review-items/", {"subjects_uncertain": "maybe<script>"})
    assert r.status_code == 400 and b"maybe" not in r.content and b"true, false" in r.content
