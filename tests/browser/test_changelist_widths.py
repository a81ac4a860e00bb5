"""Every changelist of the admin at 1,280 px and at 1,024 px, with Django's navigation
sidebar and the filters open (beside the list at 1,280, under it below that): the results
table fits its container and no cell is clipped or squeezed into a tall column (issue #31:
Session summaries, Memory events, Namespace grants; issue #39: 1,024 px)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import NoReverseMatch, reverse

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import export
from memoryapp.compliance.desk import assign, open_request
from memoryapp.models import DeskGrant, ErasureReceipt, ReviewItem
from tests._admin_support import ALICE, PASSWORD, PROJECT, make_staff, seed_tenant

pytestmark = pytest.mark.django_db(transaction=True)
User = get_user_model()

WIDTH = 1280
NARROW = 1024  # a small laptop, or a window beside another (issue #39)
MAX_LINES = 5  # a cell taller than this many lines is a column squeezed too narrow
# Realistic long values (not one unbroken word: those are cut with an ellipsis by design).
LONG_NAMESPACE = "acme-corporation/customer-support-europe"
LONG_SUMMARY = (
    "The user and the agent went through the deployment checklist for the payments "
    "service, moved the staging database to the new cluster, wrote a rollback runbook "
    "and agreed to revisit the alerting thresholds after the next release. " * 3
)

# The measure, in the page: what sticks out of the results container, what is clipped
# inside a cell, which cells wrap past MAX_LINES lines.
MEASURE = """(maxLines) => {
  const t = document.querySelector('#result_list');
  if (!t) return {missing: true};
  const c = t.closest('.results') || t.parentElement;
  const box = c.getBoundingClientRect();
  const out = [];
  const page = document.documentElement.scrollWidth;
  const view = window.innerWidth;
  if (page > view) out.push(`the page scrolls sideways: ${page} > ${view}`);
  const [wide, room] = [c.scrollWidth, c.clientWidth];
  if (wide > room) out.push(`the results scroll: ${wide} > ${room}`);
  for (const cell of t.querySelectorAll('thead th, tbody td, tbody th')) {
    const name = cell.className.split(' ').filter((n) => /^(field|column)-/.test(n)).join(' ')
      || cell.tagName.toLowerCase();
    const r = cell.getBoundingClientRect();
    if (r.right > box.right + 0.5) out.push(`${name} ends at ${r.right} past ${box.right}`);
    if (cell.scrollWidth > cell.clientWidth + 1) {
      out.push(`${name} is clipped: ${cell.scrollWidth} > ${cell.clientWidth}`);
    }
    // The content's own height (a row is as tall as its tallest cell): elements by their
    // boxes (a clamped text is as tall as its clamp), bare text by its line boxes.
    let top = Infinity, bottom = -Infinity;
    for (const node of cell.childNodes) {
      let r;
      if (node.nodeType === Node.ELEMENT_NODE) r = node.getBoundingClientRect();
      else if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) {
        const range = document.createRange();
        range.selectNodeContents(node);
        r = range.getBoundingClientRect();
      }
      if (r && r.height) { top = Math.min(top, r.top); bottom = Math.max(bottom, r.bottom); }
    }
    const style = getComputedStyle(cell);
    const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.4;
    const lines = bottom > top ? Math.round((bottom - top) / line) : 0;
    if (cell.tagName === 'TD' && lines > maxLines) out.push(`${name} wraps to ${lines} lines`);
  }
  return {problems: [...new Set(out)], sidebar: !!document.querySelector('#nav-sidebar')
    && getComputedStyle(document.querySelector('#nav-sidebar')).visibility !== 'hidden',
    filters: !!document.querySelector('#changelist-filter')};
}"""


@pytest.fixture
def root():
    return make_staff("root", superuser=True, password=PASSWORD)


def _seed() -> None:
    """A row (or several) in every table an operator lists, with long realistic values."""
    seed_tenant()
    mm = MemoryManager(project=LONG_NAMESPACE, user=ALICE, session_id="support-session-2026-12")
    mm.upsert("Escalation path for billing", "Escalate billing issues to the finance queue.")
    mm.save_session_summary(LONG_SUMMARY, 48_000, 212)
    mm.crystallize_user_messages([{"role": "user", "content": "I prefer dark themes."}])
    ReviewItem.objects.filter(namespace=LONG_NAMESPACE).update(evidence=LONG_SUMMARY)
    client = token_client("support-bot-production", [LONG_NAMESPACE + "/", PROJECT], write=True)
    client.post("/api/memories/", {"project": PROJECT, "key": "from api", "value": "v"})
    ErasureReceipt.objects.create(
        actor="compliance-officer@example.com",
        target_kind="subject",
        counts={"memories": 1_234, "memory_events": 9_012, "django_admin_log": 3},
        state="deleted",
        purge_status="not purged: the database was busy (another transaction held a lock)",
    )
    export(subject=ALICE, actor="compliance-officer@example.com", via="admin")  # an export record
    made = open_request(
        subject=ALICE,
        right="objection",
        actor="compliance-officer@example.com",
        reference="Ticket SUP-20931, Alice Example (letter of 3 December, forwarded by legal)",
    )
    assign(made, User.objects.get(username="root"), actor="compliance-officer@example.com")
    DeskGrant.objects.create(user=User.objects.get(username="root"), namespace=LONG_NAMESPACE + "/")


def _changelists() -> list[tuple[str, str]]:
    urls = []
    for model in admin.site._registry:
        opts = model._meta
        try:
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        except NoReverseMatch:
            continue
        urls.append((f"{opts.app_label}.{opts.model_name}", url))
    return sorted(urls)


@pytest.mark.parametrize("width", [WIDTH, NARROW])
def test_every_changelist_fits_with_both_sidebars(page, root, log_in, shot, width):
    _seed()
    page.set_viewport_size({"width": width, "height": 900})
    log_in("root", PASSWORD)
    found: dict[str, list[str]] = {}
    measured = 0
    for name, url in _changelists():
        page.goto(url)
        result = page.evaluate(MEASURE, MAX_LINES)
        if result.get("missing"):
            continue  # a list with no rows and no table, or not a table at all
        measured += 1
        assert result["sidebar"], f"{name}: the navigation sidebar is not open"
        if result["problems"]:
            shot(f"{name.replace('.', '-')}-{width}")
            found[name] = result["problems"]
    assert measured >= 8, measured
    assert not found, "\n".join(f"{n}: {'; '.join(p)}" for n, p in found.items())
