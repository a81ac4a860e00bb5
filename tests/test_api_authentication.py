"""Token authentication reads the user's grants in the same statement (one round trip)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient, APIRequestFactory

from memoryapp import MemoryManager
from memoryapp.api.authentication import PREFETCHED_GRANTS, TokenAuthentication
from memoryapp.api.models import NamespaceGrant
from memoryapp.api.testing import token_client

pytestmark = pytest.mark.django_db

GRANTS_TABLE = NamespaceGrant._meta.db_table


def _recall(client, project="acme/web"):
    return client.post(
        "/api/recall/", {"project": project, "query": "deploy", "top_k": 3}, format="json"
    )


def test_a_request_reads_token_and_grants_in_one_statement():
    MemoryManager(project="acme/web").upsert("deploy_notes", "deploy with make release")
    client = token_client("acme-app", ["acme/", "other/exact"])
    with CaptureQueriesContext(connection) as ctx:
        r = _recall(client)
    assert r.status_code == 200 and r.json()["candidates"]
    touching = [q["sql"] for q in ctx.captured_queries if GRANTS_TABLE in q["sql"]]
    assert len(touching) == 1 and "authtoken_token" in touching[0]


def test_the_grants_read_with_the_token_are_the_user_s_rows():
    client = token_client("acme-app", ["acme/", "beta/web", ""], write=True)
    NamespaceGrant.objects.filter(user=client.user, namespace="beta/web").update(
        can_write=False, can_erase=True
    )
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {client.token}")
    user, token = TokenAuthentication().authenticate(request)
    assert token.key == client.token and user.pk == client.user.pk
    read = getattr(user, PREFETCHED_GRANTS)
    expected = list(NamespaceGrant.objects.filter(user=client.user))
    fields = ("pk", "user_id", "namespace", "can_read", "can_write", "can_erase", "created_at")
    assert [[getattr(g, f) for f in fields] for g in read] == [
        [getattr(g, f) for f in fields] for g in expected
    ]
    assert [g.user is user for g in read] == [True] * 3  # no query to reach the user


def test_a_user_without_grants_sees_no_namespace():
    client = token_client("acme-app", ["acme/"])
    NamespaceGrant.objects.filter(user=client.user).delete()
    assert _recall(client).status_code == 404


def test_a_revoked_grant_is_refused_on_the_next_request():
    client = token_client("acme-app", ["acme/", "beta/"])
    assert _recall(client, "beta/web").status_code == 200
    NamespaceGrant.objects.filter(user=client.user, namespace="beta/").delete()
    assert _recall(client, "beta/web").status_code == 404
    assert _recall(client, "acme/web").status_code == 200


def test_a_bad_token_or_an_inactive_user_is_refused():
    client = token_client("acme-app", ["acme/"])
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    r = _recall(bad)
    assert r.status_code == 401 and "Invalid token" in r.json()["detail"]
    client.user.is_active = False
    client.user.save(update_fields=["is_active"])
    r = _recall(client)
    assert r.status_code == 401 and "inactive" in r.json()["detail"]
