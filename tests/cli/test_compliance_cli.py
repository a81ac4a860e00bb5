"""``manage.py memory erase|export|purge-expired|backup``."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memoryapp.models import ErasureReceipt, Memory, ReviewItem
from tests._erasure_support import (
    ALICE,
    BOB,
    PROJECT,
    found_in,
    seed,
    stored_bytes,
    subject_markers,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    # Other test runs on the same server can hold a transaction for a moment.
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


def run(*args, answer: str | None = None, monkeypatch=None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    if answer is not None:
        monkeypatch.setattr("builtins.input", lambda prompt="": answer)
    call_command("memory", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def two_subjects():
    return seed(ALICE), seed(BOB)


def test_erase_subject_asks_then_erases(two_subjects, monkeypatch, tmp_path):
    alice, _ = two_subjects
    out, _ = run("erase", "--subject", ALICE, "--dry-run")
    assert "Would erase memories 3, session_summaries 1, memory_review_queue 2" in out
    assert "1 project-scope memory it authored kept" in out
    assert not ErasureReceipt.objects.exists()
    with pytest.raises(CommandError, match="Aborted"):
        run("erase", "--subject", ALICE, answer="n", monkeypatch=monkeypatch)
    assert Memory.objects.filter(namespace=ALICE).exists()
    out, _ = run("erase", "--subject", ALICE, "--actor", "dpo", answer="y", monkeypatch=monkeypatch)
    assert "Erasure receipt" in out and "purge: purged" in out
    assert "outcome: verified by byte scan" in out and "verified: yes" not in out
    assert "kept: 1 project-scope memory" in out
    assert not Memory.objects.filter(namespace=ALICE).exists()
    assert found_in(stored_bytes(), subject_markers(alice)) == []
    receipt = ErasureReceipt.objects.get()
    assert receipt.actor == "dpo"
    out, _ = run("erase", "--list")
    assert "1 receipt." in out and receipt.pk in out
    shown = json.loads(run("erase", "--show", receipt.pk)[0])
    assert shown["id"] == receipt.pk and shown["counts"]["memories"] == 3
    ledger = tmp_path / "copy.jsonl"
    out, _ = run("erase", "--write-ledger", str(ledger))
    assert "Wrote 1 receipt" in out and len(ledger.read_text().splitlines()) == 1
    out, _ = run("erase", "--retry")
    assert "0 receipts retried." in out


def test_write_ledger_to_an_unwritable_path_fails_before_any_work(two_subjects, tmp_path):
    """A ledger copy that cannot be written is a CommandError, never "Wrote n receipts"."""
    run("erase", "--subject", ALICE, "--yes")
    missing_dir = tmp_path / "nonexistent" / "dir" / "x.jsonl"
    with pytest.raises(CommandError, match="cannot write the ledger .*directory does not exist"):
        run("erase", "--write-ledger", str(missing_dir))
    assert not missing_dir.parent.exists()
    a_file = tmp_path / "plain-file"
    a_file.write_text("")
    with pytest.raises(CommandError, match="cannot write the ledger"):
        run("erase", "--write-ledger", str(a_file / "x.jsonl"))
    with pytest.raises(CommandError, match="cannot write the ledger"):
        run("erase", "--write-ledger", str(tmp_path))  # a directory, not a file
    assert a_file.read_text() == ""


@pytest.mark.django_db
def test_erase_refuses_unclear_requests(two_subjects):
    with pytest.raises(CommandError, match="--subject"):
        run("erase", "--user", ALICE, "--yes")
    with pytest.raises(CommandError, match="Give a subject, a namespace, ids, or everything"):
        run("erase", "--yes")
    with pytest.raises(CommandError, match="no erasure receipt"):
        run("erase", "--show", "nope")
    with pytest.raises(CommandError, match="no erasure receipt"):
        run("erase", "--retry", "nope")


def test_erase_ids_review_items_everything(two_subjects):
    row = Memory.objects.filter(namespace=BOB).first()
    out, _ = run("erase", "--id", row.pk, "--yes")
    assert "removed: memories 1" in out and "purge: purged" in out
    ReviewItem.objects.filter(subject=BOB).update(status="rejected")
    out, _ = run("erase", "--review-items", "--status", "rejected", "--namespace", PROJECT, "--yes")
    assert "removed: memory_review_queue 2" in out
    assert ReviewItem.objects.filter(subject=ALICE).count() == 2
    out, _ = run("erase", "--everything", "--no-purge", "--yes")
    assert "not purged: deferred" in out
    assert not Memory.objects.exists() and not ReviewItem.objects.exists()
    out, _ = run("erase", "--retry")
    assert "1 receipt retried." in out and "purge: purged" in out


def test_replay_after_restore(two_subjects):
    saved = list(Memory.objects.filter(namespace=ALICE).values())
    run("erase", "--subject", ALICE, "--yes")
    ErasureReceipt.objects.all().delete()  # the restored receipts table predates it
    Memory.objects.bulk_create(Memory(**r) for r in saved)
    out, _ = run("erase", "--replay", "--dry-run")
    assert "1 known only to the ledger" in out and "memories 3" in out
    assert Memory.objects.filter(namespace=ALICE).count() == 3
    out, _ = run("erase", "--replay", "--yes")
    assert "removed memories 3" in out and "Restored 1 receipt" in out
    assert not Memory.objects.filter(namespace=ALICE).exists()
    assert ErasureReceipt.objects.filter(target_kind="replay").count() == 1


@pytest.mark.django_db
def test_export_to_a_file_with_progress(two_subjects, tmp_path):
    alice, bob = two_subjects
    path = tmp_path / "alice.json"
    out, err = run("export", "--subject", ALICE, "--output", str(path))
    assert f"Wrote {path}" in out and "memories 3" in out
    assert "exporting [" in err
    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    assert document["query"] == {"subject": ALICE}
    assert alice["long"][0] in text and bob["long"][0] not in text


@pytest.mark.django_db
def test_export_to_stdout_and_refusal(two_subjects):
    document = json.loads(run("export", "--namespace", PROJECT)[0])
    assert document["counts"]["session_summaries"] == 2
    with pytest.raises(CommandError, match="--subject or --namespace"):
        run("export")


def test_purge_expired(two_subjects, settings):
    out, _ = run("purge-expired", "--dry-run")
    assert "memories: expired before" in out and "expired: nothing" in out
    out, _ = run("purge-expired", "--yes")
    assert "Nothing has expired." in out
    settings.MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS = 0
    out, _ = run("purge-expired", "--yes")
    assert "removed: memories 2" in out and "purge: purged" in out  # the two soft-deleted
    settings.MEMORYAPP_RETENTION_DELETED_MEMORIES_DAYS = None
    settings.MEMORYAPP_RETENTION_REVIEW_ITEMS_DAYS = None
    out, _ = run("purge-expired", "--yes")
    assert "No retention period is configured" in out


@pytest.mark.sqlite_only
def test_backup_sqlite(two_subjects, tmp_path):
    path = tmp_path / "copy.sqlite3"
    out, _ = run("backup", str(path))
    assert "Wrote a consistent copy" in out and "erase --replay" in out
    with sqlite3.connect(path) as copy:
        assert copy.execute("SELECT count(*) FROM memories").fetchone()[0] == 8
    with pytest.raises(CommandError, match="already exists"):
        run("backup", str(path))


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_backup_postgres_explains_pg_dump(two_subjects, tmp_path):
    path = tmp_path / "dump.pgc"
    out, _ = run("backup", str(path))
    assert (
        "pg_dump --format=custom" in out and f"--dbname={connection.settings_dict['NAME']}" in out
    )
    assert "erase --replay" in out and not path.exists()


def test_a_receipt_is_named_by_a_unique_prefix_of_8_or_more_characters(two_subjects):
    run("erase", "--subject", ALICE, "--no-purge", "--yes")
    receipt = ErasureReceipt.objects.get()
    short = receipt.pk[:12]  # what the admin shows
    assert json.loads(run("erase", "--show", short)[0])["id"] == receipt.pk
    assert json.loads(run("erase", "--show", receipt.pk[:8])[0])["id"] == receipt.pk
    out, _ = run("erase", "--retry", short)
    assert "1 receipt retried." in out and "purge: purged" in out
    with pytest.raises(CommandError, match="at least its first 8 characters"):
        run("erase", "--show", receipt.pk[:7])
    with pytest.raises(CommandError, match="no erasure receipt"):
        run("erase", "--show", receipt.pk[:11] + ("0" if receipt.pk[11] != "0" else "1"))
    with pytest.raises(CommandError, match="no erasure receipt"):  # exact, on both vendors
        run("erase", "--show", short.upper() if short.upper() != short else short + "X")
    # Two receipts sharing the prefix: the operator is told to give more.
    twin = ErasureReceipt.objects.get()
    tail = "0" * 20 if receipt.pk[12:] != "0" * 20 else "1" * 20
    twin.pk = short + tail
    twin.save(force_insert=True)
    with pytest.raises(CommandError, match="more than one erasure receipt"):
        run("erase", "--show", short)
    assert json.loads(run("erase", "--show", receipt.pk)[0])["id"] == receipt.pk  # whole id
