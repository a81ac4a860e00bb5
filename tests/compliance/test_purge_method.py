"""The purge methods of issue 14.2: SQLite incremental_vacuum, PostgreSQL pg_repack, "rewrite".

``MEMORYAPP_ERASURE_PURGE_METHOD`` chooses; bench/ERASURE.md has the measurements.
The pg_repack tests need the Debian package postgresql-15-repack (the program and
the extension): .ci/run installs it, and on CI (``CI=true``) its absence fails them
instead of skipping them. Each test that needs the extension creates it in the test
database and drops it again, so the other tests keep their default (no extension:
``auto`` falls back to VACUUM FULL).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import struct

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from memoryapp import conf
from memoryapp.compliance import erase, retry_purge
from memoryapp.db import scan_child
from memoryapp.db.finder import FileFinder
from memoryapp.db.purge import repack as pg_repack
from memoryapp.db.purge.postgresql import PostgresPurge
from memoryapp.db.purge.scan import scan
from memoryapp.db.purge.sqlite import SQLitePurge
from tests._erasure_support import (
    ALICE,
    BOB,
    PROJECT,
    filler_with,
    found_in,
    marker,
    sqlite_files_state,
    stored_bytes,
    subject_markers,
)

pytestmark = pytest.mark.django_db(transaction=True)


pytestmark = [pytestmark, pytest.mark.usefixtures("purge_settings")]


def _purge(receipt) -> dict:
    return receipt.details["aliases"]["default"]["purge"]


# ---------------------------------------------------------------- both vendors
def test_the_setting_is_checked(settings):
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "VACUUM"
    with pytest.raises(ImproperlyConfigured, match="auto, online, rewrite"):
        conf.erasure_purge_method()
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "Rewrite"
    assert conf.erasure_purge_method() == "rewrite"
    del settings.MEMORYAPP_ERASURE_PURGE_METHOD
    assert conf.erasure_purge_method() == "auto"


@pytest.mark.parametrize(
    ("method", "sqlite", "postgresql"),
    [
        ("auto", "incremental_vacuum", "pg_repack (VACUUM FULL without it)"),
        ("online", "incremental_vacuum", "postgresql: pg_repack +"),
        ("rewrite", "secure_delete + VACUUM +", "postgresql: VACUUM FULL +"),
    ],
)
def test_the_receipt_names_the_method(settings, method, sqlite, postgresql):
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = method
    expected = sqlite if connection.vendor == "sqlite" else postgresql
    receipt = erase(ids=["nonexistent0000"])
    assert expected in receipt.purge_method


# ---------------------------------------------------------------- the byte scan's finder
@pytest.mark.parametrize("seed_", [1, 2, 3])
def test_file_finder_finds_exactly_what_a_naive_search_finds(tmp_path, monkeypatch, seed_):
    """Two word alignments and four anchors a piece: every start offset mod 8 is covered."""
    import random

    rng = random.Random(seed_)
    monkeypatch.setattr(scan_child, "SCAN_CHUNK", 4096)  # many chunk boundaries
    words = [b"the ", b"content ", b"of ", b"a memory ", b"note ", b"tenant "]
    text = b"".join(rng.choice(words) for _ in range(40_000))  # repetitive, like real rows
    pieces = [
        text[i : i + n]
        for n in (11, 12, 13, 15, 48)
        for i in rng.sample(range(0, len(text) - 64), 30)
    ]
    pieces += [
        bytes(rng.getrandbits(8) for _ in range(n)) for n in (11, 14, 16, 48, 64) for _ in range(20)
    ]
    data = bytearray(text)
    for i, piece in enumerate(pieces[150:]):  # planted at every offset mod 8
        pos = 8 * rng.randrange(len(data) // 8 - 16) + i % 8
        data[pos : pos + len(piece)] = piece
    data[4096 - 6 : 4096 - 6 + 48] = pieces[-1]  # across the first chunk boundary
    (tmp_path / "blob").write_bytes(bytes(data))
    finder = FileFinder(pieces)
    assert finder.ALIGNMENTS == (0, 4)
    found, scanned, _ = scan_child.scan_here([str(tmp_path / "blob")], pieces)
    assert scanned == len(data)
    expected = {i for i, piece in enumerate(pieces) if piece in data}
    assert found == expected
    # The same answer through the child process the erasure uses (default chunks).
    assert scan([str(tmp_path / "blob")], pieces) == (expected, len(data))
    assert len(pieces) - 1 in found and len(expected) > 150


def test_short_pieces_still_use_the_eight_alignment_finder(tmp_path):
    data = b"x" * 1000 + b"shortone" + b"y" * 1000
    (tmp_path / "blob").write_bytes(data)
    found, _ = scan([str(tmp_path / "blob")], [b"shortone", b"absent piece here"])
    assert found == {0}
    with pytest.raises(ValueError, match="at least 11 bytes"):
        FileFinder([b"shortone"])


# ---------------------------------------------------------------- SQLite
def _freelist(path: str) -> tuple[list[bytes], list[int]]:
    """The file's freelist: its leaf pages, and the 4-byte words after each trunk's list.

    A trunk page keeps, past its count, numbers of pages taken off it since: page
    numbers, never row content, so the caller checks they are all small integers.
    """
    with open(path, "rb") as f:
        header = f.read(100)
        size = struct.unpack(">H", header[16:18])[0] or 65536
        trunk, leaves, words = struct.unpack(">I", header[32:36])[0], [], []
        while trunk:
            f.seek((trunk - 1) * size)
            page = f.read(size)
            nxt, count = struct.unpack(">II", page[:8])
            for leaf in struct.unpack(f">{count}I", page[8 : 8 + 4 * count]):
                f.seek((leaf - 1) * size)
                leaves.append(f.read(size))
            rest = page[8 + 4 * count :]
            words.extend(struct.unpack(f">{len(rest) // 4}I", rest[: len(rest) // 4 * 4]))
            trunk = nxt
    return leaves, words


def _set_auto_vacuum(mode: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA auto_vacuum = {mode}")
        cursor.execute("VACUUM")  # applies the mode to a file that has tables
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _checkpoint() -> None:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert tuple(cursor.fetchone()) == (0, 0, 0)


def _auto_vacuum() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        return int(cursor.fetchone()[0])


def _bulky(subject: str, n: int = 40) -> list[str]:
    """``n`` memories of ~3 KB each for ``subject`` (overflow pages); returns their markers."""
    from memoryapp import MemoryManager

    mm = MemoryManager(project=PROJECT, user=subject)
    found = []
    for i in range(n):
        m = marker("bulk")
        found.append(m)
        mm.upsert(f"bulk_note_{i}", filler_with([m]), scope="user")
    return found


@pytest.mark.sqlite_only
def test_sqlite_secure_delete_leaves_no_erased_byte_even_before_a_vacuum(two_subjects):
    """Why incremental_vacuum is enough: the DELETE itself zeroed the cells and freed pages."""
    alice, _ = two_subjects
    gone = subject_markers(alice) + _bulky(ALICE)
    _checkpoint()
    live = [m for m in gone if m not in alice["oldversion"]]
    assert found_in(stored_bytes(), gone) == live, "control: the markers are in the file"
    # (the value "user_city" had before its update was zeroed by that UPDATE already)
    receipt = erase(subject=ALICE, purge=False)  # the app's DELETEs, no purge at all
    assert receipt.purge_status.startswith("not purged: deferred")
    _checkpoint()  # the main file now holds what the DELETEs wrote; the -wal is empty
    assert sqlite_files_state()["freelist_count"] > 0, "control: the DELETE freed pages"
    assert found_in(stored_bytes(), gone) == []
    path = connection.settings_dict["NAME"]
    leaves, words = _freelist(path)
    assert leaves and not any(any(page) for page in leaves), "free pages must hold zeros only"
    pages = os.path.getsize(path) // 4096 + 1
    assert all(word <= pages for word in words), "a trunk page holds page numbers only"


def test_without_secure_delete_the_same_delete_leaves_the_bytes(tmp_path):
    """The control of the test above: the zeros come from secure_delete, not from SQLite's luck."""
    for secure, expect_left in (("OFF", True), ("ON", False)):
        db = sqlite3.connect(tmp_path / f"plain-{secure}.sqlite3", isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA secure_delete = {secure}")
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
        gone = [marker("plain") for _ in range(30)]
        db.executemany("INSERT INTO t VALUES (?, ?)", [(m, filler_with([m])) for m in gone])
        db.execute("INSERT INTO t VALUES ('kept', 'kept value')")
        db.execute("DELETE FROM t WHERE k <> 'kept'")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = (tmp_path / f"plain-{secure}.sqlite3").read_bytes()
        db.close()
        assert bool(found_in(data, gone)) is expect_left, secure


@pytest.mark.sqlite_only
def test_sqlite_first_purge_converts_the_file_then_frees_pages_only(two_subjects):
    alice, bob = two_subjects
    _set_auto_vacuum("NONE")  # as a file created before this change
    first = erase(subject=ALICE)
    assert first.verified, first.verification
    assert _purge(first)["reclaim"] == "VACUUM (conversion to auto_vacuum=INCREMENTAL)"
    assert any("converted to auto_vacuum=INCREMENTAL" in n for n in _purge(first)["notes"])
    assert _auto_vacuum() == 2

    gone = subject_markers(bob) + _bulky(BOB)
    second = erase(subject=BOB)
    purge = _purge(second)
    assert second.purge_status == "purged" and second.verified, second.verification
    assert purge["reclaim"] == "incremental_vacuum"
    # Fewer than the 40 overflow pages: the receipt's sealed fragments, written in
    # the deleting transaction, reuse a few of the pages it freed.
    assert purge["freed_pages"] > 30, "control: the erasure freed the overflow pages"
    # All of them returned, not one (Python's execute() would step the pragma once).
    assert sqlite_files_state() == {"freelist_count": 0, "wal_bytes": 0}
    assert found_in(stored_bytes(), gone + subject_markers(alice)) == []
    assert "incremental_vacuum returned the free pages" in second.caveats
    assert "secure_delete=ON" in second.caveats


@pytest.mark.sqlite_only
def test_sqlite_no_conversion_while_another_connection_has_the_file(two_subjects):
    """Converted in WAL mode beside another open connection, the file broke for the others."""
    alice, _ = two_subjects
    _set_auto_vacuum("NONE")
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        other.execute("SELECT count(*) FROM memories").fetchone()  # attached, not in a transaction
        receipt = erase(subject=ALICE)
        assert receipt.verified, receipt.verification
        assert _purge(receipt)["reclaim"] == "VACUUM"
        assert any(
            "not converted to auto_vacuum=INCREMENTAL" in n for n in _purge(receipt)["notes"]
        )
        assert _auto_vacuum() == 0
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
        assert other.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        other.close()
    assert found_in(stored_bytes(), subject_markers(alice)) == []
    _set_auto_vacuum("INCREMENTAL")


@pytest.mark.sqlite_only
def test_sqlite_a_writer_holding_the_lock_means_not_purged_then_a_retry_succeeds(
    two_subjects, monkeypatch, settings
):
    alice, _ = two_subjects
    _set_auto_vacuum("INCREMENTAL")
    gone = subject_markers(alice) + _bulky(ALICE)
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 0.3
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    original = SQLitePurge.purge

    def purge_while_locked(self, *args, **kwargs):
        writer.execute("BEGIN IMMEDIATE")  # after the DELETEs committed, for the purge only
        try:
            return original(self, *args, **kwargs)
        finally:
            writer.rollback()

    monkeypatch.setattr(SQLitePurge, "purge", purge_while_locked)
    try:
        receipt = erase(subject=ALICE)
    finally:
        writer.close()
    assert receipt.purge_status == "not purged: incremental_vacuum failed: database is locked"
    assert not receipt.verified
    monkeypatch.setattr(SQLitePurge, "purge", original)
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    (retried,) = retry_purge(receipt)
    assert retried.verified, retried.verification
    assert sqlite_files_state() == {"freelist_count": 0, "wal_bytes": 0}
    assert found_in(stored_bytes(), gone) == []


@pytest.mark.sqlite_only
def test_sqlite_rewrite_method_vacuums_the_whole_file(two_subjects, settings):
    alice, _ = two_subjects
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "rewrite"
    receipt = erase(subject=ALICE)
    assert receipt.verified, receipt.verification
    assert _purge(receipt)["reclaim"] == "VACUUM"
    assert receipt.purge_method == "sqlite: secure_delete + VACUUM + wal_checkpoint(TRUNCATE)"
    assert "VACUUM rewrote the file" in receipt.caveats
    assert found_in(stored_bytes(), subject_markers(alice)) == []


@pytest.mark.sqlite_only
def test_sqlite_auto_vacuum_full_needs_no_vacuum_at_all(two_subjects):
    alice, _ = two_subjects
    _set_auto_vacuum("FULL")  # every commit returns the free pages already
    try:
        receipt = erase(subject=ALICE)
        assert receipt.verified, receipt.verification
        assert _purge(receipt)["reclaim"] == "auto_vacuum=FULL (at commit)"
        assert found_in(stored_bytes(), subject_markers(alice)) == []
    finally:
        _set_auto_vacuum("INCREMENTAL")


def _free_pages_after_the_purge(monkeypatch, victim: str) -> None:
    """After the purge, another connection deletes ``victim``'s bulky rows (pages go free)."""
    original = SQLitePurge.purge

    def purge_then_free(self, connection_, *args, **kwargs):
        outcome = original(self, connection_, *args, **kwargs)
        other = sqlite3.connect(connection_.settings_dict["NAME"], isolation_level=None)
        other.execute("PRAGMA secure_delete = ON")
        other.execute(
            "DELETE FROM memories WHERE key_normalized LIKE 'bulk_note_%' AND subject = ?", [victim]
        )
        other.close()
        return outcome

    monkeypatch.setattr(SQLitePurge, "purge", purge_then_free)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("scanned", [True, False], ids=["byte-scan", "no-byte-scan"])
def test_sqlite_pages_freed_by_others_after_the_purge_are_left_to_the_scan(
    two_subjects, monkeypatch, scanned
):
    """Another tenant deleting while we verify must not fail the receipt, nor pass it blind."""
    from memoryapp.compliance import probes

    _set_auto_vacuum("INCREMENTAL")
    _bulky(BOB)
    _free_pages_after_the_purge(monkeypatch, BOB)
    if not scanned:  # no probes and no readable sealed fragments: nothing reads the pages
        from memoryapp.compliance import sealed

        monkeypatch.setattr(probes, "recall", lambda rid, alias: None)
        monkeypatch.setattr(sealed, "unseal", lambda token: None)
    receipt = erase(subject=ALICE)
    facts = receipt.details["aliases"]["default"]["verification"]
    assert receipt.purge_status == "purged", receipt.purge_status
    steps = receipt.details["aliases"]["default"]["purge_steps"]
    if scanned:
        assert facts["freelist_count"] > 0, "control: pages were free at verification"
        assert receipt.verified, receipt.verification
        assert "(written since the purge; read by the byte scan)" in receipt.verification
        assert len(steps) == 1
    else:
        # Not passed blind: the first purge is not verified, and the stronger one that
        # follows returns the free pages, so that the structure check can pass.
        assert steps[0]["outcome"] == "residue", steps
        assert "no byte scan read it" in steps[0]["result"]
        assert [s["outcome"] for s in steps[1:]] == ["verified"], steps
        assert receipt.verified and facts["freelist_count"] == 0, receipt.verification
        assert "no byte scan read it" in receipt.verification


# ---------------------------------------------------------------- PostgreSQL
def _repack_installable() -> str:
    """Why pg_repack cannot be used by these tests ("" when it can)."""
    if not shutil.which("pg_repack"):
        return "the pg_repack program is not installed (Debian: postgresql-15-repack)"
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_repack'")
        if cursor.fetchone() is None:
            return "the server has no pg_repack extension (Debian: postgresql-15-repack)"
    return ""


@pytest.fixture
def repack():
    """The pg_repack extension in the test database for one test (dropped afterwards)."""
    missing = _repack_installable()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"pg_repack is required on CI: {missing}")
        pytest.skip(f"pg_repack unavailable here: {missing}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_repack'")
        existed = cursor.fetchone() is not None
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
    yield
    if not existed:
        with connection.cursor() as cursor:
            cursor.execute("DROP EXTENSION IF EXISTS pg_repack CASCADE")


