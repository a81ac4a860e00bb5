"""Admin details a new operator trips over (issue #31): recent actions, names, the
confirmation pages' wording and order, the receipt page that follows the worker."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType

from memoryapp import compliance
from memoryapp.models import ErasureReceipt, Memory, ReceiptState
from tests._admin_support import (
    ALICE,
    BOB,
    MEMORIES,
    PURGE_REVIEW,
    RECEIPTS,
    act,
    client_for,
    make_staff,
    seed_tenant,
)

from .test_admin_select_across import _memories, select_all

pytestmark = pytest.mark.django_db


@pytest.fixture
def root():
    return make_staff("root", superuser=True)


@pytest.fixture
def rows():
    return seed_tenant()


def _sidebar(html: str) -> str:
    return html[html.index('id="recent-actions-module"') :]


def _logged_change(user, memory) -> None:
    LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Memory),
        object_id=memory.pk,
        object_repr=memory.title,
        action_flag=CHANGE,
    )


# ------------------------------------------------------------ recent actions
def test_recent_actions_link_only_rows_that_still_exist(root, rows):
    admin = client_for(root)
    _logged_change(root, rows["editor"])  # Alice's: erased below
    _logged_change(root, rows["bob_editor"])  # Bob's: stays
    compliance.erase(subject=ALICE, actor="root", purge=False)
    assert LogEntry.objects.filter(object_repr="[erased]").count() == 1

    sidebar = _sidebar(admin.get("/admin/").content.decode())
    gone_url = f"/admin/memoryapp/memory/{rows['editor'].pk}/change/"
    kept_url = f"/admin/memoryapp/memory/{rows['bob_editor'].pk}/change/"
    assert gone_url not in sidebar
    assert re.search(
        r"\[erased\]\s*<span class=\"mini quiet\">\(no longer exists\)</span>", sidebar
    )
    assert f'<a href="{kept_url}">Preferred editor</a>' in sidebar
    assert admin.get(kept_url).status_code == 200


def test_recent_actions_of_nobody_say_none(root):
    assert "None available" in _sidebar(client_for(root).get("/admin/").content.decode())


# ------------------------------------------------------------------- names
def test_the_purge_page_names_review_items_as_the_sidebar_does(root, rows):
    html = client_for(root).get(PURGE_REVIEW).content.decode()
    crumbs = html[html.index('class="breadcrumbs"') :].split("</div>")[0]
    assert ">Review items</a>" in crumbs and "Review queue" not in html
    assert "<h1>Purge review items</h1>" in html


# ------------------------------------------------------------ confirmations
def test_a_one_row_confirmation_speaks_in_the_singular(root, rows):
    admin = client_for(root)
    one = act(admin, MEMORIES, "soft_delete_selected", [rows["editor"].pk]).content.decode()
    assert 'value="Yes, soft-delete it"' in one and "them" not in one.split("mem-submit-row")[1]
    two = [rows["editor"].pk, rows["deploy"].pk]
    assert (
        'value="Yes, soft-delete them"'
        in act(admin, MEMORIES, "soft_delete_selected", two).content.decode()
    )
    item = rows["review"][0]
    page = act(admin, "/admin/memoryapp/reviewitem/", "approve_selected", [item.pk])
    assert 'value="Yes, approve it"' in page.content.decode()


def test_a_long_confirmation_puts_the_summary_and_the_button_before_the_list(root):
    admin = client_for(root)
    _memories("bulk/big", 1_501, "alpha")
    html = select_all(admin, MEMORIES, "soft_delete_selected", {"namespace": "bulk/big"})
    html = html.content.decode()
    summary = html.index('id="mem-summary"')
    button = html.index('value="Yes, soft-delete them"')
    listing = html.index('class="mem-objects"')
    assert summary < button < listing
    assert "Selected: <strong>1,501 memories</strong> (the first 100 are listed" in html
    assert html.count('<li><a href="/admin/memoryapp/memory/') == 100


# ------------------------------------------------------------ the receipt page
def _receipt_page(admin, receipt) -> str:
    return admin.get(f"{RECEIPTS}{receipt.pk}/change/").content.decode()


def test_a_receipt_refreshes_itself_while_the_worker_has_it(root, rows):
    admin = client_for(root)
    receipt = compliance.erase(subject=BOB, actor="root", purge=False)  # left to the worker
    assert receipt.state == ReceiptState.DELETED
    page = _receipt_page(admin, receipt)
    assert '<meta http-equiv="refresh" content="5">' in page
    assert 'id="receipt-refreshing"' in page and "reload it" not in page

    ErasureReceipt.objects.filter(pk=receipt.pk).update(
        purge_status="not purged: the database was busy"
    )
    assert 'http-equiv="refresh"' in _receipt_page(admin, receipt)  # the worker retries it

    ErasureReceipt.objects.filter(pk=receipt.pk).update(
        state=ReceiptState.COMPLETE, purge_status="purged"
    )
    page = _receipt_page(admin, receipt)  # final: no more reloading
    assert 'http-equiv="refresh"' not in page and 'id="receipt-refreshing"' not in page


def test_the_erasure_message_says_the_receipt_follows_the_worker(root, rows, settings):
    settings.MEMORYAPP_ERASURE_WORKER = True
    admin = client_for(root)
    r = admin.post(
        "/admin/memoryapp/erasurereceipt/erase-subject/", {"subject": BOB, "post": "yes"}
    )
    page = admin.get(r["Location"]).content.decode()
    assert "refreshing itself until it is done" in page and "reload it" not in page
