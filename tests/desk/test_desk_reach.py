"""A tenant-scoped officer's erase or export of a person reaches their tenants' namespaces
only (issue #39 review): a key of acme/ may have written a project memory in globex/,
and acme's officer must neither download nor erase it — by the admin's Erase and Export
pages, the API, or a subject request's actions. An unscoped officer still reaches every
namespace."""

from __future__ import annotations

import json

import pytest

from memoryapp import MemoryManager
from memoryapp.compliance import desk
from memoryapp.models import Memory
from tests._admin_support import ERASE_SUBJECT, EXPORT, client_for
from tests.desk.test_desk_tenant_records import wipe_officer, wipe_officer_api

pytestmark = pytest.mark.django_db

KEY = "acme/alice"
SECRET = "GLOBEX INTERNAL PLAN"


@pytest.fixture
def across():
    """acme/alice's rows: a user memory, a project memory in acme/ and one in globex/."""
    MemoryManager(project="acme/web", user=KEY).upsert("editor", "vim", ["preference"])
    MemoryManager(project="acme/web", user=KEY).upsert("ci", "make test for acme")
    MemoryManager(project="globex/support", user=KEY).upsert("plan", SECRET)
    assert Memory.objects.filter(namespace="globex/support", content=SECRET).exists()


def _globex_row_kept() -> bool:
    return Memory.objects.filter(namespace="globex/support", content=SECRET).exists()


def test_the_admin_export_and_erase_stay_in_the_officers_tenants(across):
    client = client_for(wipe_officer("dpo-acme", "acme/"))
    download = client.post(EXPORT, {"subject": KEY, "post": "yes"})
    assert download.status_code == 200
    body = b"".join(download.streaming_content) if download.streaming else download.content
    assert b"make test for acme" in body and SECRET.encode() not in body
    confirm = client.post(ERASE_SUBJECT, {"subject": KEY, "include_authored": "on"})
    assert b"globex/support" not in confirm.content
    # The project memory written in globex/ is not counted either (1 of the 2 written).
    assert b"The 1 project memory this user wrote" in confirm.content
    kept = client.post(ERASE_SUBJECT, {"subject": KEY})
    assert b"1 project memory this user wrote will be" in kept.content
    done = client.post(ERASE_SUBJECT, {"subject": KEY, "include_authored": "on", "post": "yes"})
    assert done.status_code == 302, done.content
    assert _globex_row_kept()
    assert not Memory.objects.filter(namespace="acme/web", content="make test for acme").exists()


def test_an_unscoped_officer_still_reaches_every_namespace(across):
    client = client_for(wipe_officer("chief"))
    done = client.post(ERASE_SUBJECT, {"subject": KEY, "include_authored": "on", "post": "yes"})
    assert done.status_code == 302, done.content
    assert not _globex_row_kept()


def test_the_api_stays_in_the_officers_tenants(across):
    client = wipe_officer_api("dpo-api", "acme/")
    exported = client.get("/api/exports/", {"subject": KEY})
    assert exported.status_code == 200
    assert "make test for acme" in json.dumps(exported.json()) and SECRET not in json.dumps(
        exported.json()
    )
    looked = client.post("/api/subject-requests/lookup/", {"subject": KEY}, format="json")
    assert looked.status_code == 200, looked.content
    assert "globex/support" not in json.dumps(looked.json())
    r = client.post("/api/erasures/", {"subject": KEY, "include_authored": True}, format="json")
    assert r.status_code in (200, 201, 202), r.content
    assert _globex_row_kept()
    assert not Memory.objects.filter(namespace="acme/web", content="make test for acme").exists()


def test_a_requests_actions_stay_in_the_officers_tenants(across):
    user = wipe_officer("dpo-desk", "acme/")
    made = desk.open_request(subject=KEY, right="erasure", actor="intake")
    documents = desk.export_for(made, actor="dpo", user=user)
    assert SECRET not in json.dumps(documents) and "make test for acme" in json.dumps(documents)
    desk.erase_for(made, actor="dpo", purge=False, user=user)
    assert _globex_row_kept()
    assert not Memory.objects.filter(namespace=KEY).exists()
