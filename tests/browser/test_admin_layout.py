"""The back office at the widths operators use (1,280 and 1,920 px): every column in view."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, ReviewItem
from tests._admin_support import PASSWORD, PROJECT, make_staff, seed_tenant

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1280, 1920)
# One unbroken word as long as a title may be (120 characters): nothing to wrap it at.
LONG_TITLE = "Deployment" + "Checklist" * 12 + "X" * 2
LONG_CONTENT = "https://example.com/" + "segment" * 80


@pytest.fixture
def root():
    return make_staff("root", superuser=True, password=PASSWORD)


def _seed_long_rows() -> None:
    seed_tenant()
    mm = MemoryManager(project=PROJECT)
    mm.upsert(LONG_TITLE, LONG_CONTENT, tags=["ops"])
    deleted = mm.upsert("Old" + LONG_TITLE, LONG_CONTENT, tags=["ops"])  # another key
    mm.delete(deleted.id)


def _receipts() -> None:
    counts = {
        "memories": 1_234,
        "session_summaries": 56,
        "memory_review_queue": 78,
        "memory_events": 9_012,
        "django_admin_log": 3,
    }
    ErasureReceipt.objects.create(
        actor="compliance-officer@example.com",
        target_kind="subject",
        counts=counts,
        state="deleted",
        purge_status="not purged: the database was busy (another transaction held a lock)",
    )
    ErasureReceipt.objects.create(
        actor="root",
        target_kind="ids",
        counts={"memories": 2, "memory_events": 4},
        state="complete",
        purge_status="purged",
        vacuumed=True,
        verified=True,
    )


def _fits(page, selector: str, width: int) -> None:
    """Every matching element is drawn inside the viewport, and nothing scrolls sideways."""
    boxes = [el.bounding_box() for el in page.locator(selector).all()]
    assert boxes, selector
    for box in boxes:
        assert box is not None and box["x"] >= 0, (selector, box)
        assert box["x"] + box["width"] <= width, (selector, box, width)
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, (scroll, width)
    table = page.evaluate(
        "(() => { const t = document.querySelector('#result_list');"
        " const c = t.closest('.results') || t.parentElement;"
        " return [c.scrollWidth, c.clientWidth]; })()"
    )
    assert table[0] <= table[1], f"the results table scrolls sideways: {table}"


@pytest.mark.parametrize("width", WIDTHS)
def test_memories_list_keeps_every_column_in_view(page, root, log_in, shot, width):
    _seed_long_rows()
    page.set_viewport_size({"width": width, "height": 900})
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/memory/")
    shot(f"memories-{width}")
    for column in ("state", "namespace_display", "kind", "origin", "updated"):
        _fits(page, f"#result_list th.column-{column}", width)
        _fits(page, f"#result_list td.field-{column}", width)
    title = page.locator("#result_list .mem-title", has_text="Deployment").first
    expect(title).to_have_attribute("title", LONG_TITLE)


def _overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_deleted_view_banner_clears_the_add_button(page, root, log_in, shot, width):
    _seed_long_rows()
    page.set_viewport_size({"width": width, "height": 900})
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/memory/?state=deleted")
    shot(f"deleted-{width}")
    banner = page.locator(".mem-callout", has_text="soft-deleted")
    add = page.locator(".object-tools a.addlink")
    expect(banner).to_be_visible()
    expect(add).to_be_visible()
    assert not _overlap(banner.bounding_box(), add.bounding_box())
    for column in ("state", "namespace_display", "kind", "origin", "updated"):
        _fits(page, f"#result_list td.field-{column}", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_receipts_list_keeps_every_column_in_view(page, root, log_in, shot, width):
    _receipts()
    page.set_viewport_size({"width": width, "height": 900})
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/erasurereceipt/")
    shot(f"receipts-{width}")
    for column in ("created", "state_badge", "purge_flag", "vacuum", "verified_flag"):
        _fits(page, f"#result_list th.column-{column}", width)
        _fits(page, f"#result_list .field-{column}", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_review_queue_keeps_every_column_in_view(page, root, log_in, shot, width):
    seed_tenant()
    ReviewItem.objects.create(
        namespace=PROJECT,
        scope="project",
        type="note",
        key_normalized="long",
        title=LONG_TITLE,
        content=LONG_CONTENT,
        evidence=LONG_CONTENT,
    )
    page.set_viewport_size({"width": width, "height": 900})
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/reviewitem/")
    shot(f"review-{width}")
    for column in ("status_badge", "namespace_subject", "kind", "seen"):
        _fits(page, f"#result_list th.column-{column}", width)
        _fits(page, f"#result_list td.field-{column}", width)


def test_the_receipts_list_totals_the_rows_and_keeps_the_detail_in_a_tooltip(page, root, log_in):
    _receipts()
    log_in("root", PASSWORD)
    page.goto("/admin/memoryapp/erasurereceipt/")
    removed = page.locator("#result_list td.field-counts_summary span", has_text="10,380 rows")
    per_table = (  # in the tables' usual order on both vendors; admin log titles not in the total
        "memories: 1,234, session_summaries: 56, memory_review_queue: 78, "
        "memory_events: 9,012, django_admin_log: 3 (titles replaced)"
    )
    expect(removed).to_have_attribute("title", per_table)
    purge = page.locator("#result_list td.field-purge_flag span[title^='not purged: the database']")
    expect(purge).to_have_count(1)
    state = page.locator("#result_list .mem-badge", has_text="deleted")
    expect(state).to_have_attribute("title", "deleted (purge or verification to come)")
