"""Erasure over the API: targets, rights, Idempotency-Key replay, receipts, exports."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from memoryapp import MemoryManager
from memoryapp.api.models import ErasureRequest
from memoryapp.api.testing import token_client
from memoryapp.compliance.leases import worker_name
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ReviewItem,
    SessionSummary,
    new_request_id,
)

pytestmark = pytest.mark.django_db

MARK = "zebracornflake"  # erased text: never in a receipt


@pytest.fixture
def alice():
    """Rows of every kind for subject acme/alice, and one of acme/bob's."""
    mm = MemoryManager(project="acme/web", user="acme/alice")
    rows = {
        "pref": mm.upsert("editor", f"vim {MARK}", ["preference"]),
        "gone": mm.upsert("old note", f"old {MARK}"),
        "project": mm.upsert("ci", f"make test {MARK}"),
    }
    mm.delete(rows["gone"].id)
    mm.save_session_summary(f"summary {MARK}")
    mm.crystallize_user_messages([{"role": "user", "content": "I prefer dark mode."}])
    rows["bob"] = MemoryManager(project="acme/web", user="acme/bob").upsert(
        "editor", "emacs", ["preference"]
    )
    return rows


def erase(client, body, **headers):
    return client.post("/api/erasures/", body, format="json", **headers)


def test_erase_one_memory_live_or_soft_deleted(acme, alice):
    for key in ("pref", "gone"):
        m = alice[key]
        r = acme.post(f"/api/memories/{m.id}/erase/")
        assert r.status_code == 201, r.content
        receipt = r.json()
        assert receipt["counts"]["memories"] == 1 and receipt["target_kind"] == "ids"
        assert receipt["erased_ids"]["memories"] == [m.id]
        assert r["Location"].endswith(f"/api/erasures/{receipt['id']}/")
        assert MARK not in r.content.decode()
        assert not Memory.objects.filter(pk=m.id).exists()
        assert not MemoryEvent.objects.filter(memory_id=m.id).exists()
        assert acme.post(f"/api/memories/{m.id}/erase/").status_code == 404


def test_erase_a_subject(acme, alice):
    r = erase(acme, {"subject": "acme/alice"})
    assert r.status_code == 201, r.content
    receipt = r.json()
    assert receipt["target_kind"] == "subject" and receipt["subject_hmac"]
    assert "acme/alice" not in r.content.decode() and MARK not in r.content.decode()
    assert not Memory.objects.filter(namespace="acme/alice").exists()
    assert not SessionSummary.objects.filter(subject="acme/alice").exists()
    assert not ReviewItem.objects.filter(subject="acme/alice").exists()
    assert Memory.objects.filter(pk=alice["bob"].id).exists()
    assert Memory.objects.filter(pk=alice["project"].id).exists()  # authored: kept
    r = erase(acme, {"subject": "acme/alice", "include_authored": True})
    assert r.status_code == 201
    assert not Memory.objects.filter(pk=alice["project"].id).exists()


def test_erase_a_namespace_and_ids(acme, alice):
    r = erase(acme, {"ids": [alice["bob"].id, alice["pref"].id]})
    assert r.status_code == 201 and r.json()["counts"]["memories"] == 2
    r = erase(acme, {"namespace": "acme/web"})
    assert r.status_code == 201
    assert not Memory.objects.filter(namespace="acme/web").exists()
    assert not SessionSummary.objects.exists() and not ReviewItem.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "non_field_errors"),
        ({"everything": True, "namespace": "acme/web"}, "everything"),
        ({"subject": "acme/alice", "ids": ["x"]}, "ids"),
        ({"subject": "   "}, "subject"),
        ({"ids": []}, "ids"),
        ({"ids": "abc"}, "ids"),
        ({"namespace": "acme/web", "include_authored": True}, "include_authored"),
        ({"everything": "maybe"}, "everything"),
    ],
)
def test_erasure_input_errors(acme, body, field):
    r = erase(acme, body)
    assert r.status_code == 400 and field in r.json(), r.content
    assert not ErasureReceipt.objects.exists()


