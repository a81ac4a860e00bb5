"""Erasure verification (issue 14): the kept-row check and SQLite's WAL, on both vendors.

- A fragment the byte scan finds is excused only when a kept row holds the very
  same bytes (byte-exact, case-sensitive, inside one column value), and the
  check costs one pass over the kept rows whatever the number of fragments.
"""

from __future__ import annotations

import secrets

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.erasure import erase, kept, probes
from memoryapp.models import Memory

from ._erasure_support import filler_with, marker, stored_bytes

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
    assert many <= 8, "one query per table (and per chunk), plus one table-list lookup"


@pytest.mark.django_db
def test_the_check_stops_once_every_fragment_is_explained(monkeypatch):
    monkeypatch.setattr(kept, "CHUNK_ROWS", 2)
    for i in range(10):
        _save(KEEP, f"row {i}", f"kept row {i} " + marker(f"s{i}"))
    first = Memory.objects.order_by("pk").first()
    with CaptureQueriesContext(connection) as ctx:
        assert kept.explained("default", [first.content.encode()[-20:]]) == {0}
    assert len(ctx.captured_queries) == 1


# ------------------------------------------------------------ end to end
@pytest.mark.django_db(transaction=True)
def test_shared_content_of_a_kept_namespace_is_excused():
    shared = [filler_with([marker(f"shared{i}")], size=600) for i in range(5)]
    for i, text in enumerate(shared):
        _save(GONE, f"fact {i}", text)
        _save(KEEP, f"fact {i}", text)
    receipt = erase(namespace=GONE)
    assert receipt.purged and receipt.verified, receipt.verification
    scan = receipt.details["aliases"]["default"]["verification"]["scan"]
    assert scan["found"] == 0 and scan["found_in_kept_rows"] > 0
    assert "occur in rows that were kept" in receipt.verification


@pytest.mark.django_db(transaction=True)
def test_a_fragment_no_kept_row_holds_fails_the_verification(monkeypatch):
    """On disk, but only as a kept row's namespace, and in its content in other case."""
    other = f"acme/Mixed-{secrets.token_hex(10)}"
    _save(other, "note", f"mentions {other.lower()} only in lower case")
    _save(GONE, "fact", "erased fact " + marker("gone"))
    assert other.encode() in stored_bytes(checkpoint=True), "control: the bytes are stored"
    recall = probes.recall
    monkeypatch.setattr(probes, "recall", lambda rid, alias: [*recall(rid, alias), other.encode()])
    receipt = erase(namespace=GONE)
    assert receipt.purged and not receipt.verified, receipt.verification
    assert receipt.details["aliases"]["default"]["verification"]["scan"]["found"] == 1
    assert ": 1 found" in receipt.verification
