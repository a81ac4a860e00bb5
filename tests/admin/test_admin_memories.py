"""The memories admin: list, filters, search, guarded edits, soft delete, restore, erase, export."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import CHANGE, LogEntry

from memoryapp.models import ErasureReceipt, Memory, MemoryEvent
from tests._admin_support import (
    ALICE,
    MEMORIES,
    OPERATOR_PERMS,
    PROJECT,
    act,
    client_for,
    make_staff,
    messages_of,
    seed_tenant,
)

pytestmark = pytest.mark.django_db

SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


@pytest.fixture
def rows():
    return seed_tenant()


@pytest.fixture
def root():
    return make_staff("root", superuser=True)


@pytest.fixture
def admin(root):
    return client_for(root)


@pytest.fixture
def operator():
    """Soft delete, restore and edit, but no erase and no export permission."""
    return client_for(make_staff("ops", OPERATOR_PERMS))


def _titles(response) -> list[str]:
    return [m.title for m in response.context["cl"].result_list]


# ------------------------------------------------------------------ the list
def test_the_list_shows_live_memories_and_deleted_ones_only_under_the_filter(admin, rows):
    r = admin.get(MEMORIES)
    assert r.status_code == 200
    titles = _titles(r)
    assert "Old laptop" not in titles
    assert {"Preferred editor", "Deploy target", "user_city"} <= set(titles)
    for column in ("namespace", "type", "scope", "source", "confidence", "updated", "state"):
        assert column in r.content.decode().lower()
    page = r.content.decode()
    # each row: scope under the type, confidence under the source, and a live badge
    assert "user scope" in page and "project scope" in page and "explicit (user)" in page
    assert 'mem-badge mem-live">live<' in page
    r = admin.get(MEMORIES, {"state": "deleted"})
    assert _titles(r) == ["Old laptop"]
    assert "soft-deleted" in r.content.decode()


def test_filters_by_namespace_scope_type_source_and_confidence(admin, rows):
    assert set(_titles(admin.get(MEMORIES, {"namespace": "acme/bob"}))) == {"Preferred editor"}
    assert _titles(admin.get(MEMORIES, {"namespace": PROJECT})) == ["Deploy target"]
    assert set(_titles(admin.get(MEMORIES, {"scope__exact": "project"}))) == {"Deploy target"}
    assert set(_titles(admin.get(MEMORIES, {"type__exact": "workflow"}))) == {"Deploy target"}
    assert _titles(admin.get(MEMORIES, {"source__exact": "auto"})) == []
    assert len(_titles(admin.get(MEMORIES, {"confidence__exact": "explicit_user"}))) == 4
    both = admin.get(MEMORIES, {"state": "deleted", "namespace": ALICE})
    assert _titles(both) == ["Old laptop"]


def test_the_default_namespace_is_named_and_filterable(admin, rows):
    from memoryapp import MemoryManager

    MemoryManager().upsert("Single tenant", "a memory of the default namespace")
    r = admin.get(MEMORIES, {"namespace": ""})
    assert _titles(r) == ["Single tenant"]
    assert "(default namespace)" in r.content.decode()


def test_search_covers_title_key_content_and_tags(admin, rows):
    assert _titles(admin.get(MEMORIES, {"q": "Preferred"})) == ["Preferred editor"] * 2
    assert _titles(admin.get(MEMORIES, {"q": "user_city"})) == ["user_city"]
    assert _titles(admin.get(MEMORIES, {"q": "Lisbon"})) == ["user_city"]
    assert _titles(admin.get(MEMORIES, {"q": "ops"})) == ["Deploy target"]
    # "%" is a literal character, not a wildcard
    assert _titles(admin.get(MEMORIES, {"q": "100%"})) == ["Deploy target"]
    assert _titles(admin.get(MEMORIES, {"q": "%"})) == ["Deploy target"]
    assert _titles(admin.get(MEMORIES, {"q": rows["city"].id})) == ["user_city"]


def test_the_detail_page_shows_tags_keywords_provenance_and_history(admin, rows):
    editor = rows["editor"]
    MemoryEvent.objects.create(memory_id=editor.id, event_type="update", actor="someone")
    r = admin.get(f"{MEMORIES}{editor.id}/change/")
    assert r.status_code == 200
    page = r.content.decode()
    assert "Alice edits in vim" in page
    assert 'value="preference"' in page  # the tags field
    for keyword in editor.keywords:
        assert keyword in page
    assert "Subject (provenance)" in page and ALICE in page
    assert "Event history" in page and "someone" in page and ">create<" in page
    assert f"{'/admin/memoryapp/memoryevent/'}?memory_id={editor.id}" in page


# -------------------------------------------------------------- editing
def test_editing_goes_through_the_guard_and_records_the_actor(admin, rows):
    editor = rows["editor"]
    r = admin.post(
        f"{MEMORIES}{editor.id}/change/",
        {
            "key": "Preferred editor",
            "content": "  Alice moved to helix  ",
            "tags": "preference, tui",
            "type": "preference",
        },
    )
    assert r.status_code == 302, r.context and r.context["adminform"].form.errors
    row = Memory.objects.get(pk=editor.id)
    assert row.content == "Alice moved to helix"  # stripped, as an upsert does
    assert row.tags == ["preference", "tui"]
    assert "helix" in row.keywords and "tui" in row.keywords
    assert row.created_at == editor.created_at and row.updated_at > editor.updated_at
    event = MemoryEvent.objects.filter(memory_id=editor.id).latest("id")
    assert (event.event_type, event.actor) == ("update", "root")


def test_a_secret_is_refused_with_a_form_error_and_never_stored_or_echoed(admin, rows):
    editor = rows["editor"]
    r = admin.post(
        f"{MEMORIES}{editor.id}/change/",
        {"key": "Preferred editor", "content": f"my key is {SECRET}", "tags": "", "type": ""},
    )
    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert "credential" in errors["content"][0]
    assert SECRET not in r.content.decode()
    assert SECRET not in Memory.objects.get(pk=editor.id).content
    assert not MemoryEvent.objects.filter(memory_id=editor.id, actor="root").exists()
    # a credential in the key is refused too
    r = admin.post(
        f"{MEMORIES}{editor.id}/change/",
        {"key": f"token {SECRET}", "content": "fine", "tags": "", "type": ""},
    )
    assert "credential" in r.context["adminform"].form.errors["key"][0]
    assert SECRET not in r.content.decode()


def test_the_configured_guard_applies_to_admin_edits(admin, rows, settings):
    settings.MEMORYAPP_GUARD = "tests._admin_support.StrictGuard"
    editor = rows["editor"]
    r = admin.post(
        f"{MEMORIES}{editor.id}/change/",
        {"key": "Preferred editor", "content": "Confidential: the merger", "tags": "", "type": ""},
    )
    assert r.status_code == 200
    assert "credential" in r.context["adminform"].form.errors["content"][0]
    assert Memory.objects.get(pk=editor.id).content == editor.content


def test_invalid_content_is_a_form_error(admin, rows):
    url = f"{MEMORIES}{rows['editor'].id}/change/"
    r = admin.post(url, {"key": "Preferred editor", "content": "x" * 4001, "tags": "", "type": ""})
    assert "exceeds max length" in r.context["adminform"].form.errors["content"][0]
    r = admin.post(url, {"key": "!!!", "content": "fine", "tags": "", "type": ""})
    assert "empty after normalization" in r.context["adminform"].form.errors["key"][0]


def test_the_key_cannot_become_a_duplicate_of_a_live_memory(admin, rows):
    from memoryapp import MemoryManager

    other = MemoryManager(project=PROJECT, user=ALICE).upsert(
        "Preferred shell", "zsh", tags=["preference"]
    )
    r = admin.post(
        f"{MEMORIES}{other.id}/change/",
        {"key": "Preferred  EDITOR", "content": "zsh", "tags": "preference", "type": "preference"},
    )
    assert r.status_code == 200
    assert "already exists" in r.context["adminform"].form.errors["key"][0]
    assert Memory.objects.get(pk=other.id).key_normalized == "preferred_shell"


def test_renaming_keeps_the_id_and_logs_the_actor(admin, rows):
    city = rows["city"]
    r = admin.post(
        f"{MEMORIES}{city.id}/change/",
        {"key": "user_home_city", "content": "Alice lives in Porto", "tags": "", "type": "note"},
    )
    assert r.status_code == 302
    row = Memory.objects.get(pk=city.id)
    assert (row.key_normalized, row.title, row.content) == (
        "user_home_city",
        "user_home_city",
        "Alice lives in Porto",
    )
    types = list(
        MemoryEvent.objects.filter(memory_id=city.id, actor="root").values_list(
            "event_type", flat=True
        )
    )
    assert types == ["rename", "update"]


def test_adding_a_memory_runs_the_guard(admin, rows):
    data = {
        "namespace": PROJECT,
        "scope": "",
        "subject": "",
        "key": "Release day",
        "content": "We release on Tuesdays",
        "tags": "decision",
        "type": "",
    }
    r = admin.post(f"{MEMORIES}add/", data)
    assert r.status_code == 302
    row = Memory.objects.get(namespace=PROJECT, key_normalized="release_day")
    assert (row.scope, row.type, row.source) == ("project", "decision", "explicit")
    assert MemoryEvent.objects.get(memory_id=row.id).actor == "root"
    r = admin.post(f"{MEMORIES}add/", data)  # the same key again: refused, not an update
    assert "already exists" in r.context["adminform"].form.errors["key"][0]
    r = admin.post(f"{MEMORIES}add/", {**data, "key": "api", "content": f"api_key={SECRET}"})
    assert "credential" in r.context["adminform"].form.errors["content"][0]


def test_a_soft_deleted_memory_is_read_only(admin, rows):
    old = rows["old"]
    r = admin.get(f"{MEMORIES}{old.id}/change/")
    assert r.status_code == 200
    page = r.content.decode()
    assert "soft-deleted" in page and 'name="content"' not in page
    assert "Restore" in page
    r = admin.post(f"{MEMORIES}{old.id}/change/", {"key": "x", "content": "y"})
    assert r.status_code == 403


# -------------------------------------------------------------- actions
def test_soft_delete_asks_for_confirmation_then_deletes_and_records_the_actor(admin, rows):
    ids = [rows["editor"].id, rows["city"].id]
    r = act(admin, MEMORIES, "soft_delete_selected", ids)
    assert r.status_code == 200
    page = r.content.decode()
    assert "Soft-delete memories" in page and "not erasure" in page
    assert page.count('name="_selected_action"') == 2 and 'name="post" value="yes"' in page
    assert Memory.objects.live().filter(pk__in=ids).count() == 2  # nothing happened yet

    r = act(admin, MEMORIES, "soft_delete_selected", ids, confirm=True)
    assert r.status_code == 302
    assert Memory.objects.deleted().filter(pk__in=ids).count() == 2
    events = MemoryEvent.objects.filter(memory_id__in=ids, event_type="soft_delete")
    assert set(events.values_list("actor", flat=True)) == {"root"}
    assert "Soft-deleted 2 memories" in messages_of(admin.get(MEMORIES))[0]


def test_restore_brings_a_row_back_and_refuses_a_key_clash(admin, rows):
    from memoryapp import MemoryManager

    old = rows["old"]
    r = act(admin, MEMORIES + "?state=deleted", "restore_selected", [old.id])
    assert r.status_code == 200 and "Restore memories" in r.content.decode()
    r = act(admin, MEMORIES + "?state=deleted", "restore_selected", [old.id], confirm=True)
    assert r.status_code == 302
    assert Memory.objects.get(pk=old.id).deleted_at is None
    assert MemoryEvent.objects.get(memory_id=old.id, event_type="restore").actor == "root"

    # a new live row took the key: restoring the old one is refused, clearly
    mm = MemoryManager(project=PROJECT, user=ALICE)
    assert mm.delete(old.id)
    mm.upsert("Old laptop", "a new one", scope="user")
    r = act(admin, MEMORIES + "?state=deleted", "restore_selected", [old.id], confirm=True)
    text = " ".join(messages_of(admin.get(MEMORIES)))
    assert "was not restored" in text and "already exists" in text
    assert Memory.objects.get(pk=old.id).deleted_at is not None


def _history(memory_id: str) -> list[tuple]:
    entries = LogEntry.objects.filter(object_id=memory_id).order_by("action_time", "id")
    return [(e.get_change_message(), e.user.username, e.action_flag) for e in entries]


def test_soft_delete_and_restore_are_in_the_memory_s_history(admin, rows):
    editor, city = rows["editor"], rows["city"]
    act(admin, MEMORIES, "soft_delete_selected", [editor.id, city.id], confirm=True)
    assert _history(editor.id) == [("Soft-deleted.", "root", CHANGE)]
    assert _history(city.id) == [("Soft-deleted.", "root", CHANGE)]
    act(admin, MEMORIES + "?state=deleted", "restore_selected", [editor.id], confirm=True)
    assert _history(editor.id) == [("Soft-deleted.", "root", CHANGE), ("Restored.", "root", CHANGE)]
    assert LogEntry.objects.get(object_id=city.id, action_flag=CHANGE).object_repr == "user_city"

    # Django's History page of the memory, which read only the admin's edits before.
    page = admin.get(f"{MEMORIES}{editor.id}/history/").content.decode()
    assert page.index("Soft-deleted.") < page.index("Restored.")
    assert "This object doesn’t have a change history" not in page


def test_a_refused_restore_writes_no_history(admin, rows):
    from memoryapp import MemoryManager

    old = rows["old"]
    MemoryManager(project=PROJECT, user=ALICE).upsert("Old laptop", "a new one", scope="user")
    act(admin, MEMORIES + "?state=deleted", "restore_selected", [old.id], confirm=True)
    assert Memory.objects.get(pk=old.id).deleted_at is not None
    assert _history(old.id) == []


def test_actions_follow_the_view(admin, rows):
    live = [c[0] for c in admin.get(MEMORIES).context["action_form"].fields["action"].choices]
    deleted = [
        c[0]
        for c in admin.get(MEMORIES, {"state": "deleted"})
        .context["action_form"]
        .fields["action"]
        .choices
    ]
    assert "soft_delete_selected" in live and "restore_selected" not in live
    assert "restore_selected" in deleted and "soft_delete_selected" not in deleted
    assert "delete_selected" not in live + deleted  # no hard delete without erasure
    assert {"erase_selected", "export_selected"} <= set(live) & set(deleted)


def test_erase_lists_every_table_says_it_cannot_be_undone_then_shows_the_receipt(admin, rows):
    old, editor = rows["old"], rows["editor"]
    ids = [old.id, editor.id]
    events = MemoryEvent.objects.filter(memory_id__in=ids).count()
    r = act(admin, MEMORIES + "?state=deleted", "erase_selected", [old.id])
    page = r.content.decode()
    assert "This cannot be undone." in page
    for table in ("memories", "session_summaries", "memory_review_queue", "memory_events"):
        assert f"<code>{table}</code>" in page

    r = act(admin, MEMORIES, "erase_selected", [editor.id])
    counts = {row["table"]: row["count"] for row in r.context["counts"]}
    assert counts["memories"] == 1 and counts["memory_events"] >= 1
    assert counts["session_summaries"] == counts["memory_review_queue"] == 0

    r = act(admin, MEMORIES + "?state=deleted", "erase_selected", [old.id], confirm=True)
    assert r.status_code == 302
    receipt = ErasureReceipt.objects.get()
    assert r["Location"] == f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/"
    act(admin, MEMORIES, "erase_selected", [editor.id], confirm=True)
    assert not Memory.objects.filter(pk__in=ids).exists()
    assert not MemoryEvent.objects.filter(memory_id__in=ids).exists()
    receipts = ErasureReceipt.objects.order_by("created_at")
    assert [r.actor for r in receipts] == ["root", "root"]
    assert sum(r.counts["memories"] for r in receipts) == 2
    assert sum(r.counts["memory_events"] for r in receipts) == events

    page = admin.get(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/").content.decode()
    assert "Erasure receipt" in page and receipt.pk in page and "root" in page
    assert "Alice used a ThinkPad" not in page  # a receipt never holds erased text


def test_export_selected_downloads_json_after_confirmation(admin, rows):
    editor = rows["editor"]
    r = act(admin, MEMORIES, "export_selected", [editor.id])
    assert r.status_code == 200 and "personal data" in r.content.decode()
    r = act(admin, MEMORIES, "export_selected", [editor.id], confirm=True)
    assert r.status_code == 200
    assert r["Content-Type"].startswith("application/json")
    assert "attachment" in r["Content-Disposition"]
    doc = json.loads(r.content)
    assert doc["counts"]["memories"] == 1
    assert doc["memories"][0]["content"] == editor.content
    assert doc["memories"][0]["keywords"] == editor.keywords
    assert {e["event_type"] for e in doc["events"]} == {"create"}


# ----------------------------------------------------------- permissions
def _actions(client, params=None) -> set[str]:
    r = client.get(MEMORIES, params or {})
    return {c[0] for c in r.context["action_form"].fields["action"].choices if c[0]}


def test_staff_without_erase_or_export_permission_sees_neither(operator, rows):
    assert _actions(operator) == {"soft_delete_selected"}
    assert _actions(operator, {"state": "deleted"}) == {"restore_selected"}
    page = operator.get(f"{MEMORIES}{rows['editor'].id}/change/").content.decode()
    assert "Soft delete" in page and "Erase permanently" not in page and "Export JSON" not in page
    # posting the action anyway does nothing
    r = act(operator, MEMORIES, "erase_selected", [rows["editor"].id], confirm=True)
    assert Memory.objects.filter(pk=rows["editor"].id).exists()
    assert not ErasureReceipt.objects.exists()
    assert r.status_code == 302


def test_erase_and_export_permissions_each_unlock_their_action(rows):
    erase = client_for(make_staff("dpo", ("view_memory", "erase_memory")))
    assert _actions(erase) == {"erase_selected"}
    export = client_for(make_staff("auditor", ("view_memory", "export_memory")))
    assert _actions(export) == {"export_selected"}
    viewer = client_for(make_staff("viewer", ("view_memory",)))
    r = viewer.get(MEMORIES)
    assert r.status_code == 200 and r.context["action_form"] is None
    editor = rows["editor"]
    r = viewer.post(f"{MEMORIES}{editor.id}/change/", {"key": "x", "content": "y"})
    assert r.status_code == 403


def test_the_generic_delete_view_is_closed(admin, rows):
    r = admin.post(f"{MEMORIES}{rows['editor'].id}/delete/", {"post": "yes"})
    assert r.status_code == 403
    assert Memory.objects.filter(pk=rows["editor"].id).exists()
