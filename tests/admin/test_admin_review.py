"""The review-queue admin (approve, reject, purge) and the session summaries admin."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._admin_support import (
    ALICE,
    OPERATOR_PERMS,
    PROJECT,
    PURGE_REVIEW,
    REVIEW,
    SUMMARIES,
    act,
    client_for,
    make_staff,
    messages_of,
    seed_tenant,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows():
    return seed_tenant()


@pytest.fixture
def admin():
    return client_for(make_staff("root", superuser=True))


@pytest.fixture
def operator():
    return client_for(make_staff("ops", OPERATOR_PERMS))


def _item(title_start: str) -> ReviewItem:
    return ReviewItem.objects.get(title__startswith=title_start)


# ------------------------------------------------------------------ the list
def test_pending_items_come_first_with_evidence_and_occurrences(admin, rows):
    mm = MemoryManager(project=PROJECT, user=ALICE)
    mm.crystallize_user_messages([{"role": "user", "content": "Never use tabs for indentation."}])
    mm.reject_review_item(_item("Preference").pk)
    r = admin.get(REVIEW)
    assert r.status_code == 200
    # The queue opens on what needs a decision; "All" is one click away.
    assert [i.status for i in r.context["cl"].result_list] == ["pending"]
    r = admin.get(REVIEW, {"status": "all"})
    listed = list(r.context["cl"].result_list)
    assert [i.status for i in listed] == ["pending", "rejected"]
    assert listed[0].occurrences == 2  # folded: the same candidate twice
    page = r.content.decode()
    assert "Never use tabs for indentation" in page  # the evidence
    assert "occurrences" in page.lower()
    assert [
        i.status for i in admin.get(REVIEW, {"status": "rejected"}).context["cl"].result_list
    ] == ["rejected"]


def test_the_detail_page_has_decision_buttons_and_edits_only_the_correctable_fields(admin, rows):
    item = _item("Constraint")
    page = admin.get(f"{REVIEW}{item.pk}/change/").content.decode()
    assert "Approve…" in page and "Reject…" in page and "Purge permanently…" in page
    # A pending item's title, content, type and scope can be corrected (issue #29
    # item 3, tests/writes/test_review_edit.py); what was said and where it came from cannot.
    assert 'name="content"' in page and 'name="title"' in page
    assert item.evidence in page and 'name="evidence"' not in page
    assert 'name="key_normalized"' not in page and 'name="subject"' not in page
    # An empty post is refused on the form and changes nothing.
    r = admin.post(f"{REVIEW}{item.pk}/change/", {})
    assert r.status_code == 200 and "errornote" in r.content.decode()
    assert ReviewItem.objects.get(pk=item.pk).content == item.content


# -------------------------------------------------------------- decisions
def test_approve_asks_then_makes_a_crystallized_memory_and_records_the_actor(admin, rows):
    item = _item("Constraint")
    r = act(admin, REVIEW, "approve_selected", [item.pk])
    assert r.status_code == 200 and "Approve review items" in r.content.decode()
    assert ReviewItem.objects.get(pk=item.pk).status == "pending"
    r = act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)
    assert r.status_code == 302
    assert ReviewItem.objects.get(pk=item.pk).status == "approved"
    memory = Memory.objects.get(key_normalized=item.key_normalized, namespace=PROJECT)
    assert (memory.source, memory.type, memory.content) == (
        "crystallized",
        "constraint",
        item.content,
    )
    assert MemoryEvent.objects.get(memory_id=memory.pk).actor == "root"
    decided = MemoryEvent.objects.get(memory_id=item.pk)
    assert (decided.event_type, decided.actor) == ("review_approve", "root")
    assert "Approved 1 review item" in messages_of(admin.get(REVIEW))[0]


def test_the_approval_message_links_the_new_memory(admin, rows):
    item = _item("Constraint")
    act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)
    memory = Memory.objects.get(key_normalized=item.key_normalized, namespace=PROJECT)
    page = admin.get(REVIEW).content.decode()
    link = f'<a href="/admin/memoryapp/memory/{memory.pk}/change/">{memory.title}</a>'
    assert f"Approved 1 review item; it is a memory now: {link}." in page
    assert admin.get(f"/admin/memoryapp/memory/{memory.pk}/change/").status_code == 200


def test_the_approval_message_never_links_another_namespaces_memory(admin, rows):
    """Ids are unique within a namespace only: another namespace's approval event naming
    the same item id (its own item; here logged later) is not this approval's."""
    import datetime as dt
    import json

    from django.utils import timezone

    from memoryapp.services import review

    item = _item("Constraint")
    MemoryManager(project="other/ns").save_memory("theirs", "another tenant's")
    elsewhere = Memory.objects.get(namespace="other/ns").pk
    MemoryEvent.objects.create(
        memory_id=item.pk,
        event_type="review_approve",
        namespace="other/ns",
        detail=json.dumps({"memory": elsewhere}),
        timestamp=timezone.now() + dt.timedelta(days=1),
    )
    act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)
    memory = Memory.objects.get(key_normalized=item.key_normalized, namespace=PROJECT)
    (message,) = messages_of(admin.get(REVIEW))
    assert f"/admin/memoryapp/memory/{memory.pk}/change/" in message
    assert elsewhere not in message
    assert review.approved_memories([(PROJECT, item.pk)]) == {(PROJECT, item.pk): memory.pk}
    assert review.approved_memories([("other/ns", item.pk)]) == {("other/ns", item.pk): elsewhere}
    assert review.approved_memories([("third/ns", item.pk)]) == {}


