"""Migration 0013 on a database with merged review items (issue 29, item 1).

At 0012 the queue folded alice's and dave's identical message into one pending item
(one row per namespace, scope and key). After 0013 such an item is flagged
``subjects_uncertain`` (its evidence keeps only the latest message: it cannot be split
honestly), and two subjects' proposals of the same key are two rows.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from memoryapp.models import ReviewItem

BEFORE = ("memoryapp", "0012_subject_requests")
AFTER = ("memoryapp", "0013_review_fold_per_subject")
NS = "acme/support"


def _migrate(target) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    executor.loader.build_graph()
    return executor


def _item(model, subject, *, occurrences=1, status="pending", key="preference_phone_calls"):
    return model.objects.create(
        namespace=NS,
        subject=subject,
        scope="user",
        type="preference",
        key_normalized=key,
        title="Preference: phone calls in the morning",
        content="I prefer phone calls in the morning",
        occurrences=occurrences,
        status=status,
    )


@pytest.fixture
def at_0012(transactional_db):
    """The schema at 0012 (the model of then), put back to the latest afterwards."""
    executor = _migrate(BEFORE)
    yield executor.loader.project_state([BEFORE]).apps.get_model("memoryapp", "ReviewItem")
    _migrate_to_latest()


def _migrate_to_latest() -> None:
    """Every migration applied again: the tests after this one need the later tables."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("memoryapp"))


def test_merged_items_are_flagged_and_subjects_no_longer_fold(at_0012):
    old = at_0012
    merged = _item(old, "acme/dave", occurrences=2)  # alice's and dave's message, folded
    single = _item(old, "acme/erin", key="preference_email")
    decided = _item(old, "acme/dave", occurrences=3, status="approved")
    # The old rule: a second subject's pending item of the key is refused.
    with pytest.raises(IntegrityError), transaction.atomic():
        _item(old, "acme/alice")

    _migrate(AFTER)

    flags = dict(ReviewItem.objects.values_list("pk", "subjects_uncertain"))
    assert flags == {merged.pk: True, single.pk: False, decided.pk: False}
    alice = _item(ReviewItem, "acme/alice")
    assert alice.pk != merged.pk
    pending = ReviewItem.objects.pending().filter(key_normalized="preference_phone_calls")
    assert sorted(pending.values_list("subject", flat=True)) == ["acme/alice", "acme/dave"]
    # Still one pending item per subject and key; subject-less items fold together.
    with pytest.raises(IntegrityError), transaction.atomic():
        _item(ReviewItem, "acme/alice")
    _item(ReviewItem, None)
    with pytest.raises(IntegrityError), transaction.atomic():
        _item(ReviewItem, None)


@pytest.mark.postgres_only
def test_each_partition_s_index_is_named_after_the_constraint(at_0012):
    _migrate(AFTER)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_class WHERE relkind = 'i' AND relname ~ %s",
            [r"^uix_review_scope_key_p\d{2}$"],
        )
        assert cursor.fetchone()[0] == 64
        cursor.execute("SELECT pg_get_indexdef('uix_review_scope_key'::regclass)")
        assert "COALESCE(subject" in cursor.fetchone()[0]


def test_unapplying_refuses_to_merge_subjects_and_changes_nothing(at_0012):
    _migrate(AFTER)
    _item(ReviewItem, "acme/alice")
    _item(ReviewItem, "acme/dave")
    with pytest.raises(RuntimeError, match=r"Cannot unapply 0013: 1 pending review key"):
        _migrate(BEFORE)
    # Still at 0013: both people's items, the new field and index in place.
    assert ReviewItem.objects.pending().count() == 2
    assert ReviewItem.objects.filter(subjects_uncertain=False).count() == 2
    # Once decided, it goes back (and the fixture migrates forward again).
    ReviewItem.objects.filter(subject="acme/dave").update(status="rejected")
    _migrate(BEFORE)