@pytest.fixture
def no_repack_extension():
    """The test database without the pg_repack extension (restored afterwards if it was there)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_repack'")
        existed = cursor.fetchone() is not None
        cursor.execute("DROP EXTENSION IF EXISTS pg_repack CASCADE")
    yield
    if existed:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")


@pytest.fixture
def repack_program(tmp_path, monkeypatch):
    """A ``pg_repack`` program first on the PATH, whatever the machine has installed.

    It only answers ``--version``: enough for the purge to look further (at the
    extension) when the test database lacks the extension, so that path is tested
    on a machine without pg_repack as on one with it.
    """
    program = tmp_path / "bin" / "pg_repack"
    program.parent.mkdir()
    program.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && echo "pg_repack 1.5.0" && exit 0\nexit 1\n'
    )
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    pg_repack.repack_version_of.cache_clear()
    yield program
    pg_repack.repack_version_of.cache_clear()


def _relfilenodes() -> dict[str, int]:
    """The files of the content tables' leaves (every partition), by relation name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relid::regclass::text, c.relfilenode FROM unnest(%s::text[]) AS t, "
            "pg_partition_tree(t::regclass) JOIN pg_class c ON c.oid = relid WHERE isleaf",
            [["memories", "session_summaries", "memory_review_queue", "memory_events"]],
        )
        return dict(cursor.fetchall())


