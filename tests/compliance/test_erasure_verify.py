"""Erasure verification (issue 14): the kept-row check and SQLite's WAL, on both vendors.

- A fragment the byte scan finds is excused only when a kept row holds the very
  same bytes (byte-exact, case-sensitive, inside one column value), and the
  check costs one pass over the kept rows whatever the number of fragments.
- On SQLite, an erasure verifies while another process keeps writing in
  another namespace: the WAL those writes leave is judged by the byte scan,
  which still fails on an erased fragment there.
"""

from __future__ import annotations

import secrets
import subprocess
import threading
import time

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.compliance import erase, kept, probes
from memoryapp.db.purge.common import Structure
from memoryapp.db.purge.sqlite import SQLitePurge
from memoryapp.models import Memory
from tests._erasure_support import filler_with, found_in, marker, namespace_beside, stored_bytes

GONE = "acme/gone"
KEEP = "acme/keep"


def _save(namespace: str, key: str, value: str) -> Memory:
    return MemoryManager(project=namespace).upsert(key, value, scope="project")


def _absent(n: int) -> list[bytes]:
    """``n`` fragments no row holds."""
    return [f"absent-{secrets.token_hex(12)}".encode() for _ in range(n)]


# ------------------------------------------------------------ the kept-row check
@pytest.mark.django_db
def test_a_fragment_a_kept_row_holds_is_explained_one_it_does_not_is_not():
    held = marker("held")
    _save(KEEP, "note", f"the kept row says {held} here")
    pieces = [held.encode(), *_absent(1)]
    assert kept.explained("default", pieces) == {0}


@pytest.mark.django_db
def test_case_differing_text_does_not_explain():
    held = marker("case")  # lower case
    _save(KEEP, "note", f"shouted: {held.upper()}")
    _save(KEEP, "other", f"title case: {held.title()}")
    assert kept.explained("default", [held.encode()]) == set()
    assert kept.explained("default", [held.upper().encode()]) == {0}


@pytest.mark.django_db
def test_the_match_is_byte_exact_and_inside_one_value():
    tail = "x" * 47
    _save(KEEP, "umlaut", "prefix ä" + tail)  # ä is c3 a4 in UTF-8
    second = _save(KEEP, "second", "second row starts " + marker("b"))
    title, content = second.title.encode(), second.content.encode()
    pieces = [
        b"\xbc" + tail.encode(),  # ü's second byte: decodes to the same text, other bytes
        b"\xa4" + tail.encode(),  # ä's second byte: really stored
        title[-6:] + content[:6],  # across two columns of one row
        b"prefix \xc3\xa4",
    ]
    assert kept.explained("default", pieces) == {1, 3}


@pytest.mark.django_db
def test_rows_are_read_in_chunks_and_every_kind_of_row_counts(monkeypatch, django_user_model):
    monkeypatch.setattr(kept, "CHUNK_ROWS", 3)
    for i in range(10):
        _save(KEEP, f"row {i}", f"row {i} of ten " + marker(f"r{i}"))
    last = Memory.objects.order_by("pk").last()
    soft = _save(KEEP, "soft", "soft deleted " + marker("soft"))
    assert MemoryManager(project=KEEP).delete(soft.id)  # its bytes are still stored
    summary = marker("summary")
    MemoryManager(project=KEEP, user="acme/alice").save_session_summary(filler_with([summary]))
    logged = marker("log")
    LogEntry.objects.create(
        user=django_user_model.objects.create(username="ops", is_staff=True),
        content_type=ContentType.objects.get_for_model(Memory),
        object_id=last.pk,
        object_repr=f"title {logged}",
        action_flag=ADDITION,
        change_message="[]",
    )
    tail = last.content.encode()[-20:]
    # One row's last value and the next row's first are adjacent in the searched
    # chunk: a fragment spanning them is not held by either.
    first, second = Memory.objects.order_by("pk")[:2]
    across = first.keywords_json.encode()[-6:] + second.title.encode()[:6]
    pieces = [tail, soft.content.encode()[-20:], summary.encode(), logged.encode(), across]
    assert kept.explained("default", pieces) == {0, 1, 2, 3}


