"""The back office in a real browser: log in, search, soft delete and restore, erase, review."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from playwright.sync_api import expect

from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem
from tests._admin_support import (
    ALICE,
    BOB,
    COMPLIANCE_PERMS,
    OPERATOR_PERMS,
    PASSWORD,
    PROJECT,
    make_staff,
    seed_tenant,
)

from .._erasure_support import found_in, seed, stored_bytes, subject_markers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root():
    return make_staff("root", superuser=True, password=PASSWORD)


def _row(page, text: str):
    return page.locator("#result_list tbody tr", has_text=text)


def _run_action(page, action: str) -> None:
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")


def _raw(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.fetchall()


def test_log_in_and_see_the_overview(page, root, log_in, shot):
    seed_tenant()
    log_in("root", PASSWORD)
    expect(page.locator(".mem-overview-module h2")).to_have_text("Agent memory at a glance")
    chart = page.locator("svg.mem-chart")
    expect(chart).to_be_visible()
    expect(chart).to_have_attribute("aria-label", re.compile(f"{PROJECT}: 1 memory, 2 pending"))
    expect(page.locator(".mem-compliance")).to_contain_text("Erase a subject")
    shot("index", readme="admin-overview", element=".mem-overview")


def test_search_and_filter_memories(page, root, log_in, shot):
    seed_tenant()
    log_in("root", PASSWORD)
    page.click("#content-main a[href='/admin/memoryapp/memory/']")
    expect(page.locator("#result_list tbody tr")).to_have_count(4)

    page.fill("#searchbar", "editor")
    page.press("#searchbar", "Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    expect(_row(page, "Alice edits in vim")).to_be_visible()
    expect(_row(page, "Bob uses emacs")).to_be_visible()

    page.locator("#changelist-filter a", has_text="acme/bob").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(_row(page, "Bob uses emacs")).to_be_visible()
    expect(page.locator("#searchbar")).to_have_value("editor")  # the search is kept
    shot("search-and-namespace")

    page.goto("/admin/memoryapp/memory/")
    page.locator("#changelist-filter a", has_text="workflow").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(_row(page, "Deploy target")).to_be_visible()
    page.locator("#changelist-filter a", has_text="Deleted (soft-deleted)").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(0)
    page.locator("#changelist-filter details[data-filter-title=type] a", has_text="All").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(_row(page, "Old laptop")).to_be_visible()


def test_soft_delete_and_restore_one(page, root, log_in, shot):
    rows = seed_tenant()
    editor = rows["editor"]
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/memory/")
    _row(page, "Alice edits in vim").locator("input.action-select").check()
    _run_action(page, "soft_delete_selected")
    expect(page.locator("h1")).to_have_text("Soft-delete memories")
    expect(page.locator("#content-main")).to_contain_text("not erasure")
    shot("confirm-soft-delete")
    page.click("input[value='Yes, soft-delete it']")
    expect(page.locator(".messagelist")).to_contain_text("Soft-deleted 1 memory")
    expect(_row(page, "Alice edits in vim")).to_have_count(0)
    assert Memory.objects.get(pk=editor.id).deleted_at is not None

    page.locator("#changelist-filter a", has_text="Deleted (soft-deleted)").click()
    _row(page, "Alice edits in vim").locator("input.action-select").check()
    _run_action(page, "restore_selected")
    expect(page.locator("h1")).to_have_text("Restore memories")
    page.click("input[value='Yes, restore it']")
    expect(page.locator(".messagelist")).to_contain_text("Restored 1 memory")
    page.locator("#changelist-filter a", has_text="Live").click()
    expect(_row(page, "Alice edits in vim")).to_be_visible()
    assert Memory.objects.get(pk=editor.id).deleted_at is None
    events = MemoryEvent.objects.filter(memory_id=editor.id, actor="root")
    assert list(events.values_list("event_type", flat=True)) == ["soft_delete", "restore"]

    page.goto(f"/admin/memoryapp/memory/{editor.id}/change/")
    expect(page.locator(".mem-history")).to_contain_text("restore")
    shot("memory-detail")
    page.click(".object-tools a.historylink")  # Django's History page lists both actions
    expect(page.locator("#change-history tbody tr")).to_have_count(2)
    expect(page.locator("#change-history")).to_contain_text("Soft-deleted.")
    expect(page.locator("#change-history")).to_contain_text("Restored.")
    shot("memory-history")


def test_select_all_across_pages_then_soft_delete(page, root, log_in, shot):
    from tests.admin.test_admin_select_across import _memories

    _memories("bulk/big", 1_200, "alpha")  # more rows than Django accepts fields in a POST
    _memories("bulk/small", 10, "beta")
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/memory/?namespace=bulk%2Fbig")
    page.check("#action-toggle")
    page.locator(".actions .question a").click()  # "Select all 1200 memories"
    _run_action(page, "soft_delete_selected")
    expect(page.locator("h1")).to_have_text("Soft-delete memories")
    expect(page.locator("#content-main")).to_contain_text("You chose “Select all”")
    expect(page.locator("#content-main h2")).to_contain_text("1,200 memories")
    shot("confirm-select-all")
    page.click("input[value='Yes, soft-delete them']")
    expect(page.locator(".messagelist")).to_contain_text("Soft-deleted 1,200 memories")
    assert not Memory.objects.live().filter(namespace="bulk/big").exists()
    assert Memory.objects.live().filter(namespace="bulk/small").count() == 10


def test_erase_a_subject_through_the_compliance_page(page, root, log_in, shot):
    markers, kept = seed(ALICE), seed(BOB)
    log_in("root", PASSWORD)
    page.click(".mem-compliance a:has-text('Erase a subject')")
    page.fill("#id_subject", ALICE)
    page.click("input[value='Show what will be erased']")
    counts = page.locator("#erase-counts")
    expect(counts).to_contain_text("memory_review_queue")
    expect(page.locator("#content-main")).to_contain_text("This cannot be undone.")
    expect(counts.locator("tr", has_text="session_summaries")).to_contain_text("1")
    shot("confirm", readme="admin-erase-confirmation", element="#content")
    page.click("input[value='Yes, erase permanently']")

    # The purge (VACUUM) may wait for other sessions: allow it its configured time.
    expect(page.locator(".mem-receipt h2")).to_contain_text("Erasure receipt", timeout=45_000)
    # The plain-words summary first; the technical proof (badges) folded below it.
    expect(page.locator("#receipt-headline")).to_have_text("Erased and verified by byte scan")
    page.locator("#receipt-proof summary").click()
    expect(
        page.locator(".mem-receipt .mem-badge.mem-live", has_text="verified by byte scan")
    ).to_be_visible()
    expect(page.locator(".messagelist")).to_contain_text("The subject was erased")
    shot("receipt", readme="admin-receipt", element=".mem-receipt")

    receipt = ErasureReceipt.objects.get()
    assert receipt.actor == "root" and receipt.target_kind == "subject"
    assert receipt.purge_status == "purged" and receipt.vacuumed, receipt.purge_status
    assert receipt.verified, receipt.verification
    assert "byte scan" in receipt.verification
    # A raw query finds no row of the subject in any table...
    assert _raw(
        "SELECT COUNT(*) FROM memories WHERE namespace = %s OR (scope = 'user' AND subject = %s)",
        [ALICE, ALICE],
    ) == [(0,)]
    for table in ("session_summaries", "memory_review_queue"):
        assert _raw(f"SELECT COUNT(*) FROM {table} WHERE subject = %s", [ALICE]) == [(0,)]
    erased = [i for ids in receipt.erased_ids.values() for i in ids]
    assert erased and not MemoryEvent.objects.filter(memory_id__in=erased).exists()
    # ...and the bytes are gone from the database files, while the kept subject's remain.
    data = stored_bytes()
    assert found_in(data, subject_markers(markers)) == []
    assert found_in(data, kept["long"]) == kept["long"]


def test_approve_and_purge_review_items(page, root, log_in, shot):
    seed_tenant()
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/reviewitem/")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    _row(page, "Constraint: never use tabs").locator("input.action-select").check()
    _run_action(page, "approve_selected")
    expect(page.locator("h1")).to_have_text("Approve review items")
    page.click("input[value='Yes, approve it']")
    expect(page.locator(".messagelist")).to_contain_text("Approved 1 review item")
    # The queue opens on pending items: the approved one has left it ...
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    page.click("#changelist-filter a:has-text('All')")  # ... and "All" shows it approved
    expect(_row(page, "Constraint: never use tabs")).to_contain_text("approved")
    memory = Memory.objects.get(key_normalized="constraint_not_use_tabs_for_indentation")
    assert memory.source == "crystallized" and memory.namespace == PROJECT
    shot("approved")

    _row(page, "Preference: dark themes").locator("input.action-select").check()
    _run_action(page, "purge_selected")
    expect(page.locator("h1")).to_have_text("Purge review items permanently")
    expect(page.locator("table.mem-counts")).to_contain_text("memory_review_queue")
    shot("confirm-purge")
    page.click("input[value='Yes, purge it permanently']")
    expect(page.locator(".messagelist")).to_contain_text("Purged 1 review item permanently")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert list(ReviewItem.objects.values_list("status", flat=True)) == ["approved"]

    # everything of one status, from the "Purge by status" page
    page.click("a:has-text('Purge by status')")
    page.select_option("#id_status", "approved")
    page.click("input[value='Show what will be purged']")
    page.click("input[value='Yes, purge 1 permanently']")
    expect(page.locator(".messagelist")).to_contain_text("Purged 1 review item permanently")
    assert not ReviewItem.objects.exists()
    receipts = ErasureReceipt.objects.order_by("created_at")
    assert [(r.actor, r.counts["memory_review_queue"]) for r in receipts] == [("root", 1)] * 2


def test_staff_without_the_erase_permission_sees_no_erase_action(page, log_in, shot):
    seed_tenant()
    perms = [*OPERATOR_PERMS, *(p for p in COMPLIANCE_PERMS if p != "erase_memory")]
    make_staff("ops", perms, password=PASSWORD)
    log_in("ops", PASSWORD)
    expect(page.locator(".mem-compliance")).not_to_contain_text("Erase a subject")
    expect(page.locator(".mem-compliance")).to_contain_text("Wipe a namespace")

    page.goto("/admin/memoryapp/memory/")
    options = page.locator("select[name=action] option").all_inner_texts()
    assert "Soft-delete selected memories" in options
    assert not [o for o in options if "Erase" in o], options
    page.locator("#result_list tbody tr a").first.click()
    expect(page.locator(".object-tools")).to_contain_text("Soft delete")
    expect(page.locator(".object-tools")).not_to_contain_text("Erase permanently")
    shot("no-erase")

    response = page.goto("/admin/memoryapp/erasurereceipt/erase-subject/")
    assert response.status == 403
    # The admin's own page, not Django's bare "403 Forbidden".
    expect(page.locator("#site-name")).to_have_text("Agent memory back office")
    expect(page.locator("h1")).to_have_text("Permission needed")
    expect(page.locator("#forbidden-reason")).to_contain_text("Can erase memories permanently")
    shot("forbidden")
    page.click("text=Back to the admin index")
    page.wait_for_url("**/admin/")