def test_a_large_approval_links_a_few_memories_and_counts_the_rest(admin, rows):
    for n in range(8):  # eight distinct candidates (the crystallizer would fold similar ones)
        ReviewItem.objects.create(
            namespace=PROJECT,
            scope="project",
            type="constraint",
            key_normalized=f"constraint_{n}",
            title=f"Constraint {n}",
            content=f"Never deploy service {n} on Fridays.",
        )
    pending = list(ReviewItem.objects.filter(status="pending").values_list("pk", flat=True))
    assert len(pending) > 5
    act(admin, REVIEW, "approve_selected", pending, confirm=True)
    (message,) = messages_of(admin.get(REVIEW))
    assert message.count('<a href="/admin/memoryapp/memory/') == 5
    assert f"and {len(pending) - 5} more." in message


def test_a_user_preference_is_approved_into_the_users_namespace(admin, rows):
    item = _item("Preference")
    act(admin, REVIEW, "approve_selected", [item.pk], confirm=True)
    memory = Memory.objects.get(key_normalized=item.key_normalized)
    assert (memory.scope, memory.namespace, memory.subject) == ("user", ALICE, ALICE)


def test_a_candidate_holding_a_secret_is_not_approved(admin, rows):
    bad = ReviewItem.objects.create(
        namespace=PROJECT,
        scope="project",
        type="note",
        key_normalized="note_secret",
        title="Note: secret",
        content="token=" + "Z" * 30,
    )
    act(admin, REVIEW, "approve_selected", [bad.pk], confirm=True)
    assert ReviewItem.objects.get(pk=bad.pk).status == "pending"
    assert not Memory.objects.filter(key_normalized="note_secret").exists()
    assert "was not approved" in " ".join(messages_of(admin.get(REVIEW)))


def test_reject_marks_rejected_and_records_the_actor(admin, rows):
    item = _item("Preference")
    r = act(admin, REVIEW, "reject_selected", [item.pk])
    assert "Reject review items" in r.content.decode()
    act(admin, REVIEW, "reject_selected", [item.pk], confirm=True)
    assert ReviewItem.objects.get(pk=item.pk).status == "rejected"
    event = MemoryEvent.objects.get(memory_id=item.pk)
    assert (event.event_type, event.actor) == ("review_reject", "root")
    assert not Memory.objects.filter(key_normalized=item.key_normalized).exists()


# ----------------------------------------------------------------- purge
def test_purge_selected_is_confirmed_then_hard_deletes_with_a_receipt(admin, rows):
    item = _item("Preference")
    r = act(admin, REVIEW, "purge_selected", [item.pk])
    page = r.content.decode()
    assert "This cannot be undone." in page and "<code>memory_review_queue</code>" in page
    assert {c["table"]: c["count"] for c in r.context["counts"]}["memory_review_queue"] == 1
    act(admin, REVIEW, "purge_selected", [item.pk], confirm=True)
    assert not ReviewItem.objects.filter(pk=item.pk).exists()
    receipt = ErasureReceipt.objects.get()
    assert receipt.actor == "root" and receipt.counts["memory_review_queue"] == 1
    assert "Purged 1 review item permanently" in messages_of(admin.get(REVIEW))[0]


def test_purge_everything_of_a_status(admin, rows):
    mm = MemoryManager(project="globex/app", user="globex/carol")
    mm.crystallize_user_messages([{"role": "user", "content": "We decided to use Postgres."}])
    rejected = _item("Preference")
    MemoryManager(project=PROJECT).reject_review_item(rejected.pk)

    assert admin.get(PURGE_REVIEW).status_code == 200
    r = admin.post(PURGE_REVIEW, {"status": "pending", "namespace": "*"})
    assert r.status_code == 200
    page = r.content.decode()
    assert "This cannot be undone." in page and "every namespace" in page
    assert {c["table"]: c["count"] for c in r.context["counts"]}["memory_review_queue"] == 2
    assert ReviewItem.objects.count() == 3  # nothing yet

    r = admin.post(PURGE_REVIEW, {"status": "pending", "namespace": f"ns:{PROJECT}", "post": "yes"})
    assert r.status_code == 302
    assert set(ReviewItem.objects.values_list("status", "namespace")) == {
        ("rejected", PROJECT),
        ("pending", "globex/app"),
    }
    receipt = ErasureReceipt.objects.get()
    assert receipt.target_kind == "review_items" and receipt.actor == "root"
    assert receipt.counts["memory_review_queue"] == 1

    admin.post(PURGE_REVIEW, {"status": "*", "namespace": "*", "post": "yes"})
    assert not ReviewItem.objects.exists()


