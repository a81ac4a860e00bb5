"""Retention: soft-deleted memories and decided review items are erased for real once expired."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from memoryapp import MemoryManager
from memoryapp.compliance import export, preview_expired, purge_expired, retention_cutoffs
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._erasure_support import ALICE, PROJECT, found_in, marker, stored_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def _ago(days: float) -> dt.datetime:
    return timezone.now() - dt.timedelta(days=days)


@pytest.fixture
def aged(settings):
    # Other test runs on the same server can hold a transaction for a moment.
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    mm = MemoryManager(project=PROJECT, user=ALICE)
    marks = {k: marker(k) for k in ("old", "recent", "live", "approved", "rejected", "pending")}
    old = mm.upsert("user_old_fact", f"old {marks['old']}", scope="user")
    recent = mm.upsert("user_recent_fact", f"recent {marks['recent']}", scope="user")
    mm.upsert("user_live_fact", f"live {marks['live']}", scope="user")
    mm.delete(old.id)
    mm.delete(recent.id)
    Memory.objects.filter(pk=old.pk).update(deleted_at=_ago(40))
    Memory.objects.filter(pk=recent.pk).update(deleted_at=_ago(1))
    items = {}
    for status, age in (("approved", 40), ("rejected", 2), ("pending", 100)):
        items[status] = ReviewItem.objects.create(
            namespace=PROJECT,
            subject=ALICE,
            scope="project",
            type="decision",
            key_normalized=f"decision_{status}",
            title=f"Decision: {status}",
            content=f"{status} {marks[status]}",
            evidence=f"said {marks[status]}",
            status=status,
        )
        ReviewItem.objects.filter(pk=items[status].pk).update(updated_at=_ago(age))
    summary = mm.save_session_summary(f"summary of an old session {marker('summary')}")
    SessionSummary.objects.filter(pk=summary.pk).update(created_at=_ago(400))
    return {"marks": marks, "old": old, "recent": recent, "items": items, "summary": summary}


def test_purge_expired_erases_only_what_is_past_retention(aged):
    marks = aged["marks"]
    plan = preview_expired()
    assert plan["counts"]["memories"] == 1 and plan["counts"]["memory_review_queue"] == 1

    receipt = purge_expired(actor="cron")
    assert receipt.purged, receipt.purge_status

    assert receipt.target_kind == "retention" and receipt.verified, receipt.verification
    assert receipt.counts["memories"] == 1 and receipt.counts["memory_review_queue"] == 1
    assert receipt.counts["session_summaries"] == 0  # summaries are kept by default
    assert not Memory.objects.filter(pk=aged["old"].pk).exists()
    assert not MemoryEvent.objects.filter(memory_id=aged["old"].pk).exists()
    assert Memory.objects.filter(pk=aged["recent"].pk).exists()
    assert set(ReviewItem.objects.values_list("status", flat=True)) == {"rejected", "pending"}
    assert SessionSummary.objects.filter(pk=aged["summary"].pk).exists()
    data = stored_bytes()
    assert found_in(data, [marks["old"], marks["approved"]]) == []
    assert len(found_in(data, [marks["recent"], marks["live"], marks["pending"]])) == 3
    assert set(receipt.criteria["cutoffs"]) == {"memories", "memory_review_queue"}


@pytest.mark.django_db  # SQL-level only
def test_summaries_expire_when_configured(aged, settings):
    settings.MEMORYAPP_RETENTION_SESSION_SUMMARIES_DAYS = 365
    receipt = purge_expired()
    assert receipt.counts["session_summaries"] == 1
    assert not SessionSummary.objects.exists()


@pytest.mark.django_db  # SQL-level only
def test_no_retention_configured_means_nothing_happens(aged, settings):
    settings.MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS = None
    settings.MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS = None
    assert retention_cutoffs() == {}
    assert purge_expired() is None
    assert Memory.objects.filter(pk=aged["old"].pk).exists()


def test_nothing_expired_writes_an_empty_receipt_without_vacuum(settings):
    MemoryManager(project=PROJECT).upsert("fresh", "nothing is old here")
    receipt = purge_expired()
    assert sum(receipt.counts.values()) == 0
    assert receipt.purged and receipt.verified and not receipt.vacuumed


@pytest.mark.django_db
def test_bad_retention_setting_is_refused(settings):
    settings.MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS = -1
    with pytest.raises(ValueError, match="days"):
        retention_cutoffs()


def test_retention_keeps_the_approved_items_that_link_people_to_a_shared_memory(settings):
    """Two people's approved proposal of one project key: the memory has no single owner,
    so those items are what an export or an erasure of either finds it by."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    words = [{"role": "user", "content": "We decided to use Postgres for the ledger."}]
    for subject in (ALICE, "acme/dave"):
        MemoryManager(project=PROJECT, user=subject).crystallize_user_messages(words)
    first = ReviewItem.objects.filter(subject=ALICE).get()
    shared = MemoryManager(project=PROJECT).approve_review_item(first.pk)
    assert shared is not None and shared.subject is None
    ReviewItem.objects.update(updated_at=_ago(400))

    purge_expired(actor="cron")
    assert ReviewItem.objects.filter(status="approved").count() == 2
    contributed = export(subject=ALICE)["project_memories_contributed"]
    assert [m["id"] for m in contributed] == [shared.pk]

    # Once the memory is gone (soft-deleted, then past its own retention), so are they.
    MemoryManager(project=PROJECT).delete(shared.pk)
    Memory.objects.filter(pk=shared.pk).update(deleted_at=_ago(400))
    purge_expired(actor="cron")
    assert not Memory.objects.filter(pk=shared.pk).exists()
    purge_expired(actor="cron")
    assert not ReviewItem.objects.exists()
