"""The named outcomes of a verification (memoryapp.rules.outcomes) and their plain words.

Pure: no database. Receipts from before outcomes were recorded are shown honestly —
derived from what they hold, never upgraded to "verified by byte scan" without a
scan's recorded counts.
"""

from __future__ import annotations

import re

import pytest

from memoryapp.rules.outcomes import (
    RECEIPT_OUTCOMES,
    REPLICAS_CAVEAT,
    REPLICAS_PLAIN,
    UNKNOWN,
    Outcome,
    label,
    of_check,
    of_receipt,
    plain_reason,
    worst,
)
from memoryapp.rules.receipt_text import summarize

CLAIMS = re.compile(r"checked|verified by byte scan|found none", re.IGNORECASE)
SCANNED = {"files": 3, "bytes": 4096, "fragments": 2, "found": 0, "found_in_kept_rows": 0}
REMOTE = "database server 'db.internal' is not on this machine"


def receipt(**fields) -> dict:
    base = {
        "target_kind": "subject",
        "state": "complete",
        "purge_status": "purged",
        "verified": True,
        "counts": {"memories": 4},
        "created_at": "2026-12-05T10:00:00+00:00",
        "purged_at": "2026-12-05T10:00:00+00:00",
        "databases": ["default"],
        "verification": "",
        "caveats": "",
        "details": {},
    }
    return {**base, **fields}


# ------------------------------------------------------------ one database's check
def test_only_a_scan_that_ran_verifies_by_byte_scan():
    assert of_check(True, SCANNED) == (Outcome.VERIFIED_BY_SCAN, "")
    assert of_check(True, {"unavailable": REMOTE}) == (Outcome.UNSCANNED, REMOTE)
    assert of_check(True, None) == (Outcome.UNSCANNED, "no byte scan ran")
    # A failed check is not verified, whatever the scan said.
    assert of_check(False, SCANNED)[0] == Outcome.NOT_VERIFIED
    assert of_check(False, {"unavailable": "busy"}) == (Outcome.NOT_VERIFIED, "busy")


def test_the_weakest_copy_decides_and_nothing_erased_weakens_nothing():
    assert worst([Outcome.VERIFIED_BY_SCAN, Outcome.UNSCANNED]) == Outcome.UNSCANNED
    assert worst([Outcome.NOTHING_ERASED, Outcome.VERIFIED_BY_SCAN]) == Outcome.VERIFIED_BY_SCAN
    assert worst([Outcome.UNSCANNED, Outcome.NOT_VERIFIED]) == Outcome.NOT_VERIFIED
    assert worst([]) == Outcome.NOT_CHECKED


# -------------------------------------------------------------- a receipt's outcome
def test_the_recorded_outcome_wins():
    r = receipt(details={"outcome": "rewritten_not_scanned", "scan_unavailable": REMOTE})
    assert of_receipt(r) == ("rewritten_not_scanned", REMOTE)


def test_an_unchecked_or_failed_receipt_is_never_verified():
    assert of_receipt(receipt(state="deleted", verified=False))[0] == "not_checked"
    failed = receipt(state="deleted", verified=False, verification="SQL: 2 erased row(s) remain")
    assert of_receipt(failed)[0] == "not_verified"


def test_an_earlier_receipt_is_verified_by_scan_only_with_the_scans_counts():
    text = "SQL: 0 erased row(s) remain; byte scan: 3 file(s), 4096 bytes, 2 fragment(s): "
    text += "none found"
    with_counts = {"aliases": {"default": {"verification": {"scan": SCANNED}}}}
    assert of_receipt(receipt(verification=text, details=with_counts)) == (
        "verified_by_byte_scan",
        "",
    )
    # The same text without the recorded counts: not upgraded, unknown.
    assert of_receipt(receipt(verification=text)) == (UNKNOWN, "")


def test_an_earlier_receipt_whose_scan_was_not_possible_is_rewritten_not_scanned():
    text = f"SQL: 0 erased row(s) remain; byte scan: not possible ({REMOTE})"
    assert of_receipt(receipt(verification=text)) == ("rewritten_not_scanned", REMOTE)
    short = "SQL: 0 erased row(s) remain; byte scan: no erased value of 8+ bytes to probe"
    assert of_receipt(receipt(verification=short))[0] == "rewritten_not_scanned"
    nothing = "nothing was deleted, so nothing needed purging"
    assert of_receipt(receipt(verification=nothing))[0] == "nothing_erased"


def test_an_earlier_receipt_of_two_databases_takes_the_weaker_with_its_alias():
    text = (
        "default: SQL: 0 erased row(s) remain; byte scan: 1 file(s), 10 bytes, 1 fragment(s): "
        f"none found | users: SQL: 0 erased row(s) remain; byte scan: not possible ({REMOTE})"
    )
    details = {"aliases": {"default": {"verification": {"scan": SCANNED}}, "users": {}}}
    r = receipt(databases=["default", "users"], verification=text, details=details)
    assert of_receipt(r) == ("rewritten_not_scanned", f"users: {REMOTE}")


# ------------------------------------------------------------------- plain words
@pytest.mark.parametrize(
    ("reason", "plain"),
    [
        (REMOTE, "the database runs on another machine"),
        ("data directory not readable by this process", "not allowed to read"),
        ("database file not readable by this process", "not allowed to read"),
        ("data directory not visible (needs pg_read_all_settings)", "does not tell"),
        (
            "the data directory '/var/lib/pg' on this machine belongs to another server",
            "belong to another database server",
        ),
        ("in-memory database: no files", "kept in memory"),
        ("no files to scan", "gives no access to its files"),
        ("something new", "could not run where this application runs"),
    ],
)
def test_each_reason_is_said_plainly(reason, plain):
    assert plain in plain_reason(reason)
    assert plain in label("rewritten_not_scanned", reason)
    assert plain_reason(f"users: {reason}").startswith("users: ")


def test_every_outcome_has_a_name():
    names = {label(o) for o in RECEIPT_OUTCOMES}
    assert len(names) == len(RECEIPT_OUTCOMES)
    assert label("rewritten_not_scanned").startswith("rows deleted and files rewritten")
    assert label("not_verified") == "not verified (needs attention)"
    assert label("not a value") == label(UNKNOWN)


# ------------------------------------------------------------- the summary's words
@pytest.mark.parametrize(
    "reason",
    [REMOTE, "data directory not readable by this process", "in-memory database: no files"],
)
def test_an_unscanned_receipt_never_says_its_files_were_checked(reason):
    details = {"outcome": "rewritten_not_scanned", "scan_unavailable": reason}
    s = summarize(receipt(details=details, verification="x"))
    assert s.headline == "Erased — byte scan not possible here" and s.tone == "done"
    assert "not possible here" in s.text and plain_reason(reason) in s.text
    assert "rewritten" in s.text
    for words in (s.headline, s.text, s.outcome_text, *s.caveats):
        assert not CLAIMS.search(words), words


def test_an_earlier_receipt_that_does_not_say_how_is_shown_as_unknown():
    s = summarize(receipt(verification="SQL: 0 erased row(s) remain"))
    assert s.outcome == UNKNOWN
    assert s.headline == "Erased — how it was verified is not recorded"
    assert "does not record whether the database files were scanned" in s.text
    assert "hold none" not in s.text and "found none" not in s.text


def test_the_replica_caveat_says_replicas_are_not_examined():
    s = summarize(receipt(caveats=f"PostgreSQL: {REPLICAS_CAVEAT}", verification="x"))
    assert REPLICAS_PLAIN in s.caveats
    assert "replay" not in " ".join(s.caveats).lower()
