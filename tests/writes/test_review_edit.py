"""Edit before approve (issue #29 item 3): a reviewer corrects a pending item, audited,
through the guard; approval promotes the corrected text (the service and the API)."""

from __future__ import annotations

import json

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import Memory, MemoryEvent, ReviewItem
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.services import review_edit

pytestmark = pytest.mark.django_db

ALICE = "acme/alice"


def _queue(text: str) -> ReviewItem:
    (item,) = MemoryManager(project="acme/web", user=ALICE).crystallize_user_messages(
        [{"role": "user", "content": text}]
    )
    return item


def _edit(item, **changes):
    return review_edit.edit(
        item_id=item.pk, namespace=item.namespace, changes=changes, actor="reviewer-1"
    )


def test_edit_corrects_text_and_is_audited_without_the_text():
    item = _queue("We decided to use Postgres for the ledger")
    edited = _edit(
        item, title="Decision: Postgres for the ledger", content="Postgres for the ledger"
    )
    assert (edited.title, edited.content) == (
        "Decision: Postgres for the ledger",
        "Postgres for the ledger",
    )
    row = ReviewItem.objects.get(pk=item.pk)
    assert (row.title, row.content, row.status) == (edited.title, edited.content, "pending")
    (event,) = MemoryEvent.objects.filter(memory_id=item.pk, event_type="review_edit")
    assert event.actor == "reviewer-1" and event.namespace == "acme/web"
    assert json.loads(event.detail) == {"fields": "title,content"}
    assert "ledger" not in event.detail  # never the text


def test_a_new_type_renames_the_key_prefix_and_the_tag():
    item = _queue("Always use Postgres for the ledger")
    assert item.key_normalized == "constraint_use_postgres_for_the"
    edited = _edit(item, type="decision")
    assert edited.key_normalized == "decision_use_postgres_for_the"
    assert edited.tags == ["decision"]


def test_edit_then_approve_promotes_the_corrected_text():
    # The crystallizer's reading was wrong; the reviewer's correction is what is approved.
    item = _queue("We decided to use Postgres for the ledger")
    _edit(item, content="Postgres (not MySQL) for the ledger", scope="project")
    memory = MemoryManager(project="acme/web").approve_review_item(item.pk)
    assert memory.content == "Postgres (not MySQL) for the ledger"
    assert Memory.objects.get(pk=memory.pk).content == "Postgres (not MySQL) for the ledger"


def test_approved_memories_get_the_items_readable_title_on_every_path():
    from tests._admin_support import REVIEW, act, client_for, make_staff

    one = _queue("Never deploy on Fridays")
    _edit(one, title="Constraint: no deploys on Fridays")
    memory = MemoryManager(project="acme/web").approve_review_item(one.pk)
    assert memory.title == "Constraint: no deploys on Fridays"
    assert memory.key_normalized == "constraint_not_deploy_on_fridays"  # the key is kept
    # The bulk path (the admin's "approve selected") too.
    two = _queue("Always run the linter before pushing")
    admin = client_for(make_staff("root", superuser=True))
    act(admin, REVIEW, "approve_selected", [two.pk], confirm=True)
    row = Memory.objects.get(key_normalized=two.key_normalized, namespace="acme/web")
    assert row.title == "Constraint: always run the linter before pushing"


def test_an_import_record_may_name_its_title_which_the_guard_checks():
    from memoryapp.conf import get_guard
    from memoryapp.services import memories
    from memoryapp.services.slices import Binding

    binding = Binding.of(project="acme/web", user=None, using="default", user_using="default")
    records = [
        (1, {"key": "deploy_day", "value": "Tuesdays", "title": "Deploy day"}),
        (2, {"key": "bad_title", "value": "x", "title": "two\nlines"}),
    ]
    report = memories.import_records(
        binding=binding, guard=get_guard(), records=records, skip_invalid=True, analyze=False
    )
    assert [n for n, _ in report.invalid] == [2]
    assert Memory.objects.get(key_normalized="deploy_day").title == "Deploy day"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"title": ""}, "title"),
        ({"title": "two\nlines"}, "title"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 4001}, "content"),
        ({"type": "opinion"}, "type"),
        ({"scope": "global"}, "scope"),
        ({"key_normalized": "mine"}, "key_normalized"),
        ({"status": "approved"}, "status"),
    ],
)
def test_invalid_corrections_are_refused_and_change_nothing(changes, field):
    item = _queue("I prefer dark mode in the editor")
    with pytest.raises(MemoryValidationError) as refused:
        _edit(item, **changes)
    assert refused.value.field == field
    assert ReviewItem.objects.get(pk=item.pk).content == item.content
    assert not MemoryEvent.objects.filter(event_type="review_edit").exists()


