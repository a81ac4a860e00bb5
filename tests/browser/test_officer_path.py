"""The compliance officer's path in a real browser at 1,280 px (issue #30, item 8):
open a request -> look the key up -> export -> erase -> receipt -> print view -> answer.

Screenshots ``tests/screenshots/officer-*.png`` (shown in the README) are written
only with ``UPDATE_README_SCREENSHOTS=1``: a plain run, as in CI, leaves the tree clean.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from memoryapp.compliance import desk
from memoryapp.models import ErasureReceipt, Memory, RequestStatus, SubjectRequest
from tests._admin_support import ALICE, BOB, DESK_PERMS, PASSWORD, make_staff, seed_tenant

from .conftest import README_SWITCH, SCREENSHOTS

pytestmark = pytest.mark.django_db(transaction=True)

WIDTH = 1280


@pytest.fixture
def officer_shot(page):
    """``officer_shot(n, name)``: ``tests/screenshots/officer-<n>-<name>.png``, when asked for."""

    def take(step: int, name: str) -> Path | None:
        if os.environ.get(README_SWITCH) != "1":
            return None
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"officer-{step}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def _no_horizontal_scroll(page) -> None:
    """At 1,280 px the page fits: nothing overflows to the right."""
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than the window"


def test_the_officer_answers_an_erasure_request(page, log_in, officer_shot, tmp_path):
    seed_tenant()
    make_staff("dpo", perms=DESK_PERMS, password=PASSWORD)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    log_in("dpo", PASSWORD)

    # 1. Intake: the front page leads to the desk; the key is typed once.
    expect(page.locator("#request-deadlines")).to_contain_text("0 open requests")
    page.goto("/admin/memoryapp/subjectrequest/add/")
    page.fill("#id_subject", ALICE)
    page.select_option("#id_right", "erasure")
    page.fill("#id_notes", "Asked by e-mail; identity checked against the account.")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    page.locator("#result_list tbody tr a").first.click()
    expect(page.locator("#request-actions")).to_contain_text("Status: open")
    expect(page.locator("input[name=_save]")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text(ALICE)
    _no_horizontal_scroll(page)
    officer_shot(1, "request")
    request_url = page.url
    made = SubjectRequest.objects.get()

    # 2. Look the key up: nothing done for this person yet.
    page.goto("/admin/memoryapp/erasurereceipt/lookup/")
    page.fill("#id_subject", ALICE)
    page.locator("#content-main input[type=submit]").click()
    expect(page.locator("#lookup-receipts")).to_contain_text("(0)")
    officer_shot(2, "lookup")

    # 3. Export: one click, the download.
    page.goto(request_url)
    page.click("#act-start")
    expect(page.locator(".messagelist")).to_contain_text("in progress")
    with page.expect_download() as download:
        page.click("#act-export")
    saved = tmp_path / "export.json"
    download.value.save_as(saved)
    document = json.loads(saved.read_text())
    assert {m["title"] for m in document["memories"]} >= {"user_city", "Preferred editor"}
    assert made.exports.count() == 1

    # 4. Erase: what we hold, per table and namespace, then the confirmation.
    page.reload()
    page.click("#act-erase")
    holdings = page.locator("#holdings")
    expect(holdings).to_contain_text("Memories (live and soft-deleted)")
    expect(holdings).to_contain_text("the person's own namespace")
    expect(page.locator("body")).not_to_contain_text(ALICE)
    _no_horizontal_scroll(page)
    officer_shot(3, "erase-confirm")
    page.click("#confirm-action")
    expect(page.locator(".messagelist")).to_contain_text(
        "Erased; the receipt is linked", timeout=45_000
    )
    assert not Memory.objects.filter(subject=ALICE).exists()
    assert Memory.objects.filter(subject=BOB).exists()
    officer_shot(4, "erased")

    # 5. The receipt, in plain words, linked both ways.
    receipt = ErasureReceipt.objects.get()
    page.locator(".messagelist a", has_text=receipt.pk).click()
    expect(page.locator("#receipt-summary")).to_be_visible()
    expect(page.locator(".mem-receipt-request a")).to_have_attribute(
        "href", f"/admin/memoryapp/subjectrequest/{made.pk}/change/"
    )
    _no_horizontal_scroll(page)
    officer_shot(5, "receipt")

    # 6. The printable version for the person: the summary, no subject key.
    page.goto(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/print/")
    expect(page.locator("#print-headline")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text(ALICE)
    page.emulate_media(media="print")
    officer_shot(6, "print")
    page.emulate_media(media="screen")

    # 7. Answer: confirmed, the key dropped, nothing more possible.
    page.goto(request_url)
    page.fill("#desk-outcome", "Erasure confirmed to the person with the printed receipt.")
    page.click("#act-answer")
    expect(page.locator("#close-outcome")).to_contain_text("Erasure confirmed")
    page.click("#confirm-action")
    expect(page.locator("#request-closed")).to_contain_text("answered")
    expect(page.locator("#act-export")).to_have_count(0)
    officer_shot(7, "answered")

    made.refresh_from_db()
    assert made.status == RequestStatus.ANSWERED and made.sealed is None
    assert desk.unseal(made) is None
    actions = [e.action for e in made.history.all()]
    assert actions == ["created", "started", "exported", "erased", "answered"]
    assert {e.actor for e in made.history.all()} == {"dpo"}