def _repack_leftovers() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgrelid::regclass::text FROM pg_trigger WHERE tgname = 'repack_trigger' "
            "UNION ALL SELECT c.relname::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'repack' AND c.relkind = 'r'"
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.postgres_only
def test_postgres_repack_purge_is_clean_and_verified(two_subjects, repack):
    alice, bob = two_subjects
    gone = subject_markers(alice)
    assert found_in(stored_bytes(checkpoint=True), gone), "control: the markers are there"
    before = _relfilenodes()
    receipt = erase(subject=ALICE)
    purge = _purge(receipt)
    assert receipt.purge_status == "purged", receipt.purge_status
    assert receipt.verified, receipt.verification
    assert purge["rewrite"].startswith("pg_repack "), purge
    assert any("rewritten by pg_repack" in note for note in purge["notes"]), purge["notes"]
    assert "pg_statistic rewritten" in purge["notes"]
    after = _relfilenodes()
    rewritten = {t for t in before if after[t] != before[t]}
    assert rewritten == set(before) & set(purge["tables"]), "the purged partitions, no other"
    assert rewritten and len(rewritten) < len(before) / 4, "a few partitions of 64 a table"
    assert {"memories", "memory_events", "memory_recall_snapshots"} <= set(purge["partitions"])
    assert purge["partitions"]["memories"].endswith(" of 64 partitions")
    data = stored_bytes()  # every partition of every table
    assert found_in(data, gone) == []
    assert found_in(data, bob["long"]) == bob["long"], "kept rows are still there"
    assert "pg_repack is not available" not in receipt.caveats
    assert _repack_leftovers() == []


