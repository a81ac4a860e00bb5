"""Token authentication: hashed tokens, read with the user's grants in one statement."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient, APIRequestFactory

from memoryapp import MemoryManager
from memoryapp.api.authentication import PREFETCHED_GRANTS, TokenAuthentication, _touch
from memoryapp.api.models import LAST_USED_RESOLUTION, ApiToken, NamespaceGrant, digest_of
from memoryapp.api.testing import token_client

pytestmark = pytest.mark.django_db

GRANTS_TABLE = NamespaceGrant._meta.db_table
TOKENS_TABLE = ApiToken._meta.db_table


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
    assert len(touching) == 1 and TOKENS_TABLE in touching[0]
    # Within the minute, the token's table is read once and not written.
    with CaptureQueriesContext(connection) as ctx:
        assert _recall(client).status_code == 200
    assert len([q for q in ctx.captured_queries if TOKENS_TABLE in q["sql"]]) == 1


def test_the_grants_read_with_the_token_are_the_user_s_rows():
    client = token_client("acme-app", ["acme/", "beta/web", ""], write=True)
    NamespaceGrant.objects.filter(user=client.user, namespace="beta/web").update(
        can_write=False, can_erase=True
    )
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {client.token}")
    user, token = TokenAuthentication().authenticate(request)
    assert token.digest == digest_of(client.token) and user.pk == client.user.pk
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


def _get(token: str):
    return APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/memories/")


def test_the_database_never_holds_a_clear_token(raw_sql):
    client = token_client("acme-app", ["acme/"])
    assert _recall(client).status_code == 200
    tables = connection.introspection.table_names()
    quote = connection.ops.quote_name
    for table in tables:
        for row in raw_sql(f"SELECT * FROM {quote(table)}"):
            assert not any(client.token in str(cell) for cell in row), table


def test_the_clear_token_authenticates_and_its_hash_or_prefix_do_not():
    client = token_client("acme-app", ["acme/"])
    stored = ApiToken.objects.get(user=client.user)
    assert _get(client.token).status_code == 200
    for wrong in (stored.digest, stored.prefix, client.token[:-1], client.token + "0"):
        r = _get(wrong)
        assert r.status_code == 401 and "Invalid token" in r.json()["detail"]


def test_a_revoked_token_is_refused_on_the_next_request_and_others_keep_working():
    client = token_client("acme-app", ["acme/"])
    second = token_client("acme-app", ["acme/"])  # the same client, a second token
    assert _get(client.token).status_code == 200 and _get(second.token).status_code == 200
    ApiToken.objects.filter(digest=digest_of(client.token)).delete()
    assert _get(client.token).status_code == 401
    assert _get(second.token).status_code == 200


def test_last_use_is_recorded_at_most_once_a_minute():
    client = token_client("acme-app", ["acme/"])
    token = ApiToken.objects.get(user=client.user)
    assert token.last_used_at is None
    before = timezone.now()
    assert _get(client.token).status_code == 200
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None and first >= before
    with CaptureQueriesContext(connection) as ctx:
        for _ in range(5):
            assert _get(client.token).status_code == 200
    writes = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    assert not [w for w in writes if TOKENS_TABLE in w]
    token.refresh_from_db()
    assert token.last_used_at == first
    # A minute later (the row's clock moved back), the next request records it again.
    earlier = first - LAST_USED_RESOLUTION - dt.timedelta(seconds=1)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=earlier)
    assert _get(client.token).status_code == 200
    token.refresh_from_db()
    assert token.last_used_at > first


@pytest.mark.django_db(transaction=True)
def test_requests_racing_on_a_stale_token_record_its_last_use_once():
    """The refresh is a conditional UPDATE: of requests that all read a stale value, one writes."""
    client = token_client("acme-app", ["acme/"])
    workers = 6
    for _round in range(10):
        ApiToken.objects.filter(user=client.user).update(last_used_at=None)
        barrier = threading.Barrier(workers)
        wrote: list[bool] = []
        errors: list[BaseException] = []

        def request(barrier=barrier, wrote=wrote, errors=errors):
            try:
                token = ApiToken.objects.get(user=client.user)  # each reads the stale value
                barrier.wait()
                wrote.append(_touch(token))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=request) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(wrote) == workers
        assert wrote.count(True) == 1
        assert ApiToken.objects.get(user=client.user).last_used_at is not None


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_an_existing_clear_token_which_keeps_working():
    """A DRF ``authtoken_token`` row from before the migration authenticates afterwards."""
    client = token_client("legacy-app", ["acme/"])
    user_id = client.user.pk
    legacy = "a" * 8 + "0123456789abcdef0123456789abcdef"  # 40 characters, like DRF's keys
    executor = MigrationExecutor(connection)
    before = [("memoryapp_api", "0001_initial")]
    latest = executor.loader.graph.leaf_nodes("memoryapp_api")
    quote = connection.ops.quote_name
    try:
        executor.migrate(before)
        with connection.cursor() as cursor:
            # DRF's table (rest_framework/authtoken/migrations/0001_initial.py).
            cursor.execute(
                f"CREATE TABLE {quote('authtoken_token')} ({quote('key')} varchar(40)"
                f" PRIMARY KEY, {quote('created')} {connection.data_types['DateTimeField']}"
                f" NOT NULL, {quote('user_id')} integer NOT NULL UNIQUE)"
            )
            created = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
            cursor.execute(
                f"INSERT INTO {quote('authtoken_token')} VALUES (%s, %s, %s)",
                [legacy, created, user_id],
            )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {quote('authtoken_token')}")
            assert cursor.fetchone()[0] == 0  # the clear row is gone
        migrated = ApiToken.objects.get(digest=digest_of(legacy))
        assert migrated.user_id == user_id and migrated.prefix == legacy[:8]
        assert migrated.created_at == created
        assert _get(legacy).status_code == 200
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {quote('authtoken_token')}")
        MigrationExecutor(connection).migrate(latest)
