"""Dates and numbers read the same on every admin page, Django's own and the app's."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.utils import timezone

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent
from memoryapp.rules.wording import plural
from memoryapp.templatetags.memoryapp_admin import thousands
from tests._admin_support import (
    ERASE_SUBJECT,
    EVENTS,
    MEMORIES,
    PROJECT,
    RECEIPTS,
    WIPE,
    client_for,
    make_staff,
)

from .test_admin_select_across import _memories, select_all

pytestmark = pytest.mark.django_db

ONE_FORMAT = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b")
# Django's English defaults ("Dec. 3, 2025, 2:32 p.m.", "12/03/2025") and the old short form.
OTHER_FORMATS = re.compile(
    r"\b(a\.m\.|p\.m\.|noon|midnight)"
    r"|\b(Jan|Feb|March|April|May|June|July|Aug|Sept|Oct|Nov|Dec)\.? \d{1,2}, \d{4}"
    r"|\b\d{2}/\d{2}/\d{4}\b"
    r"|\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?!:)"
)


@pytest.fixture
def root():
    return make_staff("root", superuser=True)


def _stamp(value) -> str:
    return f"{timezone.localtime(value):%Y-%m-%d %H:%M:%S}"


def test_dates_read_the_same_on_every_admin_page(root):
    admin = client_for(root)
    memory = MemoryManager(project=PROJECT).upsert("Deploy day", "Tuesday")
    LogEntry.objects.log_actions(root.pk, [memory], CHANGE, "Changed content.")
    receipt = ErasureReceipt.objects.create(actor="root", target_kind="ids")
    event = MemoryEvent.objects.get(memory_id=memory.id)
    memory = Memory.objects.get(pk=memory.id)
    entry = LogEntry.objects.get()
    pages = {
        MEMORIES: memory.updated_at,  # the app's "updated" column
        f"{MEMORIES}{memory.id}/change/": memory.created_at,  # Django's read-only field
        f"{MEMORIES}{memory.id}/history/": entry.action_time,  # Django's History page
        RECEIPTS: receipt.created_at,
        f"{RECEIPTS}{receipt.pk}/change/": receipt.created_at,
        EVENTS: event.timestamp,
    }
    for url, when in pages.items():
        html = admin.get(url).content.decode()
        assert _stamp(when) in html, url
        assert ONE_FORMAT.search(html), url
        found = OTHER_FORMATS.search(html)
        assert found is None, (url, found and found.group(0))


# ------------------------------------------------------------------ numbers
def test_counts_are_written_with_thousands_separators():
    assert plural(1, "memory", "memories") == "1 memory"
    assert plural(1_200, "memory", "memories") == "1,200 memories"
    assert plural(12_500, "row", "rows") == "12,500 rows"
    assert [thousands(v) for v in (0, 999, 1_200, 1_234_567)] == ["0", "999", "1,200", "1,234,567"]
    assert [thousands(v) for v in ("12", None, True)] == ["12", None, True]  # only integers


def test_the_overview_and_the_confirmation_pages_separate_thousands(root):
    admin = client_for(root)
    _memories("bulk/big", 1_200, "alpha")
    index = admin.get("/admin/").content.decode()
    assert '<span class="mem-stat-num">1,200</span><span class="mem-stat-label">live' in index
    assert "bulk/big: 1,200 memories, 0 pending review" in index  # the chart's summary
    assert ">1,200</text>" in index  # the bar's total
    assert "1200" not in index

    page = select_all(admin, MEMORIES, "soft_delete_selected", {"namespace": "bulk/big"})
    html = page.content.decode()
    assert "every one of the 1,200 memories the list selects" in html
    assert '<h2 id="mem-selected">1,200 memories</h2>' in html
    assert "… and 1,100 more" in html
    page = select_all(admin, MEMORIES, "erase_selected", {"namespace": "bulk/big"})
    assert '<td class="num">1,200</td>' in page.content.decode()  # the rows per table

    html = admin.post(WIPE, {"project": "bulk/big"}).content.decode()
    assert '<td class="num">1,200</td>' in html
    Memory.objects.filter(namespace="bulk/big").update(namespace="acme/zoe", scope="user")
    html = admin.post(ERASE_SUBJECT, {"subject": "acme/zoe"}).content.decode()
    assert "1,200" in html and "1200" not in html


def test_djangos_own_changelist_counts_separate_thousands(root):
    """The search count, the paginator and the "select all" strings Django writes itself."""
    admin = client_for(root)
    _memories("bulk/big", 1_501, "alpha")
    (first, *_) = _memories("bulk/other", 435, "beta")
    html = admin.get(MEMORIES, {"q": "alpha"}).content.decode()
    assert "1,501 results (" in html
    assert ">1,936 total</a>" in html
    assert "1,501 memories" in html  # the paginator
    assert "Select all 1,501 memories" in html
    assert "All 1,501 selected" in html
    assert not re.search(r"\b1501\b|\b1936\b", html), "a count without its separator"
    one = admin.get(MEMORIES, {"q": first}).content.decode()  # the singular still chosen
    assert "1 result (" in one and "1 memory" in one
