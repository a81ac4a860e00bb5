"""Compliance pages, the read-only audit tables and the admin index overview."""

from __future__ import annotations

import json

import pytest

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._admin_support import (
    ALICE,
    BOB,
    ERASE_SUBJECT,
    EVENTS,
    EXPORT,
    OPERATOR_PERMS,
    PROJECT,
    PURGE_REVIEW,
    RECEIPTS,
    SCHEMA,
    WIPE,
    act,
    client_for,
    corrupt_sqlite_file,
    make_staff,
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


def _alice_rows() -> int:
    return (
        Memory.objects.filter(namespace=ALICE).count()
        + SessionSummary.objects.filter(subject=ALICE).count()
        + ReviewItem.objects.filter(subject=ALICE).count()
    )


# ------------------------------------------------------------ erase a subject
def test_erase_a_subject_form_confirmation_with_counts_then_the_receipt(admin, rows):
    r = admin.get(ERASE_SUBJECT)
    assert r.status_code == 200 and 'name="subject"' in r.content.decode()
    events = MemoryEvent.objects.filter(
        memory_id__in=Memory.objects.filter(namespace=ALICE).values("pk")
    ).count()

    r = admin.post(ERASE_SUBJECT, {"subject": ALICE})
    assert r.status_code == 200
    page = r.content.decode()
    assert "This cannot be undone." in page and ALICE in page
    counts = {row["table"]: row["count"] for row in r.context["counts"]}
    assert counts == {
        "memories": 3,  # editor, city and the soft-deleted laptop
        "session_summaries": 1,
        "memory_review_queue": 2,
        "memory_events": events,
    }
    assert r.context["kept"] == 1 and "will be <strong>kept</strong>" in page  # the deploy fact
    assert _alice_rows() == 6  # nothing erased yet

    r = admin.post(ERASE_SUBJECT, {"subject": ALICE, "post": "yes"})
    receipt = ErasureReceipt.objects.get()
    assert r.status_code == 302 and r["Location"] == f"{RECEIPTS}{receipt.pk}/change/"
    assert _alice_rows() == 0
    assert Memory.objects.filter(key_normalized="deploy_target").exists()  # kept
    assert Memory.objects.filter(namespace=BOB).count() == 1  # bob untouched
    assert receipt.actor == "root" and receipt.target_kind == "subject"
    assert receipt.counts["memories"] == 3 and receipt.counts["memory_events"] == events

    r = admin.get(r["Location"])
    page = r.content.decode()
    assert "Erasure receipt" in page and "The subject was erased" in page
    assert "Alice lives in Lisbon" not in page and ALICE not in page  # HMAC only


def test_erase_a_subject_with_the_project_memories_it_wrote(admin, rows):
    r = admin.post(ERASE_SUBJECT, {"subject": ALICE, "include_authored": "on"})
    assert {c["table"]: c["count"] for c in r.context["counts"]}["memories"] == 4
    assert 'name="include_authored"' in r.content.decode()
    admin.post(ERASE_SUBJECT, {"subject": ALICE, "include_authored": "on", "post": "yes"})
    assert not Memory.objects.filter(key_normalized="deploy_target").exists()
    assert ErasureReceipt.objects.get().include_authored


def test_erase_a_subject_needs_a_user_key(admin, rows):
    r = admin.post(ERASE_SUBJECT, {"subject": "   "})
    assert r.status_code == 200 and r.context["form"].errors["subject"]
    assert not ErasureReceipt.objects.exists()


def test_erasing_an_unknown_subject_still_gives_a_receipt(admin, rows):
    r = admin.post(ERASE_SUBJECT, {"subject": "acme/nobody"})
    assert "Nothing is stored for this user key" in r.content.decode()
    admin.post(ERASE_SUBJECT, {"subject": "acme/nobody", "post": "yes"})
    assert ErasureReceipt.objects.get().counts["memories"] == 0


# ------------------------------------------------------------ wipe a namespace
def test_wipe_says_it_is_not_erasure_then_shows_the_result(admin, rows):
    r = admin.get(WIPE)
    assert "Wiping is not erasure" in r.content.decode()
    r = admin.post(WIPE, {"project": PROJECT, "user": ALICE})
    page = r.content.decode()
    assert "Wiping is not erasure" in page and "soft-deleted" in page
    # deploy + editor + city; the summaries are the project's (every user's sessions)
    assert (r.context["memories"], r.context["summaries"]) == (3, 2)
    assert Memory.objects.live().filter(namespace=ALICE).count() == 2

    r = admin.post(WIPE, {"project": PROJECT, "user": ALICE, "post": "yes"})
    assert r.status_code == 302  # post/redirect/get: reloading the result never wipes again
    result_url = r["Location"]
    assert result_url.startswith(WIPE + "?result=") and PROJECT not in result_url
    r = admin.get(result_url)
    result = r.context["result"]
    assert (result["memories_cleared"], result["summaries_cleared"], result["ok"]) == (3, 2, True)
    page = r.content.decode()
    assert (
        'id="wipe-outcome">Everything was cleared: 3 memories were soft-deleted and '
        "2 session summaries were deleted. The review queue was not touched." in page
    )
    assert "| yes" not in page and "Not cleared" not in page
    # Reloading shows the same result and wipes nothing new.
    MemoryManager(project=PROJECT, user=ALICE).upsert("after the wipe", "still here")
    again = admin.get(result_url).content.decode()
    assert "3 memories were soft-deleted" in again
    assert Memory.objects.live().filter(namespace=PROJECT).count() == 1
    Memory.objects.live().filter(namespace=PROJECT).delete()
    assert Memory.objects.live().filter(namespace__in=[PROJECT, ALICE]).count() == 0
    assert Memory.objects.filter(namespace=ALICE).count() == 3  # still stored: not erasure
    assert ReviewItem.objects.filter(namespace=PROJECT).count() == 2  # the queue is untouched
    assert Memory.objects.live().filter(namespace=BOB).count() == 1
    wiped = MemoryEvent.objects.filter(event_type="soft_delete").exclude(memory_id=rows["old"].id)
    actors = set(wiped.values_list("actor", flat=True))
    assert actors == {"root"}


def test_a_failed_wipe_is_reported_truthfully(admin, rows, monkeypatch):
    def broken(self, scope=None, *, actor=""):
        raise RuntimeError("disk full")

    monkeypatch.setattr(MemoryManager, "clear", broken)
    r = admin.post(WIPE, {"project": PROJECT, "user": ALICE, "post": "yes"}, follow=True)
    result = r.context["result"]
    assert not result["ok"] and result["not_cleared"] == ["memories"]
    page = r.content.decode()
    assert "The wipe did not finish: the memories were not cleared." in page


def test_a_wipe_result_is_only_shown_to_the_session_that_wiped(admin, rows):
    r = admin.post(WIPE, {"project": PROJECT, "user": ALICE, "post": "yes"})
    other = client_for(make_staff("root2", superuser=True))
    page = other.get(r["Location"]).content.decode()
    assert 'id="wipe-gone"' in page and "wipe-outcome" not in page
    assert 'id="wipe-gone"' in admin.get(WIPE + "?result=forged").content.decode()


# ------------------------------------------------------------------ receipts
def test_receipts_are_a_read_only_list(admin, rows):
    admin.post(ERASE_SUBJECT, {"subject": BOB, "post": "yes"})
    receipt = ErasureReceipt.objects.get()
    r = admin.get(RECEIPTS)
    assert r.status_code == 200 and receipt.pk[:12] in r.content.decode()
    assert "Erase a subject" in r.content.decode()
    assert admin.get(f"{RECEIPTS}add/").status_code == 403
    assert admin.post(f"{RECEIPTS}{receipt.pk}/change/", {"actor": "x"}).status_code == 403
    assert admin.post(f"{RECEIPTS}{receipt.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ErasureReceipt.objects.get().actor == "root"


# ------------------------------------------------------------------ export
def test_export_a_subject_or_a_namespace_downloads_json(admin, rows):
    assert admin.get(EXPORT).status_code == 200
    r = admin.post(EXPORT, {"subject": ALICE})
    assert r.status_code == 200 and "attachment" in r["Content-Disposition"]
    doc = json.loads(r.content)
    contents = {m["content"] for m in doc["memories"]}
    assert "Alice lives in Lisbon" in contents and "Alice used a ThinkPad X220" in contents
    assert "Bob uses emacs" not in r.content.decode()
    assert doc["counts"]["session_summaries"] == 1

    doc = json.loads(admin.post(EXPORT, {"namespace": BOB}).content)
    assert [m["content"] for m in doc["memories"]] == ["Bob uses emacs"]

    MemoryManager().upsert("Single tenant", "default namespace fact")
    doc = json.loads(admin.post(EXPORT, {"default_namespace": "on"}).content)
    assert [m["content"] for m in doc["memories"]] == ["default namespace fact"]

    r = admin.post(EXPORT, {})
    assert r.status_code == 200 and r.context["form"].non_field_errors()


# ------------------------------------------------------------- permissions
@pytest.mark.parametrize(
    ("url", "perm"),
    [(ERASE_SUBJECT, "erase_memory"), (WIPE, "wipe_memory"), (EXPORT, "export_memory")],
)
def test_each_compliance_page_needs_its_permission(url, perm, rows):
    without = client_for(make_staff("ops", OPERATOR_PERMS))
    assert without.get(url).status_code == 403
    assert (
        without.post(url, {"subject": ALICE, "project": PROJECT, "post": "yes"}).status_code == 403
    )
    assert Memory.objects.live().filter(namespace=ALICE).count() == 2
    allowed = client_for(make_staff("dpo", (perm,)))
    assert allowed.get(url).status_code == 200


def test_the_index_links_only_the_pages_a_user_may_open(admin, operator, rows):
    page = admin.get("/admin/").content.decode()
    for name in (
        "Erase a subject",
        "Wipe a namespace",
        "Export a subject or namespace",
        "Erasure receipts",
    ):
        assert name in page
    page = operator.get("/admin/").content.decode()
    assert "Erase a subject" not in page and "Wipe a namespace" not in page
    assert "Export a subject" not in page and ERASE_SUBJECT not in page
    assert operator.get(RECEIPTS).status_code == 403


# ------------------------------------------------------- read-only tables
def test_events_are_read_only_and_filterable(admin, rows):
    editor = rows["editor"]
    act_events = MemoryEvent.objects.create(
        memory_id=editor.id, event_type="update", actor="alice-ops"
    )
    r = admin.get(EVENTS)
    assert r.status_code == 200 and r.context["action_form"] is None
    assert admin.get(f"{EVENTS}add/").status_code == 403
    assert admin.post(f"{EVENTS}{act_events.pk}/change/", {}).status_code == 403
    assert admin.post(f"{EVENTS}{act_events.pk}/delete/", {"post": "yes"}).status_code == 403

    by_memory = admin.get(EVENTS, {"memory_id": editor.id}).context["cl"].result_list
    assert {e.memory_id for e in by_memory} == {editor.id} and len(by_memory) == 2
    by_type = admin.get(EVENTS, {"event_type": "soft_delete"}).context["cl"].result_list
    assert [e.memory_id for e in by_type] == [rows["old"].id]
    by_actor = admin.get(EVENTS, {"actor": "alice-ops"}).context["cl"].result_list
    assert [e.pk for e in by_actor] == [act_events.pk]
    page = admin.get(EVENTS, {"memory_id": editor.id}).content.decode()
    assert f'href="/admin/memoryapp/memory/{editor.id}/change/"' in page


def test_schema_meta_shows_the_version_and_the_live_counter(admin, rows):
    from memoryapp.db.meta import read_change_counter

    r = admin.get(SCHEMA)
    assert r.status_code == 200
    assert r.context["schema_version"] == "3"
    before = r.context["live_counter"]
    assert before == read_change_counter() > 0
    MemoryManager(project=PROJECT).upsert("Another", "one more")
    assert admin.get(SCHEMA).context["live_counter"] == before + 1
    assert admin.get(f"{SCHEMA}add/").status_code == 403
    assert admin.post(f"{SCHEMA}memories_change/change/", {"value": "0"}).status_code == 403
    assert admin.get(SCHEMA).context["action_form"] is None


# ------------------------------------------------------------------ overview
def test_the_index_shows_memories_by_type_and_pending_review_per_namespace(admin, rows):
    r = admin.get("/admin/")
    page = r.content.decode()
    assert 'class="mem-chart"' in page and "Memories by type and pending review items" in page
    assert f"{ALICE}: 2 memories, 0 pending review" in page
    assert f"{PROJECT}: 1 memory, 2 pending review" in page
    assert f"{BOB}: 1 memory, 0 pending review" in page
    assert "Store problem" not in page
    assert admin.get("/admin/memoryapp/").content.decode().count('class="mem-chart"') == 1


def test_an_empty_store_has_a_friendly_overview(admin):
    page = admin.get("/admin/").content.decode()
    assert "No memories or review items yet" in page and 'class="mem-chart"' not in page


def test_store_problems_are_a_warning_banner(admin, rows, tmp_path, extra_alias, settings):
    path = tmp_path / "broken.sqlite3"
    corrupt_sqlite_file(path)
    settings.MEMORYAPP_USER_DATABASE = extra_alias(path)
    page = admin.get("/admin/").content.decode()
    assert "Store problem" in page and "could not be read" in page
    assert 'class="warning"' in page
    assert 'class="mem-chart"' in page  # the default database still renders its overview


def test_the_overview_is_only_for_staff_with_memory_permissions(rows):
    other = client_for(make_staff("hr", ()))
    page = other.get("/admin/").content.decode()
    assert "Agent memory at a glance" not in page and "mem-chart" not in page


def test_many_namespaces_make_a_drop_down_filter(admin):
    for i in range(12):
        MemoryManager(project=f"tenant-{i:02d}").upsert("fact", f"fact {i}")
    page = admin.get("/admin/memoryapp/memory/").content.decode()
    assert 'class="mem-filter-select"' in page and "tenant-11" in page
    page = admin.get("/admin/").content.decode()
    assert "The 12 largest namespaces are shown" not in page  # exactly 12: all shown
    MemoryManager(project="tenant-12").upsert("fact", "one more")
    page = admin.get("/admin/").content.decode()
    assert "1 more hold fewer memories" in page


def test_retrying_a_purge_needs_the_erase_permission(admin, operator, rows, monkeypatch):
    admin.post(ERASE_SUBJECT, {"subject": BOB, "post": "yes"})
    receipt = ErasureReceipt.objects.get()
    retried = []
    monkeypatch.setattr("memoryapp.admin.audit.retry_purge", retried.append)
    viewer = client_for(make_staff("auditor", ("view_erasurereceipt",)))
    r = viewer.get(RECEIPTS)
    assert r.status_code == 200 and r.context["action_form"] is None
    act(viewer, RECEIPTS, "retry_purge_selected", [receipt.pk])
    assert retried == []
    act(admin, RECEIPTS, "retry_purge_selected", [receipt.pk])
    assert [r.pk for r in retried] == [receipt.pk]


@pytest.mark.parametrize(
    ("url", "page", "permission"),
    [
        (ERASE_SUBJECT, "Erase a subject", "Can erase memories permanently"),
        (WIPE, "Wipe a namespace", "Can wipe a namespace (soft reset)"),
        (EXPORT, "Export a subject or namespace", "Can export memories"),
        (PURGE_REVIEW, "Purge review items", "Can purge review items permanently"),
    ],
)
def test_a_compliance_page_refused_is_the_admin_s_own_403(url, page, permission):
    """Not Django's bare "403 Forbidden": the admin's header, the missing permission, a way back."""
    without = client_for(make_staff("ops", OPERATOR_PERMS))
    for response in (without.get(url), without.post(url, {"subject": ALICE, "post": "yes"})):
        assert response.status_code == 403
        html = response.content.decode()
        assert '<div id="site-name"><a href="/admin/">Agent memory back office</a></div>' in html
        assert "<h1>Permission needed</h1>" in html
        reason = html[html.index('id="forbidden-reason"') :].split("</p>")[0]
        assert f"cannot open <strong>{page}</strong>" in reason
        assert f"“{permission}”" in reason
        assert "<strong>ops</strong>" in reason  # whose account, as the header says
        assert 'href="/admin/">← Back to the admin index</a>' in html