@pytest.mark.postgres_only
def test_postgres_auto_without_the_extension_falls_back_and_says_so(
    two_subjects, no_repack_extension, repack_program
):
    alice, _ = two_subjects
    receipt = erase(subject=ALICE)
    purge = _purge(receipt)
    assert receipt.verified, receipt.verification
    assert purge["rewrite"] == "VACUUM FULL"
    assert "CREATE EXTENSION pg_repack has not been run" in purge["pg_repack"]
    assert "pg_repack is not available" in receipt.caveats
    assert "VACUUM FULL, which locked every other session out" in receipt.caveats
    assert found_in(stored_bytes(), subject_markers(alice)) == []


@pytest.mark.postgres_only
def test_postgres_online_without_pg_repack_is_not_purged(
    two_subjects, no_repack_extension, settings
):
    alice, _ = two_subjects
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "online"
    before = _relfilenodes()
    receipt = erase(subject=ALICE)
    assert receipt.purge_status.startswith("not purged: pg_repack is not available ("), (
        receipt.purge_status
    )
    assert not receipt.verified and receipt.purged_at is None
    assert _relfilenodes() == before, "nothing was rewritten"
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "auto"
    (retried,) = retry_purge(receipt)
    assert retried.verified, retried.verification
    assert found_in(stored_bytes(), subject_markers(alice)) == []


