"""Dates and numbers read the same on every admin page, Django's own and the app's."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.utils import timezone

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent

from ._admin_support import EVENTS, MEMORIES, PROJECT, RECEIPTS, client_for, make_staff

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
