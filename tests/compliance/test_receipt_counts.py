"""One receipt, one row count: the admin's receipt list and page and ``memory erase --list``."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from memoryapp import compliance
from memoryapp.models import ErasureReceipt, Memory
from tests._admin_support import RECEIPTS, make_staff
from tests._erasure_support import ALICE, seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def receipt_with_history():
    """An erasure of a subject whose memories have admin history entries (titles replaced)."""
    seed(ALICE)
    admin = make_staff("boss", superuser=True)
    kind = ContentType.objects.get_for_model(Memory)
    ids = list(Memory.objects.filter(namespace=ALICE).values_list("pk", flat=True))
    for pk in ids:
        for _ in range(2):  # two history entries per memory: 2x what the memories add
            LogEntry.objects.create(
                user=admin,
                content_type=kind,
                object_id=pk,
                object_repr="a title",
                action_flag=CHANGE,
            )
    receipt = compliance.erase(subject=ALICE, actor="dpo", purge=False)
    assert receipt.counts[compliance.selection.ADMIN_LOG] == 2 * len(ids) > 0
    return admin, receipt


def test_rows_removed_leaves_out_the_admin_history():
    counts = {"memories": 3, "session_summaries": 1, "django_admin_log": 40, "x": "7"}
    assert compliance.rows_removed(counts) == 4
    assert compliance.rows_removed({}) == 0
    assert compliance.rows_removed(None) == 0


def test_admin_and_cli_give_one_count(receipt_with_history, client):
    admin, receipt = receipt_with_history
    expected = compliance.rows_removed(receipt.counts)
    everything = sum(receipt.counts.values())
    assert expected < everything  # the history entries would make the counts differ

    out = io.StringIO()
    call_command("memory", "erase", "--list", stdout=out)
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.startswith(receipt.pk)]
    assert re.search(rf"\brows {expected}\b", line), line

    client.force_login(admin)
    listing = client.get(RECEIPTS).content.decode()
    assert f">{expected} rows<" in listing
    page = client.get(f"{RECEIPTS}{receipt.pk}/change/").content.decode()
    assert re.search(rf"Removed in all.*?{expected} rows", page, re.S), "the page's total"


@pytest.mark.django_db(transaction=True)  # the purge runs outside any transaction
def test_cli_receipt_says_history_entries_are_kept(receipt_with_history, purge_settings):
    _, receipt = receipt_with_history
    out = io.StringIO()
    call_command("memory", "erase", "--retry", receipt.pk, stdout=out)
    text = out.getvalue()
    n = receipt.counts["django_admin_log"]
    assert f"(and django_admin_log {n} titles replaced)" in text
    assert not re.search(r"removed: [^\n(]*django_admin_log", text)
    assert ErasureReceipt.objects.filter(pk=receipt.pk).exists()