@pytest.mark.django_db
def test_the_number_of_queries_does_not_grow_with_the_fragments():
    for i in range(30):
        _save(KEEP, f"row {i}", f"kept row {i} " + marker(f"q{i}"))

    def queries(n: int) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert kept.explained("default", _absent(n)) == set()
        return len(ctx.captured_queries)

    few, many = queries(10), queries(500)
    assert few == many
    # One lookup per indexed text column (all fragments of a batch at once), one query
    # per table read (each fits one chunk here), plus the table-list lookup.
    models = kept._scope("default", ())
    lookups = sum(len(kept._indexed_columns(m, "default")) for m in models)
    assert many <= lookups + len(models) + 1


@pytest.mark.django_db
def test_the_check_stops_once_every_fragment_is_explained(monkeypatch):
    monkeypatch.setattr(kept, "CHUNK_ROWS", 2)
    for i in range(10):
        _save(KEEP, f"row {i}", f"kept row {i} " + marker(f"s{i}"))
    first = Memory.objects.order_by("pk").first()
    with CaptureQueriesContext(connection) as ctx:
        assert kept.explained("default", [first.content.encode()[-20:]]) == {0}
    # The indexed lookups find nothing (a slice of content is no whole key), then the
    # pass reads one chunk of rows and stops.
    chunks = [q for q in ctx.captured_queries if "LIMIT" in q["sql"]]
    assert len(chunks) == 1, chunks


def test_the_finder_matches_a_naive_search_on_text_made_of_common_words():
    import random

    from memoryapp.db.finder import Finder

    rng = random.Random(14)
    words = [
        "the",
        "user",
        "prefers",
        "config",
        "deploy",
        "staging",
        "with",
        "of",
        "and",
        "to",
        "tabs",
    ]

    def text(n: int) -> bytes:
        return " ".join(rng.choice(words) for _ in range(n)).encode()

    rows = [text(rng.randint(3, 60)) for _ in range(400)]
    haystack = b"\x00".join(rows)
    pieces = [r[: rng.randint(8, len(r))] for r in rows[:150] if len(r) >= 8]
    pieces += [text(6)[:40] for _ in range(150)]  # mostly absent, made of the same words
    pieces += [b"prefers ", b"the user", pieces[0], b"\xc3\xa4" + text(4)]  # short, duplicate
    pieces = [p for p in pieces if len(p) >= 8]
    expected = {i for i, p in enumerate(pieces) if p in haystack}
    found: set[int] = set()
    finder = Finder(pieces)
    overlap = max(len(p) for p in pieces)
    for start in range(0, len(haystack), 3000):  # in chunks, found pieces drop out
        finder.search(haystack[max(start - overlap, 0) : start + 3000], found)
    assert found == expected
    assert 0 < len(expected) < len(pieces)


# ------------------------------------------------------------ end to end
@pytest.mark.django_db(transaction=True)
def test_common_content_of_a_kept_namespace_is_excused():
    keep = namespace_beside(GONE, KEEP)
    common = [filler_with([marker(f"common{i}")], size=600) for i in range(5)]
    for i, text in enumerate(common):
        _save(GONE, f"fact {i}", text)
        _save(keep, f"fact {i}", text)
    receipt = erase(namespace=GONE)
    assert receipt.purged and receipt.verified, receipt.verification
    scan = receipt.details["aliases"]["default"]["verification"]["scan"]
    assert scan["found"] == 0 and scan["found_in_kept_rows"] > 0
    assert "occur in rows that were kept" in receipt.verification