def test_a_credential_is_refused_by_the_guard():
    item = _queue("I prefer dark mode in the editor")
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    for changes in ({"content": f"use {secret}"}, {"title": f"key {secret}"}):
        with pytest.raises(SensitiveMemoryError):
            _edit(item, **changes)
    assert ReviewItem.objects.get(pk=item.pk).content == "dark mode in the editor"


def test_only_a_pending_item_can_be_edited():
    item = _queue("I prefer dark mode in the editor")
    MemoryManager(project="acme/web").reject_review_item(item.pk)
    assert _edit(item, content="light mode") is None
    assert ReviewItem.objects.get(pk=item.pk).content == "dark mode in the editor"
    # Another namespace's binding does not reach it either.
    other = _queue("I prefer tabs in the editor")
    assert (
        review_edit.edit(item_id=other.pk, namespace="globex/app", changes={"content": "x y"})
        is None
    )


def test_a_change_that_would_collide_with_another_pending_item_is_refused():
    first = _queue("Always use Postgres for the ledger")
    second = _queue("We chose use Postgres for the ledger")  # decision_use_postgres_for_the
    assert second.key_normalized == "decision_use_postgres_for_the"
    with pytest.raises(review_edit.ReviewEditConflict):
        _edit(first, type="decision")
    assert ReviewItem.objects.get(pk=first.pk).type == "constraint"


def test_an_edit_that_changes_nothing_writes_nothing():
    item = _queue("I prefer dark mode in the editor")
    assert _edit(item, content=item.content, scope=item.scope).updated_at == item.updated_at
    assert not MemoryEvent.objects.filter(event_type="review_edit").exists()


# ------------------------------------------------------------------------ API


def test_api_patch_edits_then_approve_uses_the_edit():
    item = _queue("Never deploy on Fridays")
    client = token_client("acme-reviewer", ["acme/"], write=True)
    r = client.patch(
        f"/api/review-items/{item.pk}/",
        {"content": "never deploy on Fridays or before holidays"},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["content"] == "never deploy on Fridays or before holidays"
    event = MemoryEvent.objects.get(memory_id=item.pk, event_type="review_edit")
    assert event.actor  # the client, as every API write records it
    r = client.post(f"/api/review-items/{item.pk}/approve/")
    assert r.status_code == 200, r.content
    assert r.json()["memory"]["content"] == "never deploy on Fridays or before holidays"


def test_api_patch_refusals():
    item = _queue("Never deploy on Fridays")
    writer = token_client("acme-reviewer", ["acme/"], write=True)
    url = f"/api/review-items/{item.pk}/"
    assert writer.patch(url, {}, format="json").status_code == 400
    assert writer.patch(url, {"status": "approved"}, format="json").status_code == 400
    assert writer.patch(url, {"type": "opinion"}, format="json").status_code == 400
    assert writer.patch(url, {"title": "a\nb"}, format="json").status_code == 400
    reader = token_client("acme-reader", ["acme/"])
    assert reader.patch(url, {"content": "x y z"}, format="json").status_code == 403
    stranger = token_client("globex-app", ["globex/"], write=True)
    assert stranger.patch(url, {"content": "x y z"}, format="json").status_code == 404
    MemoryManager(project="acme/web").reject_review_item(item.pk)
    assert writer.patch(url, {"content": "x y z"}, format="json").status_code == 409
    assert ReviewItem.objects.get(pk=item.pk).content == "never deploy on Fridays"


def test_api_schema_documents_the_edit():
    client = token_client("schema-reader", ["acme/"])
    schema = client.get("/api/schema/", {"format": "json"}).json()
    patch = schema["paths"]["/api/review-items/{id}/"]["patch"]
    assert set(patch["responses"]) >= {"200", "409"}


# ---------------------------------------------------------------------- admin


def _admin(
    perms=("view_reviewitem", "change_reviewitem", "add_memory", "change_memory"),
    name="reviewer",
):
    from tests._admin_support import client_for, make_staff

    return client_for(make_staff(name, perms))


def _form(item, **changes):
    data = {"title": item.title, "content": item.content, "type": item.type, "scope": item.scope}
    return {**data, **changes}


def test_admin_edit_then_approve():
    from tests._admin_support import REVIEW, act

    item = _queue("Never deploy on Fridays")
    admin = _admin()
    url = f"{REVIEW}{item.pk}/change/"
    page = admin.get(url).content.decode()
    assert 'name="content"' in page and 'name="title"' in page  # editable while pending
    assert 'name="key_normalized"' not in page  # the rest stays read-only
    r = admin.post(url, _form(item, content="never deploy on Fridays or Mondays"))
    assert r.status_code == 302, r.content.decode()[-2000:]
    row = ReviewItem.objects.get(pk=item.pk)
    assert row.content == "never deploy on Fridays or Mondays" and row.status == "pending"
    event = MemoryEvent.objects.get(memory_id=item.pk, event_type="review_edit")
    assert (event.actor, json.loads(event.detail)) == ("reviewer", {"fields": "content"})
    act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)
    memory = Memory.objects.get(key_normalized=item.key_normalized, namespace="acme/web")
    assert memory.content == "never deploy on Fridays or Mondays"