def _json_schema(node):
    """OpenAPI 3.0 to JSON Schema, as far as the erasure body needs (``nullable``)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
    return out


@pytest.mark.parametrize(
    "body",
    [
        {"subject": "acme/alice"},
        {"subject": "acme/alice", "namespace": "acme/web", "ids": None, "include_authored": True},
        {"subject": "acme/alice", "namespace": None, "everything": False},
        {"ids": ["x"], "namespace": "acme/web", "subject": None, "include_authored": False},
        {"namespace": "acme/web", "subject": None, "ids": None, "everything": False},
        {"namespace": ""},
        {"everything": True, "subject": None, "namespace": None, "ids": None},
    ],
)
def test_each_valid_erasure_body_matches_exactly_one_declared_shape(acme, client, body):
    import jsonschema

    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/erasures/"]["post"]
    assert operation["requestBody"]["required"] is True
    shapes = schema["components"]["schemas"]["ErasureInputRequest"]["oneOf"]
    matching = [
        shape["title"]
        for shape in shapes
        if jsonschema.Draft4Validator(_json_schema(shape)).is_valid(body)
    ]
    assert len(matching) == 1, matching
    r = erase(acme, {**body, "dry_run": True})
    assert r.status_code in (200, 403, 404), r.content  # never a 400


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"everything": True, "namespace": "acme/web"},
        {"everything": False},
        {"subject": "acme/alice", "ids": ["x"]},
        {"subject": None},
        {"ids": None, "namespace": None},
        {"namespace": "acme/web", "include_authored": True},
        {"ids": ["x"], "include_authored": True},
        {"everything": True, "include_authored": True},
    ],
)
def test_erasure_bodies_the_server_refuses_match_no_declared_shape(acme, client, body):
    import jsonschema

    schema = client.get("/api/schema/", {"format": "json"}).json()
    shapes = schema["components"]["schemas"]["ErasureInputRequest"]["oneOf"]
    assert not any(
        jsonschema.Draft4Validator(_json_schema(shape)).is_valid(body) for shape in shapes
    )
    assert erase(acme, body).status_code == 400


def test_idempotency_key_replays_the_same_receipt(acme, alice):
    first = erase(acme, {"namespace": "acme/web"}, HTTP_IDEMPOTENCY_KEY="gdpr-ticket-17")
    assert first.status_code == 201
    MemoryManager(project="acme/web").upsert("new", "written after the erasure")
    again = erase(acme, {"namespace": "acme/web"}, HTTP_IDEMPOTENCY_KEY="gdpr-ticket-17")
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert ErasureReceipt.objects.count() == 1
    assert Memory.objects.filter(key_normalized="new").exists()  # not erased a second time
    other = erase(acme, {"namespace": "acme/api"}, HTTP_IDEMPOTENCY_KEY="gdpr-ticket-17")
    assert other.status_code == 422
    fresh = erase(acme, {"namespace": "acme/web"}, HTTP_IDEMPOTENCY_KEY="gdpr-ticket-18")
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]
    # Keys are per client: another client's identical key is its own request.
    other_client = token_client("acme-ops", ["acme/"], erase=True)
    theirs = erase(other_client, {"namespace": "acme/web"}, HTTP_IDEMPOTENCY_KEY="gdpr-ticket-17")
    assert theirs.status_code == 201 and theirs.json()["id"] != first.json()["id"]


def test_idempotency_key_of_a_memory_erasure(acme, alice):
    path = f"/api/memories/{alice['pref'].id}/erase/"
    first = acme.post(path, HTTP_IDEMPOTENCY_KEY="k-1")
    again = acme.post(path, HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]


def test_a_bad_idempotency_key_is_400(acme, alice):
    r = erase(acme, {"namespace": "acme/web"}, HTTP_IDEMPOTENCY_KEY="k" * 256)
    assert r.status_code == 400 and "Idempotency-Key" in r.json()
    assert Memory.objects.filter(namespace="acme/web").exists()


def test_a_running_erasure_with_the_same_key_is_409(acme, alice):
    user = get_user_model().objects.get(username="acme-app")
    body = {"namespace": "acme/web"}
    erase(acme, body, HTTP_IDEMPOTENCY_KEY="done")  # learn the fingerprint of this body
    fingerprint = ErasureRequest.objects.get(idempotency_key="done").fingerprint
    running = ErasureRequest.objects.create(
        user=user,
        idempotency_key="busy",
        fingerprint=fingerprint,
        receipt_id=new_request_id(),
        holder=worker_name(),  # this process: alive
        held_until=timezone.now() + dt.timedelta(minutes=5),
    )
    assert erase(acme, body, HTTP_IDEMPOTENCY_KEY="busy").status_code == 409
    # Once its lease has run out, the request is taken over under the same receipt id.
    running.held_until = timezone.now() - dt.timedelta(seconds=1)
    running.save()
    r = erase(acme, body, HTTP_IDEMPOTENCY_KEY="busy")
    assert r.status_code == 201 and r.json()["id"] == running.receipt_id


def test_a_retry_takes_over_from_a_crashed_process_whose_host_and_pid_repeat(acme, alice):
    """A restarted container: same host name, same pid, another process (its start time)."""
    user = get_user_model().objects.get(username="acme-app")
    body = {"namespace": "acme/web"}
    erase(acme, body, HTTP_IDEMPOTENCY_KEY="done")  # learn the fingerprint of this body
    fingerprint = ErasureRequest.objects.get(idempotency_key="done").fingerprint
    host_pid = worker_name().partition("@")[0]
    crashed = ErasureRequest.objects.create(
        user=user,
        idempotency_key="crashed",
        fingerprint=fingerprint,
        receipt_id=new_request_id(),
        holder=f"{host_pid}@1",  # this host and pid, a process that started long ago
        held_until=timezone.now() + dt.timedelta(minutes=5),
    )
    r = erase(acme, body, HTTP_IDEMPOTENCY_KEY="crashed")
    assert r.status_code == 201 and r.json()["id"] == crashed.receipt_id


def test_erasure_rights(alice):
    writer = token_client("writer", ["acme/"], write=True)
    assert erase(writer, {"namespace": "acme/web"}).status_code == 403
    assert writer.post(f"/api/memories/{alice['pref'].id}/erase/").status_code == 403
    eraser = token_client("eraser", ["acme/"], erase=True)
    assert erase(eraser, {"everything": True}).status_code == 403
    assert erase(eraser, {"namespace": "globex/web"}).status_code == 404
    assert erase(eraser, {"ids": [alice["pref"].id, "unknown"]}).status_code == 404
    assert erase(eraser, {"subject": "globex/bob"}).status_code == 404
    assert Memory.objects.filter(pk=alice["pref"].id).exists()


def test_a_subject_with_rows_outside_the_grants_is_erased_within_them(alice):
    # Not a 403 (that would tell the client another tenant holds data about the key):
    # the erasure acts in the client's namespaces only; an operator erases the rest.
    MemoryManager(project="globex/web", user="acme/alice").save_session_summary("elsewhere")
    eraser = token_client("eraser", ["acme/"], erase=True)
    r = erase(eraser, {"subject": "acme/alice"})
    assert r.status_code == 201
    assert r.json()["counts"]["session_summaries"] == 1  # acme/web's, not globex's
    assert r.json()["criteria"]["limited_to_grants"] is True  # acme/ only
    assert not SessionSummary.objects.filter(namespace="acme/web").exists()
    assert SessionSummary.objects.filter(namespace="globex/web").exists()
    r = erase(eraser, {"subject": "acme/alice", "namespace": "acme/web"})
    assert r.status_code == 201
    assert SessionSummary.objects.filter(namespace="globex/web").exists()


def test_staff_erase_everything(alice):
    admin = get_user_model().objects.create_superuser("root", password="x")
    client = APIClient()
    client.force_authenticate(admin)
    r = erase(client, {"everything": True})
    assert r.status_code == 201 and r.json()["target_kind"] == "everything"
    assert not Memory.objects.exists() and not ReviewItem.objects.exists()


def test_receipts_are_read_by_who_asked_and_by_staff(acme, alice):
    receipt = erase(acme, {"namespace": "acme/web"}).json()
    r = acme.get(f"/api/erasures/{receipt['id']}/")
    assert r.status_code == 200 and r.json()["id"] == receipt["id"]
    colleague = token_client("colleague", ["acme/"], erase=True)
    assert colleague.get(f"/api/erasures/{receipt['id']}/").status_code == 404
    assert acme.get("/api/erasures/unknown/").status_code == 404
    admin = get_user_model().objects.create_superuser("root", password="x")
    client = APIClient()
    client.force_authenticate(admin)
    assert client.get(f"/api/erasures/{receipt['id']}/").status_code == 200
    assert client.get("/api/erasures/unknown/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_an_api_erasure_purges_the_bytes(acme, alice):
    r = erase(acme, {"subject": "acme/alice"})
    assert r.status_code == 201
    receipt = r.json()
    assert receipt["purge_status"] == "purged" and receipt["purged"] is True, receipt
    assert receipt["vacuumed"] is True


# ------------------------------------------------------------------- export
def test_export_target_is_declared_as_at_least_one_of_subject_and_namespace(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    (target,) = schema["paths"]["/api/exports/"]["get"]["parameters"]
    assert (target["in"], target["style"], target["explode"], target["required"]) == (
        "query",
        "form",
        True,
        True,
    )
    assert set(target["schema"]["properties"]) == {"subject", "namespace"}
    assert target["schema"]["anyOf"] == [{"required": ["subject"]}, {"required": ["namespace"]}]
    assert target["schema"]["additionalProperties"] is False


def test_export_a_namespace_and_a_subject(acme, alice):
    r = acme.get("/api/exports/", {"namespace": "acme/web"})
    assert r.status_code == 200, r.content
    doc = r.json()
    contents = {m["content"] for m in doc["memories"]}
    assert f"old {MARK}" in contents  # soft-deleted rows are still stored: exported
    assert doc["counts"]["session_summaries"] == 1
    r = acme.get("/api/exports/", {"subject": "acme/alice"})
    assert r.status_code == 200
    assert "emacs" not in r.content.decode()  # bob's
    r = acme.get("/api/exports/", {"subject": "acme/alice", "namespace": "acme/alice"})
    assert {m["namespace"] for m in r.json()["memories"]} == {"acme/alice"}


def test_export_rights_and_input(acme, alice):
    assert acme.get("/api/exports/").status_code == 400
    assert acme.get("/api/exports/", {"subject": " "}).status_code == 400
    blank = acme.get("/api/exports/?subject=&namespace=acme/web")  # not "no subject"
    assert blank.status_code == 400 and "subject" in blank.json()
    # A misspelt parameter must not silently widen a subject's export to every namespace.
    typo = acme.get("/api/exports/", {"subject": "acme/alice", "namesapce": "acme/alice"})
    assert typo.status_code == 400 and "namesapce" in typo.json()
    assert acme.get("/api/exports/", {"namespace": "acme/web", "format": "json"}).status_code == 200
    assert acme.get("/api/exports/", {"namespace": "globex/web"}).status_code == 404
    assert acme.get("/api/exports/", {"subject": "globex/bob"}).status_code == 404
    MemoryManager(project="globex/web", user="acme/alice").save_session_summary("elsewhere")
    scoped = acme.get("/api/exports/", {"subject": "acme/alice"})  # not a 403: no hint
    assert scoped.status_code == 200 and scoped.json()["limited_to_grants"] is True
    assert "elsewhere" not in {s["summary_text"] for s in scoped.json()["session_summaries"]}
    admin = get_user_model().objects.create_superuser("root", password="x")
    client = APIClient()
    client.force_authenticate(admin)
    doc = client.get("/api/exports/", {"subject": "acme/alice"}).json()
    assert "elsewhere" in {s["summary_text"] for s in doc["session_summaries"]}