def _across_two_values(row: Memory) -> bytes:
    """Bytes stored on disk that no one value of ``row`` holds: the end of its title and the
    start of its content, adjacent in the stored record (SQLite: nothing between them;
    PostgreSQL: the content's one-byte length header)."""
    title, content = row.title.encode(), row.content.encode()
    header = bytes([((len(content) + 1) << 1) | 1])  # a short varlena's, little-endian
    stored = stored_bytes(checkpoint=True)
    for between in (b"", header):
        candidate = title[-14:] + between + content[:14]
        if candidate in stored:
            return candidate
    raise AssertionError("control: the title and content are stored side by side")


@pytest.mark.django_db(transaction=True)
def test_a_fragment_no_kept_row_holds_fails_the_verification(monkeypatch):
    """On disk, but across two values of a kept row (any one column explains, two do not)."""
    other = namespace_beside(GONE, "acme/mixed-")
    row = _save(other, f"title {marker('t')}", f"{marker('c')} the content")
    _save(GONE, "fact", "erased fact " + marker("gone"))
    across = _across_two_values(row)
    recall = probes.recall
    monkeypatch.setattr(probes, "recall", lambda rid, alias: [*recall(rid, alias), across])
    receipt = erase(namespace=GONE)
    assert receipt.purged and not receipt.verified, receipt.verification
    assert receipt.details["aliases"]["default"]["verification"]["scan"]["found"] == 1
    assert ": 1 found" in receipt.verification
    # A live row's bytes: a stronger purge keeps them, and the receipt lists each try
    # (PostgreSQL without pg_repack skips the VACUUM FULL its fallback already ran).
    steps = receipt.details["aliases"]["default"]["purge_steps"]
    assert len(steps) >= 2 and {s["outcome"] for s in steps} == {"residue"}, steps
    said = "1 fragment(s) of erased values remained"
    assert receipt.verification.count(said) == len(steps)


# ------------------------------------------------------------ SQLite WAL
class _Writer:
    """Another OS process saving memories in its own namespace, as fast as it can."""

    def __init__(self, log) -> None:
        from tests.ops.test_multiprocess import Worker

        self.worker = Worker(f"sqlite:///{connection.settings_dict['NAME']}", "memoryapp", log)
        self.saved: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set():
                value = f"another tenant's note {n} " + secrets.token_hex(64)
                self.saved.append(self.worker("save", key=f"tenant note {n}", value=value))
                n += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait_for_saves(self, count: int, timeout: float = 30.0) -> None:
        """Block until ``count`` more saves have committed."""
        target = len(self.saved) + count
        for _ in range(int(timeout / 0.01)):
            if len(self.saved) >= target or self.error:
                return
            time.sleep(0.01)
        raise AssertionError("the writer process made no progress")

    def __enter__(self):
        self.thread.start()
        self.wait_for_saves(3)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)
        self.worker.close()


def _wal() -> bytes:
    # Read by another process: no descriptor of the database's files opens and
    # closes here (memoryapp/db/scan_child.py says why).
    path = connection.settings_dict["NAME"] + "-wal"
    return subprocess.run(["cat", path], capture_output=True, check=True).stdout


