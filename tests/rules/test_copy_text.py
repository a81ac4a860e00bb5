"""Each copy and its outcome in plain words (memoryapp.rules.copy_text): pure."""

from memoryapp.rules.copy_text import line, phrase, verified_everywhere, weakest
from memoryapp.rules.outcomes import Outcome

PRIMARY = {"server": "primary", "role": "primary", "outcome": "verified_by_byte_scan"}
REPLICA = {"server": "pg-2", "role": "replica", "outcome": "verified_by_byte_scan"}


def test_every_copy_verified_reads_as_one_line_primary_first():
    assert line([REPLICA, PRIMARY]) == (
        "primary: verified by byte scan; replica pg-2: verified by byte scan"
    )
    assert verified_everywhere([PRIMARY, REPLICA])
    assert weakest([PRIMARY, REPLICA]) == Outcome.VERIFIED_BY_SCAN


def test_a_copy_that_never_reported_says_so_and_weakens_the_receipt():
    waiting = {**REPLICA, "outcome": "not_checked", "reason": ""}
    assert phrase(waiting) == "replica pg-2: not checked (no verifier reported)"
    assert weakest([PRIMARY, waiting]) == Outcome.NOT_CHECKED
    assert not verified_everywhere([PRIMARY, waiting])


def test_reasons_follow_the_outcomes_that_are_no_proof_and_never_a_verified_one():
    unscanned = {**REPLICA, "outcome": "rewritten_not_scanned", "reason": "no file access"}
    assert phrase(unscanned) == (
        "replica pg-2: rows gone and files rewritten, but not scanned (no file access)"
    )
    found = {**REPLICA, "outcome": "not_verified", "reason": "2 fragment(s) found"}
    assert phrase(found) == "replica pg-2: not verified (2 fragment(s) found)"
    assert phrase({**PRIMARY, "reason": "stray"}) == "primary: verified by byte scan"
    assert weakest([unscanned, found]) == Outcome.NOT_VERIFIED


def test_an_unknown_or_missing_outcome_claims_nothing():
    odd = {"server": "pg-3", "role": "replica", "outcome": "verified!"}
    assert phrase(odd) == "replica pg-3: not checked (no verifier reported)"
    assert not verified_everywhere([])
    assert line([]) == ""