@pytest.mark.postgres_only
@pytest.mark.parametrize("cause", ["no program", "other version", "not superuser"])
def test_postgres_each_missing_piece_is_named(two_subjects, repack, monkeypatch, settings, cause):
    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "online"
    if cause == "no program":
        monkeypatch.setattr(pg_repack.shutil, "which", lambda name: None)
        expected = "the pg_repack program is not on the PATH"
    elif cause == "other version":
        monkeypatch.setattr(pg_repack, "repack_client_version", lambda: "0.0.1")
        expected = "the pg_repack program is version 0.0.1, the extension 1."
    else:
        monkeypatch.setattr(PostgresPurge, "_is_superuser", staticmethod(lambda cursor: False))
        expected = "pg_repack needs a superuser connection"
    receipt = erase(subject=ALICE)
    assert not receipt.verified
    assert receipt.purge_status.startswith(f"not purged: pg_repack is not available ({expected}")


@pytest.mark.postgres_only
def test_postgres_a_table_pg_repack_skipped_is_not_purged(two_subjects, repack, monkeypatch):
    """pg_repack exits 0 when it skips a table it could not lock: the files tell."""
    monkeypatch.setattr(
        pg_repack, "run_repack", lambda command, env, timeout: pg_repack.RepackRun(0, [])
    )
    receipt = erase(subject=ALICE)
    assert receipt.purge_status.startswith("not purged: pg_repack did not rewrite ")
    assert "lock" in receipt.purge_status and "memories_p" in receipt.purge_status
    assert not receipt.verified


@pytest.mark.postgres_only
def test_postgres_repack_waiting_for_an_open_transaction_gives_up(two_subjects, repack, settings):
    """A transaction open when pg_repack starts would hold it for ever: it is interrupted."""
    import psycopg

    alice, _ = two_subjects
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 1
    s = connection.settings_dict
    other = psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"] or None, port=s["PORT"] or None
    )
    other.execute("BEGIN")
    other.execute("LOCK TABLE memory_review_queue IN ACCESS SHARE MODE")  # no snapshot kept
    try:
        receipt = erase(subject=ALICE)
    finally:
        other.rollback()
        other.close()
    # (more than the 1 s asked: the purge waits at least deadlock_timeout + 0.5 s for a lock)
    assert re.match(
        r"not purged: pg_repack waited more than [\d.]+s for 1 transaction\(s\) \(first pid \d+\)",
        receipt.purge_status,
    ), receipt.purge_status
    assert not receipt.verified
    assert _repack_leftovers() == [], "the interrupted pg_repack cleaned up after itself"
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    (retried,) = retry_purge(receipt)
    assert retried.verified, retried.verification
    assert _purge(retried)["rewrite"].startswith("pg_repack")
    assert found_in(stored_bytes(), subject_markers(alice)) == []