def _after_purge(monkeypatch, then) -> None:
    """Run ``then()`` right after the SQLite purge (its truncating checkpoint) succeeds."""
    purge = SQLitePurge.purge

    def wrapped(self, *args, **kwargs):
        outcome = purge(self, *args, **kwargs)
        if outcome.ok:
            then()
        return outcome

    monkeypatch.setattr(SQLitePurge, "purge", wrapped)


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("common", [False, True], ids=["own-content", "common-content"])
def test_sqlite_erasure_verifies_while_another_process_writes(tmp_path, monkeypatch, common):
    gone = [marker(f"wal{i}") for i in range(3)]
    for i, m in enumerate(gone):
        text = filler_with([m], size=600)
        _save(GONE, f"fact {i}", text)
        if common:  # every fragment is then found (in a kept row) before the WAL is read
            _save(KEEP, f"fact {i}", text)
    with _Writer(tmp_path / "writer.log") as writer:
        # Commits after the checkpoint: the WAL holds the other tenant's pages.
        _after_purge(monkeypatch, lambda: writer.wait_for_saves(2))
        receipt = erase(namespace=GONE)
    assert writer.error is None, writer.error
    assert receipt.purge_status == "purged", receipt.purge_status
    facts = receipt.details["aliases"]["default"]["verification"]
    assert facts["wal_bytes"] > 0, "control: the WAL was not empty at verification"
    assert receipt.verified, receipt.verification
    assert "-wal" in receipt.verification and "read by the byte scan" in receipt.verification
    scan = facts["scan"]
    assert scan["found"] == 0 and (scan["found_in_kept_rows"] > 0) == common
    if not common:
        assert found_in(stored_bytes(), gone) == []


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_sqlite_an_erased_fragment_in_the_wal_still_fails(tmp_path, monkeypatch):
    _save(GONE, "fact", "erased fact " + marker("walgone"))
    in_wal: list[bytes] = []
    seen: list[bool] = []
    with _Writer(tmp_path / "writer.log") as writer:

        def then():
            if seen:  # the stronger purges that follow (escalation) find it too
                return
            writer.wait_for_saves(2)
            # The new row's title and the start of its content, side by side in its
            # record: on disk, yet in no one value of a kept row (each value explains).
            row = Memory.objects.get(pk=writer.saved[-1])
            in_wal.append(row.title.encode() + row.content.encode()[:14])
            seen.append(in_wal[-1] in _wal())

        _after_purge(monkeypatch, then)
        recall = probes.recall
        monkeypatch.setattr(probes, "recall", lambda rid, alias: [*recall(rid, alias), *in_wal])
        receipt = erase(namespace=GONE)
    assert writer.error is None, writer.error
    assert receipt.purge_status == "purged", receipt.purge_status
    assert seen == [True], "control: the probe's bytes were in the WAL at verification"
    assert not receipt.verified, receipt.verification
    assert receipt.details["aliases"]["default"]["verification"]["scan"]["found"] == 1
    assert ": 1 found" in receipt.verification
    # A live row's bytes: every stronger purge keeps them, and the receipt lists each try
    # (PostgreSQL without pg_repack skips the VACUUM FULL its fallback already ran).
    steps = receipt.details["aliases"]["default"]["purge_steps"]
    assert len(steps) >= 2 and {s["outcome"] for s in steps} == {"residue"}, steps
    said = "1 fragment(s) of erased values remained"
    assert receipt.verification.count(said) == len(steps)


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_sqlite_without_a_byte_scan_the_wal_must_still_be_empty(tmp_path, monkeypatch):
    """Without fragments (the key that sealed them is gone) nothing can judge the WAL's pages."""
    from memoryapp.compliance import purging

    _save(GONE, "fact", "erased fact " + marker("noscan"))
    with _Writer(tmp_path / "writer.log") as writer:
        _after_purge(monkeypatch, lambda: writer.wait_for_saves(2))
        monkeypatch.setattr(probes, "recall", lambda rid, alias: None)
        monkeypatch.setattr(purging.sealed, "unseal", lambda token: None)
        receipt = erase(namespace=GONE)
    assert writer.error is None, writer.error
    assert receipt.purge_status == "purged", receipt.purge_status
    assert not receipt.verified, receipt.verification
    assert "no byte scan read it" in receipt.verification


def test_a_file_left_to_the_scan_must_be_read_whole():
    structure = Structure(True, "-wal 100 byte(s)", scan_must_read={"db-wal": 100})
    assert structure.verdict({"db-wal": 100}) == (
        True,
        "-wal 100 byte(s) (written since the purge; read by the byte scan)",
    )
    assert structure.verdict({"db-wal": 99})[0] is False
    assert structure.verdict({"db": 4096})[0] is False
    assert Structure(False, "freelist 3 page(s)").verdict({}) == (
        False,
        "freelist 3 page(s)",
    )