def test_without_the_purge_permission_there_is_no_purge(operator, rows):
    r = operator.get(REVIEW)
    choices = {c[0] for c in r.context["action_form"].fields["action"].choices if c[0]}
    assert choices == {"approve_selected", "reject_selected"}
    assert "Purge by status" not in r.content.decode()
    assert operator.get(PURGE_REVIEW).status_code == 403
    assert (
        operator.post(PURGE_REVIEW, {"status": "*", "namespace": "*", "post": "yes"}).status_code
        == 403
    )
    act(operator, REVIEW, "purge_selected", [_item("Preference").pk], confirm=True)
    assert ReviewItem.objects.count() == 2


def test_a_viewer_cannot_decide(rows):
    viewer = client_for(make_staff("viewer", ("view_reviewitem",)))
    r = viewer.get(REVIEW)
    assert r.status_code == 200 and r.context["action_form"] is None
    item = _item("Preference")
    act(viewer, REVIEW, "approve_selected", [item.pk], confirm=True)
    assert ReviewItem.objects.get(pk=item.pk).status == "pending"


# ------------------------------------------------------- session summaries
def test_summaries_list_by_namespace_and_session(admin, rows):
    r = admin.get(SUMMARIES)
    assert r.status_code == 200 and len(r.context["cl"].result_list) == 2
    r = admin.get(SUMMARIES, {"namespace": PROJECT, "session_id": "sess-alice-1"})
    (only,) = r.context["cl"].result_list
    assert only.summary_text.startswith("Alice and the agent")
    assert admin.get(SUMMARIES, {"session_id": "nope"}).context["cl"].result_count == 0
    assert admin.get(f"{SUMMARIES}add/").status_code == 403


def test_deleting_summaries_is_a_confirmed_hard_delete_with_the_actor(admin, rows):
    summary = SessionSummary.objects.get(session_id="sess-alice-1")
    r = act(admin, SUMMARIES, "delete_selected", [summary.pk])
    page = r.content.decode()
    assert "hard delete" in page and "Erase a subject" in page
    act(admin, SUMMARIES, "delete_selected", [summary.pk], confirm=True)
    assert not SessionSummary.objects.filter(pk=summary.pk).exists()
    event = MemoryEvent.objects.get(memory_id=summary.pk)
    assert (event.event_type, event.actor) == ("summary_delete", "root")

    other = SessionSummary.objects.get()
    r = admin.get(f"{SUMMARIES}{other.pk}/delete/")
    assert "hard delete" in r.content.decode()
    admin.post(f"{SUMMARIES}{other.pk}/delete/", {"post": "yes"})
    assert not SessionSummary.objects.exists()


def test_deleting_summaries_needs_the_delete_permission(rows):
    viewer = client_for(make_staff("viewer", ("view_sessionsummary",)))
    r = viewer.get(SUMMARIES)
    assert r.status_code == 200 and r.context["action_form"] is None
    summary = SessionSummary.objects.first()
    act(viewer, SUMMARIES, "delete_selected", [summary.pk], confirm=True)
    assert viewer.post(f"{SUMMARIES}{summary.pk}/delete/", {"post": "yes"}).status_code == 403
    assert SessionSummary.objects.count() == 2


def test_the_list_says_who_else_proposed_a_project_key_and_filters_uncertain_items(admin):
    words = [{"role": "user", "content": "We decided to use Postgres for the ledger."}]
    for user in ("acme/alice", "acme/dave"):
        MemoryManager(project="acme/web", user=user).crystallize_user_messages(words)
    (pref,) = MemoryManager(project="acme/web", user="acme/erin").crystallize_user_messages(
        [{"role": "user", "content": "I prefer tabs over spaces."}]
    )
    ReviewItem.objects.filter(pk=pref.pk).update(subjects_uncertain=True)
    page = admin.get(REVIEW).content.decode()
    assert page.count("also proposed by 1 other") == 2
    assert "acme/erin · subjects uncertain" in page
    uncertain = admin.get(REVIEW, {"subjects_uncertain__exact": "1"})
    assert [i.pk for i in uncertain.context["cl"].result_list] == [pref.pk]
    detail = admin.get(f"{REVIEW}{pref.pk}/change/").content.decode()
    assert "Subjects uncertain" in detail
