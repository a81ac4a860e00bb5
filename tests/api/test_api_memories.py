"""The memories endpoints: upsert, list and filters, read, soft delete; auth and field errors."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import Memory, MemoryEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme():
    return token_client("acme-app", ["acme/"], write=True)


def save(client, **body):
    body.setdefault("project", "acme/web")
    return client.post("/api/memories/", body, format="json")


def staff(name: str, *codenames: str):
    user = get_user_model().objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get(pk=user.pk))
    return client


# ------------------------------------------------------------------ upsert
def test_upsert_creates_201_then_updates_200_in_place(acme):
    first = save(acme, key="  Build Command ", value="Run make test", tags=["CI"])
    assert first.status_code == 201
    body = first.json()
    assert first["Location"].endswith(f"/api/memories/{body['id']}/")
    assert body["key_normalized"] == "build_command" and body["title"] == "Build Command"
    assert body["scope"] == "project" and body["type"] == "note"
    assert body["namespace"] == "acme/web" and body["tags"] == ["CI"]
    assert body["source"] == "explicit" and body["confidence"] == "explicit_user"
    assert "ci" in body["keywords"] and body["deleted_at"] is None

    second = save(acme, key="build   COMMAND", value="Run make check")
    assert second.status_code == 200
    assert second.json()["id"] == body["id"]
    assert second.json()["created_at"] == body["created_at"]
    assert second.json()["updated_at"] > body["updated_at"]
    assert Memory.objects.get(pk=body["id"]).content == "Run make check"
    events = MemoryEvent.objects.filter(memory_id=body["id"]).values_list("event_type", "actor")
    assert list(events) == [("create", "api:acme-app"), ("update", "api:acme-app")]


def test_user_scope_lands_in_the_user_namespace(acme):
    r = save(acme, user="acme/alice", key="editor", value="vim", tags=["preference"])
    assert r.status_code == 201
    assert r.json()["scope"] == "user" and r.json()["type"] == "preference"
    assert r.json()["namespace"] == "acme/alice" and r.json()["subject"] == "acme/alice"


def test_explicit_scope_and_type_win(acme):
    r = save(acme, user="acme/alice", key="deploy", value="friday", scope="user", type="decision")
    assert (r.json()["scope"], r.json()["type"]) == ("user", "decision")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"key": "!!!", "value": "x"}, "key", "Memory key is empty after normalization"),
        ({"key": "a\nb", "value": "x"}, "key", "Memory key/title must be single-line"),
        ({"key": "k", "value": "   "}, "value", "Memory content is empty"),
        ({"key": "k", "value": "x" * 4001}, "value", "Memory content exceeds max length"),
        ({"key": "k", "value": "v", "scope": "global"}, "scope", "not a valid choice"),
        ({"key": "k", "value": "v", "type": "fact"}, "type", "not a valid choice"),
        ({"key": "k", "value": "v", "tags": "ci"}, "tags", "Expected a list"),
        ({"key": "k", "value": "v", "tags": [1, None]}, "tags", ""),
        ({"value": "v"}, "key", "This field is required."),
        ({"key": "k"}, "value", "This field is required."),
        ({"key": "k", "value": "v\x00"}, "value", "Null characters are not allowed."),
        ({"key": "k", "value": "v", "project": None}, "project", "may not be null"),
        ({"key": "k", "value": "v", "project": "p" * 256}, "project", "no more than 255"),
    ],
)
def test_invalid_input_is_a_field_level_400(acme, body, field, message):
    r = save(acme, **body)
    assert r.status_code == 400, r.content
    errors = r.json()
    assert field in errors
    assert message in str(errors[field])
    assert not Memory.objects.exists()


SECRETS = [
    "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    "ghp_" + "A" * 36,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "password=" + "hunter2hunter2",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Authorization: Bearer " + "abcdefghijklmnopqrstuvwxyz0123",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_sensitive_value_is_refused_and_never_echoed(acme, secret):
    r = save(acme, key="creds", value=f"the deploy key is {secret} ok")
    assert r.status_code == 400
    assert r.json() == {"value": ["content appears to contain sensitive credentials"]}
    assert secret not in r.content.decode()
    assert not Memory.objects.exists() and not MemoryEvent.objects.exists()


def test_a_sensitive_key_is_refused_and_never_echoed(acme):
    secret = "ghp_" + "Z" * 36
    r = save(acme, key=f"token {secret}", value="plain")
    assert r.status_code == 400
    assert list(r.json()) == ["key"]
    assert secret not in r.content.decode()
    assert not Memory.objects.exists()


# ------------------------------------------------------------------- lists
@pytest.fixture
def seeded():
    mm = MemoryManager(project="acme/web", user="acme/alice")
    rows = {
        "build": mm.upsert("build", "make test in src/app.py", ["CI", "Café"]),
        "pct": mm.upsert("discount", "100% off_label price", ["sales"]),
        "pref": mm.upsert("editor", "vim", ["preference"]),
        "dec": mm.upsert("db", "use postgres", type="decision"),
    }
    MemoryManager(project="acme/api").upsert("other", "another project")
    gone = mm.upsert("old", "deleted later")
    mm.delete(gone.id)
    return rows


def ids(response):
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_list_is_paginated_and_shows_only_live_rows(acme, seeded):
    r = acme.get("/api/memories/", {"page_size": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == 5 and len(body["results"]) == 2 and body["next"]
    assert acme.get(body["next"]).json()["previous"]
    assert not Memory.objects.live().filter(key_normalized="old").exists()
    past = acme.get("/api/memories/", {"page": 99})
    assert past.status_code == 400
    assert past.json() == {"page": ["No such page: this list has pages 1 to 1."]}


@pytest.mark.parametrize("page", ["0", "abc", "-1", "1.5", "9" * 30, ""])
def test_a_malformed_page_is_a_400_naming_it(acme, seeded, page):
    r = acme.get("/api/memories/", {"page": page})
    assert r.status_code == 400, r.content
    assert r.json() == {"page": ["A page number: an integer from 1."]}


def test_list_filters(acme, seeded):
    get = acme.get
    assert len(ids(get("/api/memories/", {"namespace": "acme/web"}))) == 3
    assert ids(get("/api/memories/", {"namespace": "acme/alice"})) == {seeded["pref"].id}
    assert ids(get("/api/memories/", {"scope": "user"})) == {seeded["pref"].id}
    assert ids(get("/api/memories/", {"type": "decision"})) == {seeded["dec"].id}
    assert ids(get("/api/memories/", {"tag": "ci"})) == {seeded["build"].id}
    assert ids(get("/api/memories/", {"tag": "C"})) == set()  # exact tag, not a substring
    assert ids(get("/api/memories/", {"tag": "CAFÉ"})) == {seeded["build"].id}
    assert ids(get("/api/memories/", {"q": "SRC/APP"})) == {seeded["build"].id}
    assert ids(get("/api/memories/", {"q": "%"})) == {seeded["pct"].id}  # literal, not LIKE
    assert ids(get("/api/memories/", {"q": "f_l"})) == {seeded["pct"].id}
    assert ids(get("/api/memories/", {"q": '", "'})) == set()  # never matches JSON syntax
    assert ids(get("/api/memories/", {"subject": "acme/alice"})) == {
        seeded[k].id for k in ("build", "pct", "pref", "dec")
    }
    assert get("/api/memories/", {"scope": "galaxy"}).status_code == 400
    assert get("/api/memories/", {"q": "a\x00b"}).status_code == 400


def test_search_needles_with_json_characters_are_matched_exactly(acme):
    mm = MemoryManager(project="acme/web")
    hit = mm.upsert("palette", 'colours: red, green ["primary"]', ["a", "b"])
    for needle in ("red, green", '["primary"]', "RED,"):
        assert ids(acme.get("/api/memories/", {"q": needle})) == {hit.id}, needle
    assert ids(acme.get("/api/memories/", {"q": 'a", "b'})) == set()  # tags ["a", "b"]


def test_namespace_filter_on_the_single_tenant_namespace(seeded):
    client = token_client("single", [""], write=True)
    MemoryManager(project="").upsert("solo", "single tenant")
    assert len(ids(client.get("/api/memories/?namespace="))) == 1
    assert len(ids(client.get("/api/memories/"))) == 1  # acme's rows are not granted


# ------------------------------------------------------------- read, delete
def test_retrieve_and_unknown_ids(acme, seeded):
    m = seeded["build"]
    r = acme.get(f"/api/memories/{m.id}/")
    assert r.status_code == 200 and r.json()["content"] == m.content
    assert acme.get("/api/memories/0000000000000000/").status_code == 404
    assert acme.get("/api/memories/%00/").status_code == 404
    assert acme.get("/api/memories/" + "f" * 200 + "/").status_code == 404


def test_delete_is_soft_and_a_second_delete_is_404(acme, seeded):
    m = seeded["build"]
    assert acme.delete(f"/api/memories/{m.id}/").status_code == 204
    assert acme.delete(f"/api/memories/{m.id}/").status_code == 404
    assert acme.get(f"/api/memories/{m.id}/").status_code == 404
    row = Memory.objects.get(pk=m.id)
    assert row.deleted_at is not None and row.content == m.content  # soft: still stored
    assert MemoryEvent.objects.filter(memory_id=m.id, event_type="soft_delete").count() == 1


# ---------------------------------------------------------- auth and rights
def test_unauthenticated_and_bad_tokens_are_401(seeded):
    anonymous = APIClient()
    assert anonymous.get("/api/memories/").status_code == 401
    assert anonymous.post("/api/memories/", {}, format="json").status_code == 401
    bad = APIClient(HTTP_AUTHORIZATION="Token not-a-token")
    assert bad.get("/api/memories/").status_code == 401


def test_session_authentication_works():
    user = get_user_model().objects.create_user("operator", password="pw")
    from memoryapp.api.models import NamespaceGrant

    NamespaceGrant.objects.create(user=user, namespace="acme/web")
    client = APIClient()
    assert client.login(username="operator", password="pw")
    assert client.get("/api/memories/").status_code == 200


def test_a_read_only_grant_reads_but_gets_403_on_writes(seeded):
    reader = token_client("reader", ["acme/"])
    m = seeded["build"]
    assert reader.get(f"/api/memories/{m.id}/").status_code == 200
    assert save(reader, key="k", value="v").status_code == 403
    assert reader.delete(f"/api/memories/{m.id}/").status_code == 403
    assert Memory.objects.get(pk=m.id).deleted_at is None


def test_an_exact_grant_covers_only_itself(seeded):
    web = token_client("web-only", ["acme/web"], write=True)
    assert len(ids(web.get("/api/memories/"))) == 3
    assert web.get(f"/api/memories/{seeded['pref'].id}/").status_code == 404  # acme/alice
    assert save(web, project="acme/api", key="k", value="v").status_code == 404
    assert save(web, user="acme/alice", key="k", value="v").status_code == 404


def test_a_prefix_grant_covers_only_namespaces_below_it():
    for ns in ("acme", "acmecorp/web", "acme/web"):
        MemoryManager(project=ns).upsert("k", f"row of {ns}")
    client = token_client("prefix", ["acme/"])
    assert {r["namespace"] for r in client.get("/api/memories/").json()["results"]} == {"acme/web"}


def test_staff_with_model_permissions_see_and_change_every_namespace(seeded):
    admin = staff("ops", "view_memory", "add_memory", "change_memory", "delete_memory")
    assert len(ids(admin.get("/api/memories/"))) == 5
    r = admin.post(
        "/api/memories/", {"project": "globex/web", "key": "k", "value": "v"}, format="json"
    )
    assert r.status_code == 201
    assert admin.delete(f"/api/memories/{seeded['build'].id}/").status_code == 204


def test_staff_without_the_permission_get_403_or_404(seeded):
    viewer = staff("viewer", "view_memory")
    assert viewer.get(f"/api/memories/{seeded['build'].id}/").status_code == 200
    assert viewer.delete(f"/api/memories/{seeded['build'].id}/").status_code == 403
    nobody = staff("nobody")
    assert nobody.get(f"/api/memories/{seeded['build'].id}/").status_code == 404
    assert ids(nobody.get("/api/memories/")) == set()
