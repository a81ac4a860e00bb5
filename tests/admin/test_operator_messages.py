"""Operators are told what happened: a cut key, a scope that fell back, whose page it is."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.admin.memories import USER_SCOPE_WITHOUT_USER
from memoryapp.api.testing import token_client
from memoryapp.facade.core import SCOPE_DOWNGRADE_WARNING
from memoryapp.models import Memory
from memoryapp.rules.validation import KEY_CUT_WARNING
from tests._admin_support import MEMORIES, WIPE, client_for, make_staff, messages_of

pytestmark = pytest.mark.django_db

LONG_KEY = "deployment checklist " * 6  # 126 characters: cut to 80 once normalised


@pytest.fixture
def acme():
    return token_client("acme-app", ["acme/"], write=True)


def test_the_api_warns_when_the_key_is_cut_and_when_user_scope_falls_back(acme):
    r = acme.post(
        "/api/memories/", {"project": "acme/web", "key": LONG_KEY, "value": "v"}, format="json"
    )
    assert r.status_code == 201
    assert r.json()["warnings"] == [KEY_CUT_WARNING]
    r = acme.post(
        "/api/memories/",
        {"project": "acme/web", "key": "short", "value": "v", "scope": "user"},
        format="json",
    )
    assert r.json()["scope"] == "project"
    assert "no user namespace was given" in r.json()["warnings"][0]
    r = acme.post(
        "/api/memories/", {"project": "acme/web", "key": "k", "value": "v"}, format="json"
    )
    assert r.json()["warnings"] == []


@pytest.mark.parametrize("user", ["omitted", None, ""])
def test_the_api_warns_when_user_scope_has_no_user(acme, user):
    body = {"project": "acme/web", "key": "editor", "value": "vim", "scope": "user"}
    if user != "omitted":
        body["user"] = user
    r = acme.post("/api/memories/", body, format="json")
    assert r.status_code == 201
    assert (r.json()["scope"], r.json()["namespace"]) == ("project", "acme/web")
    assert r.json()["warnings"] == [SCOPE_DOWNGRADE_WARNING]
    assert "stored in the project scope" in SCOPE_DOWNGRADE_WARNING
    body["user"] = "acme/bob"  # with a user: the user scope, and nothing to say
    r = acme.post("/api/memories/", body, format="json")
    assert (r.json()["scope"], r.json()["namespace"], r.json()["warnings"]) == (
        "user",
        "acme/bob",
        [],
    )


@pytest.mark.parametrize(
    ("scope", "key"), [("user", "editor"), ("", "user_lang")], ids=["asked", "inferred"]
)
def test_the_admin_warns_when_user_scope_has_no_user_key(scope, key):
    admin = client_for(make_staff("root", superuser=True))
    add = {"namespace": "", "scope": scope, "key": key, "content": "v", "tags": ""}
    r = admin.post(f"{MEMORIES}add/", add, follow=True)
    assert USER_SCOPE_WITHOUT_USER in messages_of(r)
    row = Memory.objects.get()
    assert (row.namespace, row.scope) == ("", "user")  # saved where the message says

    # With a user key as the namespace, or in the project scope: no warning.
    for namespace, scope in (("acme/bob", "user"), ("", "project")):
        add = {"namespace": namespace, "scope": scope, "key": f"k {scope}", "content": "v"}
        r = admin.post(f"{MEMORIES}add/", add, follow=True)
        assert USER_SCOPE_WITHOUT_USER not in messages_of(r), (namespace, scope)
    # Editing the memory later says nothing more (its namespace cannot change).
    r = admin.post(
        f"{MEMORIES}{row.pk}/change/", {"key": key, "content": "v2", "tags": ""}, follow=True
    )
    assert USER_SCOPE_WITHOUT_USER not in messages_of(r)
    assert Memory.objects.get(pk=row.pk).content == "v2"


def test_save_memory_mentions_the_cut():
    mm = MemoryManager(project="acme/web")
    assert "cut to its first 80" in mm.save_memory(LONG_KEY, "v")
    assert mm.save_memory("short", "v") == "Saved memory: short"


def test_the_admin_warns_when_the_key_is_cut():
    admin = client_for(make_staff("root", superuser=True))
    r = admin.post(
        f"{MEMORIES}add/",
        {"namespace": "acme/web", "key": LONG_KEY, "content": "v", "tags": ""},
        follow=True,
    )
    assert KEY_CUT_WARNING in messages_of(r)
    assert len(Memory.objects.get().key_normalized) == 80


def test_the_wipe_pages_keep_the_signed_in_user_in_the_header():
    root = make_staff("root", superuser=True)
    MemoryManager(project="acme/web", user="acme/bob").upsert("user_lang", "English")
    admin = client_for(root)
    for data in (
        {"project": "acme/web", "user": "acme/bob"},
        {"project": "acme/web", "user": "acme/bob", "post": "yes"},
    ):
        r = admin.post(WIPE, data, follow=True)  # the wipe itself redirects to its result
        assert r.status_code == 200
        assert r.context["user"] == root
        assert "<strong>root</strong>" in r.content.decode()  # "Welcome, root."


def _authored_by_bob():
    MemoryManager(project="acme/web", user="acme/bob").upsert("deploy day", "Tuesday")
    MemoryManager(project="acme/web", user="acme/bob").upsert("user_lang", "English")
    assert Memory.objects.filter(scope="project", subject="acme/bob").count() == 1


def test_the_erase_subject_page_says_whether_authored_memories_go():
    from tests._admin_support import ERASE_SUBJECT

    _authored_by_bob()
    admin = client_for(make_staff("root", superuser=True))
    r = admin.post(ERASE_SUBJECT, {"subject": "acme/bob"})
    assert "1 project memory this user wrote will be <strong>kept</strong>" in r.content.decode()
    r = admin.post(ERASE_SUBJECT, {"subject": "acme/bob", "include_authored": "on"})
    assert "project memory this user wrote <strong>will be erased</strong>" in r.content.decode()
    assert Memory.objects.count() == 2  # only previews so far


def test_an_api_dry_run_shows_counts_and_the_authored_choice():
    _authored_by_bob()
    client = token_client("acme-dpo", ["acme/"], write=True, erase=True)
    r = client.post("/api/erasures/", {"subject": "acme/bob", "dry_run": True}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["dry_run"] is True and body["counts"]["memories"] == 1
    assert body["project_memories_authored"] == 1 and body["authored_erased"] is False
    r = client.post(
        "/api/erasures/",
        {"subject": "acme/bob", "dry_run": True, "include_authored": True},
        format="json",
    )
    assert r.json()["counts"]["memories"] == 2 and r.json()["authored_erased"] is True
    assert Memory.objects.count() == 2
    other = token_client("globex", ["globex/"], write=True, erase=True)
    r = other.post("/api/erasures/", {"subject": "acme/bob", "dry_run": True}, format="json")
    assert r.status_code == 404  # a dry run is authorized like the erasure itself


def test_an_unknown_event_type_is_a_400_like_other_bad_filters(acme):
    assert acme.get("/api/events/", {"event_type": "zzz"}).status_code == 400
    assert acme.get("/api/events/", {"event_type": "create"}).status_code == 200