def test_admin_edit_refusals_show_on_the_form_and_change_nothing():
    from tests._admin_support import REVIEW

    item = _queue("Always use Postgres for the ledger")
    _queue("We chose use Postgres for the ledger")  # holds decision_use_postgres_for_the
    admin = _admin()
    url = f"{REVIEW}{item.pk}/change/"
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    for changes in ({"content": f"use {secret}"}, {"type": "decision"}, {"title": "a\nb"}):
        r = admin.post(url, _form(item, **changes))
        assert r.status_code == 200 and "errornote" in r.content.decode(), changes
        assert secret not in r.content.decode().split('name="content"')[0]
    row = ReviewItem.objects.get(pk=item.pk)
    assert (row.content, row.type) == (item.content, item.type)
    assert not MemoryEvent.objects.filter(event_type="review_edit").exists()


def test_admin_edit_racing_another_edit_to_the_same_key_is_refused_not_a_500(monkeypatch):
    """The form finds no collision; a concurrent write takes the scope and key before the
    save: the service's ReviewEditConflict is an admin message, nothing changes."""
    from memoryapp.admin.forms import ReviewItemForm
    from tests._admin_support import REVIEW, messages_of

    item = _queue("Always use Postgres for the ledger")
    checked = ReviewItemForm.clean

    def then_another_takes_the_key(form):
        cleaned = checked(form)
        _queue("We chose use Postgres for the ledger")  # decision_use_postgres_for_the
        return cleaned

    monkeypatch.setattr(ReviewItemForm, "clean", then_another_takes_the_key)
    admin = _admin()
    url = f"{REVIEW}{item.pk}/change/"
    r = admin.post(url, _form(item, type="decision"))
    assert r.status_code == 302 and r["Location"] == url
    said = messages_of(admin.get(url))
    assert any("Not saved: Another pending item has this scope and key" in m for m in said), said
    assert not any("successfully" in m for m in said), said
    row = ReviewItem.objects.get(pk=item.pk)
    assert (row.type, row.key_normalized) == (item.type, item.key_normalized)
    assert not MemoryEvent.objects.filter(event_type="review_edit").exists()
    from django.contrib.admin.models import LogEntry

    assert not LogEntry.objects.filter(object_id=item.pk).exists()


def test_admin_edit_needs_the_decide_right_and_a_pending_item():
    from tests._admin_support import REVIEW

    item = _queue("Never deploy on Fridays")
    url = f"{REVIEW}{item.pk}/change/"
    viewer = _admin(perms=("view_reviewitem",), name="viewer")
    assert 'name="content"' not in viewer.get(url).content.decode()
    assert viewer.post(url, _form(item, content="x y z")).status_code == 403
    MemoryManager(project="acme/web").reject_review_item(item.pk)
    admin = _admin()
    assert 'name="content"' not in admin.get(url).content.decode()
    assert admin.post(url, _form(item, content="x y z")).status_code == 403
    assert ReviewItem.objects.get(pk=item.pk).content == "never deploy on Fridays"
