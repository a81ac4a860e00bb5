"""Erasure (docs/behaviour.md §9): hard delete, vendor purge, byte scan, receipts, replay.

Transactional tests: VACUUM cannot run inside the transaction a plain
``django_db`` test wraps around itself.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection, connections, transaction

from memoryapp import MemoryManager
from memoryapp.compliance import (
    ErasureRequestError,
    erase,
    erase_review_items,
    preview,
    receipt_as_dict,
    receipts_for,
    replay,
    retry_purge,
    subject_hmac,
)
from memoryapp.db.purge.vendors import for_connection
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._erasure_support import (
    ALICE,
    BOB,
    PROJECT,
    filler_with,
    found_in,
    marker,
    seed,
    snapshot,
    sqlite_files_state,
    stored_bytes,
    subject_markers,
)

pytestmark = pytest.mark.django_db(transaction=True)


pytestmark = [pytestmark, pytest.mark.usefixtures("purge_settings")]


def _receipt_text(receipt: ErasureReceipt, ledger: str | None = None) -> str:
    text = json.dumps(receipt_as_dict(receipt), ensure_ascii=False)
    if ledger and os.path.exists(ledger):
        with open(ledger, encoding="ascii") as handle:
            text += handle.read()
    return text


def _alice_rows() -> int:
    return (
        Memory.objects.filter(scope="user", subject=ALICE).count()
        + Memory.objects.filter(namespace=ALICE).count()
        + SessionSummary.objects.filter(subject=ALICE).count()
        + ReviewItem.objects.filter(subject=ALICE).count()
    )


# ---------------------------------------------------------------- by subject
def test_erase_subject_removes_rows_and_bytes(two_subjects, settings, django_user_model):
    alice, bob = two_subjects
    gone = subject_markers(alice)
    profile = Memory.objects.get(namespace=ALICE, key_normalized__startswith="user_profile_")
    LogEntry.objects.create(  # the admin history keeps a copy of the title
        user=django_user_model.objects.create(username="ops", is_staff=True),
        content_type=ContentType.objects.get_for_model(Memory),
        object_id=profile.pk,
        object_repr=profile.title,
        action_flag=ADDITION,
        change_message="[]",
    )
    before = stored_bytes(checkpoint=True)
    assert found_in(before, gone), "control: the scan must see the markers before erasure"
    erased_ids = list(Memory.objects.filter(namespace=ALICE).values_list("id", flat=True))
    assert MemoryEvent.objects.filter(memory_id__in=erased_ids).exists()
    bob_before = snapshot(BOB)

    receipt = erase(subject=ALICE, actor="dpo@acme")
    assert receipt.purged, receipt.purge_status

    assert _alice_rows() == 0
    assert not Memory.objects.filter(pk__in=erased_ids).exists()
    assert not MemoryEvent.objects.filter(memory_id__in=erased_ids).exists()
    data = stored_bytes()
    assert found_in(data, gone) == []
    assert found_in(data, alice["authored"]) == alice["authored"]  # kept unless asked
    assert found_in(data, bob["long"]), "the scan still sees kept rows after the purge"
    assert snapshot(BOB) == bob_before

    assert receipt.purge_status == "purged"
    assert receipt.vacuumed and receipt.verified, receipt.verification
    assert receipt.counts["memories"] == 3  # profile, city (updated in place), soft-deleted hobby
    assert receipt.counts["session_summaries"] == 1
    assert receipt.counts["memory_review_queue"] == 2
    assert receipt.counts["memory_events"] >= 5
    assert receipt.authored["project_memories_kept"] == 1
    assert receipt.counts["django_admin_log"] == 1
    assert LogEntry.objects.get(object_id=profile.pk).object_repr == "[erased]"
    assert receipt.subject_hmac == subject_hmac(ALICE) != ALICE
    assert receipt.actor == "dpo@acme"
    assert "byte scan" in receipt.verification and "none found" in receipt.verification
    assert "backup" in receipt.caveats.lower()
    text = _receipt_text(receipt, settings.MEMORYAPP_ERASURE_LEDGER)
    assert ALICE not in text
    assert found_in(text.encode(), [*gone, *alice["authored"]]) == []
    assert list(receipts_for(subject=ALICE)) == [receipt]


@pytest.mark.sqlite_only
def test_sqlite_files_are_clean_after_erasure(two_subjects):
    erase(subject=ALICE)
    assert sqlite_files_state() == {"freelist_count": 0, "wal_bytes": 0}
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_include_authored_erases_project_memories_too(two_subjects):
    alice, _ = two_subjects
    receipt = erase(subject=ALICE, include_authored=True)
    assert not Memory.objects.filter(subject=ALICE).exists()
    assert receipt.include_authored and receipt.counts["memories"] == 4
    assert receipt.authored == {"project_memories": "erased (include_authored)"}


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_self_service_actor_is_not_recorded_in_clear(two_subjects):
    receipt = erase(subject=ALICE, actor=f"user:{ALICE}")
    assert ALICE not in receipt.actor and receipt.actor == "user:(the subject)"


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_unknown_subject_still_gets_a_receipt(two_subjects):
    bob_before = snapshot(BOB)
    receipt = erase(subject="acme/nobody")
    assert sum(receipt.counts.values()) == 0 and receipt.pk
    assert snapshot(BOB) == bob_before


# ---------------------------------------------------------------- other targets
def test_erase_one_memory_by_id(two_subjects):
    alice, _ = two_subjects
    soft = Memory.objects.get(subject=ALICE, key_normalized="user_hobby")
    assert soft.deleted_at is not None
    receipt = erase(ids=[soft.id])
    assert receipt.purged, receipt.purge_status
    assert not Memory.objects.filter(pk=soft.id).exists()
    assert not MemoryEvent.objects.filter(memory_id=soft.id).exists()
    assert receipt.counts["memories"] == 1 and receipt.erased_ids["memories"] == [soft.id]
    assert found_in(stored_bytes(), alice["softdeleted"]) == []
    assert found_in(stored_bytes(), alice["newversion"]) == alice["newversion"]


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_ids_with_a_namespace_restriction_do_not_cross_it(two_subjects):
    bob_row = Memory.objects.filter(namespace=BOB).first()
    receipt = erase(ids=[bob_row.id], namespace=ALICE)
    assert receipt.counts["memories"] == 0
    assert Memory.objects.filter(pk=bob_row.id).exists()


def test_erase_namespace(two_subjects):
    alice, bob = two_subjects
    receipt = erase(namespace=PROJECT)
    assert receipt.purged, receipt.purge_status
    assert not Memory.objects.filter(namespace=PROJECT).exists()
    assert not SessionSummary.objects.filter(namespace=PROJECT).exists()
    assert not ReviewItem.objects.filter(namespace=PROJECT).exists()
    assert Memory.objects.filter(namespace=ALICE).exists()  # the user namespaces stay
    data = stored_bytes()
    assert found_in(data, alice["summary"] + bob["summary"] + alice["authored"]) == []
    assert found_in(data, alice["long"]) == alice["long"]
    assert receipt.target_kind == "namespace" and receipt.verified


def test_erase_everything_keeps_receipts(two_subjects):
    alice, bob = two_subjects
    # A first erasure leaves fresh planner statistics (PostgreSQL) that hold
    # sampled values; emptying the tables must not leave those behind.
    first = erase(ids=[Memory.objects.filter(namespace=BOB).first().pk])
    receipt = erase(everything=True, actor="ops")
    assert receipt.purged, receipt.purge_status
    for model in (Memory, SessionSummary, ReviewItem, MemoryEvent):
        assert not model.objects.exists()
    assert found_in(stored_bytes(), subject_markers(alice, authored=True)) == []
    assert receipt.counts["memories"] == 7 and receipt.verified, receipt.verification
    assert set(ErasureReceipt.objects.values_list("pk", flat=True)) == {first.pk, receipt.pk}
    MemoryManager(project=PROJECT).upsert("after", "the tables still work")


def test_review_queue_purge_is_an_erasure(two_subjects):
    alice, bob = two_subjects
    rejected = ReviewItem.objects.filter(subject=BOB).first()
    rejected.status = "rejected"
    rejected.save()
    receipt = erase_review_items(namespace=PROJECT, status="rejected", actor="ops")
    assert receipt.counts["memory_review_queue"] == 1
    assert not ReviewItem.objects.filter(pk=rejected.pk).exists()
    assert ReviewItem.objects.filter(status="pending").count() == 3
    receipt = erase_review_items(subject=ALICE)
    assert receipt.purged, receipt.purge_status
    assert receipt.counts["memory_review_queue"] == 2
    assert found_in(stored_bytes(), alice["review"] + alice["evidence"]) == []
    assert receipt.target_kind == "review_items" and receipt.verified
    with pytest.raises(ValueError, match="Unknown review status"):
        erase_review_items(status="maybe")


@pytest.mark.django_db
def test_preview_changes_nothing(two_subjects):
    plan = preview(subject=ALICE)
    assert plan["counts"]["memories"] == 3 and plan["project_memories_kept"] == 1
    assert _alice_rows() > 0 and not ErasureReceipt.objects.exists()


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"subject": ALICE, "ids": ["x"]},
        {"everything": True, "subject": ALICE},
        {"subject": ""},
        {"ids": []},
    ],
)
def test_bad_requests_are_refused(kwargs):
    with pytest.raises(ErasureRequestError):
        erase(**kwargs)


@pytest.mark.django_db
def test_wipe_all_is_still_soft():
    mm = MemoryManager(project=PROJECT, user=ALICE)
    value = marker("wiped")
    mm.upsert("user_note", f"remember {value}", scope="user")
    result = mm.wipe_all()
    assert result.ok and result.memories_cleared == 1
    row = Memory.objects.get(namespace=ALICE)
    assert row.deleted_at is not None and value in row.content
    assert not ErasureReceipt.objects.exists()


# ---------------------------------------------------------------- purge outcomes
def _open_reader():
    """A second connection with an open read transaction that predates the erasure."""
    if connection.vendor == "sqlite":
        reader = sqlite3.connect(connection.settings_dict["NAME"])
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchone()
        return reader
    import psycopg

    s = connection.settings_dict
    reader = psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"] or None, port=s["PORT"] or None
    )
    reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    reader.execute("SELECT count(*) FROM memories").fetchone()
    return reader


def test_open_reader_means_not_purged_and_a_retry_succeeds(two_subjects, settings):
    alice, _ = two_subjects
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 0.3
    reader = _open_reader()
    try:
        receipt = erase(subject=ALICE)
        assert receipt.purge_status.startswith("not purged: "), receipt.purge_status
        assert not receipt.verified and receipt.purged_at is None
        assert _alice_rows() == 0  # the rows are deleted; their bytes are not purged yet
    finally:
        reader.rollback()
        reader.close()
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    (retried,) = retry_purge(receipt.pk)
    assert retried.purge_status == "purged" and retried.verified, retried.verification
    assert retried.attempts == 2
    assert found_in(stored_bytes(), subject_markers(alice)) == []
    assert retry_purge() == []  # nothing left to retry


@pytest.mark.postgres_only
def test_postgres_lock_held_means_not_purged(two_subjects, settings):
    import psycopg

    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 0.3
    s = connection.settings_dict
    reader = psycopg.connect(dbname=s["NAME"], user=s["USER"], host=s["HOST"] or None)
    reader.execute("BEGIN")
    reader.execute("LOCK TABLE session_summaries IN ACCESS SHARE MODE")
    try:
        receipt = erase(subject=ALICE)
    finally:
        reader.rollback()
        reader.close()
    assert "not purged" in receipt.purge_status and "lock" in receipt.purge_status
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    (retried,) = retry_purge(receipt)
    assert retried.verified


def test_deferred_purge_leaves_bytes_until_retried(two_subjects):
    alice, _ = two_subjects
    receipt = erase(subject=ALICE, purge=False)
    assert receipt.purge_status.startswith("not purged: deferred")
    assert _alice_rows() == 0
    leftover = found_in(stored_bytes(checkpoint=True), subject_markers(alice))
    assert leftover, "a plain DELETE leaves the bytes"
    (retried,) = retry_purge()
    assert retried.verified and "byte scan" in retried.verification
    assert found_in(stored_bytes(), subject_markers(alice)) == []


def test_inside_a_transaction_the_purge_runs_on_commit(two_subjects):
    alice, _ = two_subjects
    with transaction.atomic():
        receipt = erase(subject=ALICE)
        assert receipt.purge_status.startswith("pending")
    receipt.refresh_from_db()
    assert receipt.purge_status == "purged" and receipt.verified
    assert found_in(stored_bytes(), subject_markers(alice)) == []


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_rolled_back_erasure_leaves_no_receipt(two_subjects):
    with pytest.raises(RuntimeError), transaction.atomic():
        erase(subject=ALICE)
        raise RuntimeError("caller fails")
    assert _alice_rows() > 0 and not ErasureReceipt.objects.exists()


# ---------------------------------------------------------------- replay after restore
def _rows_of(subject: str) -> dict:
    return {
        Memory: list(Memory.objects.filter(namespace=subject).values()),
        SessionSummary: list(SessionSummary.objects.filter(subject=subject).values()),
        ReviewItem: list(ReviewItem.objects.filter(subject=subject).values()),
        MemoryEvent: list(
            MemoryEvent.objects.filter(
                memory_id__in=Memory.objects.filter(namespace=subject).values("id")
            ).values()
        ),
    }


def test_replay_after_restore_removes_the_data_again(two_subjects, settings):
    alice, _ = two_subjects
    saved = _rows_of(ALICE)
    original = erase(subject=ALICE, actor="dpo")
    bob_before = snapshot(BOB)
    # "Restore" a backup taken before the erasure: the rows come back and the
    # receipts table does not know the erasure; only the ledger file does.
    ErasureReceipt.objects.all().delete()
    for model, rows in saved.items():
        model.objects.bulk_create(model(**r) for r in rows)
    assert _alice_rows() > 0
    later = MemoryManager(project=PROJECT, user=ALICE).upsert(
        "user_new", "written after the erasure", scope="user"
    )

    report = replay(actor="ops")

    assert report.restored_receipts == 1
    assert ErasureReceipt.objects.filter(pk=original.pk).exists()
    assert Memory.objects.filter(namespace=ALICE).values_list("pk", flat=True).get() == later.pk
    assert SessionSummary.objects.filter(subject=ALICE).count() == 0
    assert ReviewItem.objects.filter(subject=ALICE).count() == 0
    (line,) = report.replayed
    assert line["id"] == original.pk and line["removed"]["memories"] == 3
    assert report.receipt.target_kind == "replay" and report.receipt.verified
    assert found_in(stored_bytes(), subject_markers(alice)) == []
    assert snapshot(BOB) == bob_before
    again = replay(actor="ops")  # idempotent
    assert again.counts.get("memories", 0) == 0


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_replay_dry_run_changes_nothing(two_subjects):
    saved = _rows_of(ALICE)
    erase(subject=ALICE)
    for model, rows in saved.items():
        model.objects.bulk_create(model(**r) for r in rows)
    report = replay(dry_run=True)
    assert report.counts["memories"] == 3 and report.receipt is None
    assert _alice_rows() > 0


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_replay_matches_only_with_the_key(two_subjects, settings):
    saved = _rows_of(ALICE)
    erase(subject=ALICE)
    for model, rows in saved.items():
        model.objects.bulk_create(model(**r) for r in rows)
    settings.MEMORYAPP_ERASURE_KEY = "a-different-key"
    settings.MEMORYAPP_ERASURE_KEY_FALLBACKS = []
    report = replay()
    # Without the key the subject cannot be matched; the recorded ids still are.
    assert any("unknown erasure key" in n for n in report.notes)
    assert report.counts["memories"] == 3


@pytest.mark.sqlite_only
def test_replay_after_restoring_a_file_backup(tmp_path, extra_alias):
    # A database file of its own: restoring by copying a file over the one
    # other connections of this process have open would break them.
    path = str(tmp_path / "restored.sqlite3")
    alias = extra_alias(path)
    call_command("migrate", "memoryapp", database=alias, verbosity=0)
    alice = seed(ALICE, using=alias)
    seed(BOB, using=alias)
    backup = str(tmp_path / "backup.sqlite3")
    for_connection(connections[alias]).backup(connections[alias], backup)
    first = erase(subject=ALICE, using=alias)
    assert first.verified, first.verification
    connections[alias].close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.copyfile(backup, path)  # the restore
    restored = Memory.objects.using(alias)
    assert restored.filter(namespace=ALICE).count() == 3
    assert not ErasureReceipt.objects.using(alias).exists()
    assert found_in(stored_bytes(using=alias), subject_markers(alice))

    report = replay(using=alias)

    assert report.restored_receipts == 1 and report.counts["memories"] == 3
    assert not restored.filter(namespace=ALICE).exists()
    assert restored.filter(namespace=BOB).count() == 3
    assert report.receipt.verified, report.receipt.verification
    assert found_in(stored_bytes(using=alias), subject_markers(alice)) == []


@pytest.mark.django_db  # SQL-level only: no purge needed
def test_long_values_are_probed_in_fragments(two_subjects):
    receipt = erase(subject=ALICE)
    assert receipt.details["aliases"]["default"]["probe_fragments"] >= 8


def test_summary_of_another_subject_with_the_same_text_is_explained():
    text = filler_with([marker("common")])
    MemoryManager(project=PROJECT, user=ALICE).save_session_summary(text)
    MemoryManager(project=PROJECT, user=BOB).save_session_summary(text)
    receipt = erase(subject=ALICE)
    assert receipt.verified, receipt.verification
    assert "kept" in receipt.verification


@pytest.mark.django_db(transaction=False)
def test_byte_scan_finds_exactly_what_a_naive_search_finds(tmp_path, monkeypatch):
    import secrets as _secrets

    from memoryapp.db import scan_child
    from memoryapp.db.purge.scan import scan

    monkeypatch.setattr(scan_child, "SCAN_CHUNK", 4096)  # many chunk boundaries
    pieces = [_secrets.token_bytes(n) for n in (12, 13, 48, 64, 100) for _ in range(40)]
    pieces.append(b"Preference: " + b"x" * 20)  # a common, non-random prefix
    data = bytearray(os.urandom(200_000))
    for i in range(0, len(pieces), 3):
        pos = (i * 7919) % (len(data) - 128)
        data[pos : pos + len(pieces[i])] = pieces[i]
    data[4096 - 5 : 4096 - 5 + 48] = pieces[80]  # straddles the first chunk boundary
    path = tmp_path / "blob"
    path.write_bytes(bytes(data))
    found, scanned, read = scan_child.scan_here([str(path), str(tmp_path / "missing")], pieces)
    assert scanned == len(data) and read == {str(path): len(data)}
    assert found == {i for i, p in enumerate(pieces) if p in data}
    assert 80 in found
    # The same answer through the child process that production uses.
    assert scan([str(path)], pieces) == (found, len(data))


def test_the_erased_subjects_key_goes_too_kept_rows_are_pseudonymised():
    """Issue 12.5: the key itself is personal data (slice counters, kept rows' subject)."""
    from memoryapp.compliance.selection import CONTENT_TABLES, SLICES, SNAPSHOTS
    from memoryapp.models import SliceChange

    subject = "acme/user-" + os.urandom(8).hex()  # long enough to probe (12+ bytes)
    markers = seed(subject)
    MemoryManager(project=PROJECT, user=subject).recall("profile")  # counters, snapshots
    assert SliceChange.objects.filter(namespace=subject).exists()
    key = subject.encode()
    tables = (*CONTENT_TABLES, SLICES, SNAPSHOTS)
    assert key in stored_bytes(tables, checkpoint=True), "control: the scan sees the key"

    receipt = erase(subject=subject, actor="dpo@acme")
    assert receipt.verified, receipt.verification
    assert receipt.authored["project_memories_kept"] == 1
    assert not SliceChange.objects.filter(namespace=subject).exists()
    assert not Memory.objects.filter(subject=subject).exists()
    (kept,) = Memory.objects.filter(subject__startswith="erased:")
    assert markers["authored"][0] in kept.content  # the row stays, its author's name goes
    data = stored_bytes(tables)
    assert key not in data
    assert found_in(data, markers["authored"]) == markers["authored"]
    assert SliceChange.objects.filter(namespace=PROJECT).exists()  # a slice with rows keeps it

    # A later request with include_authored still reaches the pseudonymised row.
    again = erase(subject=subject, include_authored=True, actor="dpo@acme")
    assert again.counts["memories"] == 1 and again.verified, again.verification
    assert not Memory.objects.filter(pk=kept.pk).exists()
