"""The plain-language receipt summary (memoryapp.rules.receipt_text): pure, no database."""

from __future__ import annotations

import datetime as dt

from memoryapp.rules.receipt_text import day, summarize

WHEN = "2026-12-05T10:00:00+00:00"
CAVEATS = (
    "SQLite: the erased rows are gone from the database file. Not reached: copies of the file "
    "made before the erasure (backups, VACUUM INTO copies, file-system snapshots, replicas "
    "such as Litestream) keep the data until they expire. Storage below the file system "
    "(SSD wear levelling, file-system journals) may keep freed blocks until they are reused.\n"
    "SQLite: old versions of rows that a program without secure_delete=ON updated stay in "
    "free space until the next VACUUM."
)


def receipt(**fields) -> dict:
    base = {
        "target_kind": "subject",
        "state": "complete",
        "purge_status": "purged",
        "verified": True,
        "vacuumed": True,
        "counts": {"memories": 30, "session_summaries": 3, "memory_events": 5},
        "created_at": WHEN,
        "purged_at": WHEN,
        "caveats": CAVEATS,
        "details": {"outcome": "verified_by_byte_scan"},
        "authored": {},
    }
    return {**base, **fields}


def test_complete_and_verified_says_so_plainly():
    s = summarize(receipt())
    assert s.headline == "Erased and verified by byte scan" and s.tone == "done"
    assert s.sentences[0] == (
        "All 38 records about this person were permanently deleted on 5 Dec 2026; a byte "
        "scan of the database files found none of the erased text in them."
    )
    assert s.outcome == "verified_by_byte_scan" and s.outcome_text == "verified by byte scan"


def test_admin_history_entries_are_not_counted_as_deleted():
    s = summarize(receipt(counts={"memories": 2, "django_admin_log": 40}))
    assert s.sentences[0].startswith("All 2 records about this person")


def test_one_record_reads_in_the_singular():
    s = summarize(receipt(counts={"memories": 1}))
    assert s.sentences[0].startswith("The 1 record about this person was permanently deleted")


def test_unverified_states_never_claim_the_files_were_checked():
    cases = {
        "requested": receipt(state="requested", purge_status="pending", verified=False),
        "deleted": receipt(state="deleted", purge_status="pending", verified=False),
        "deferred": receipt(
            state="deleted",
            purge_status="not purged: deferred to the erasure worker",
            verified=False,
        ),
        "not purged": receipt(
            state="deleted", purge_status="not purged: locked", verified=False, vacuumed=False
        ),
        "unverified": receipt(state="deleted", purge_status="purged", verified=False),
        "unknown": receipt(state="needs_attention", purge_status="pending", verified=False),
    }
    headlines = {}
    for name, r in cases.items():
        s = summarize(r)
        headlines[name] = s.headline
        assert "hold none of the erased text" not in s.text, name
        assert "purged" not in s.headline.lower(), name  # the header must not read as done
        assert s.tone in ("pending", "problem"), name
    assert headlines["requested"] == "Requested — nothing deleted yet"
    assert headlines["deleted"] == headlines["deferred"] == "Deleted — clean-up in progress"
    assert headlines["not purged"] == "Deleted — clean-up not complete"
    assert headlines["unverified"] == "Deleted — check not passed"
    assert headlines["unknown"] == "Erasure not finished"
    assert "no record has been deleted yet" in summarize(cases["requested"]).text


def test_fragments_in_kept_rows_do_not_read_as_remaining_personal_data():
    details = {
        "aliases": {
            "default": {"verification": {"scan": {"found": 0, "found_in_kept_rows": 15}}},
        }
    }
    s = summarize(receipt(details=details))
    text = s.text
    assert "15 passages" in text and "kept on purpose" in text
    assert "none of them is an erased record" in text
    assert "occur in rows that were kept" not in text
    assert "remain" not in text


def test_kept_authored_project_records_are_explained():
    s = summarize(receipt(authored={"project_memories_kept": 2, "ids": ["a", "b"]}))
    assert "2 shared project records this person wrote were kept" in s.text


def test_caveats_in_plain_words_without_jargon():
    s = summarize(receipt())
    joined = " ".join(s.caveats)
    assert "Backups" in joined and "restored" in joined
    assert "storage hardware" in joined and "another program" in joined
    for jargon in ("secure_delete", "Litestream", "VACUUM", "WAL", "freelist"):
        assert jargon not in joined
    assert summarize(receipt(caveats="")).caveats == []
    assert summarize(receipt(caveats="something new")).caveats == [
        "The technical proof below lists what the erasure cannot reach."
    ]


def test_other_targets_and_nothing_found():
    assert "in this workspace" in summarize(receipt(target_kind="namespace")).text
    nothing = summarize(receipt(counts={}))
    assert nothing.headline == "Nothing to erase"
    assert "nothing had to be deleted" in nothing.text


def test_day_formats_dates_and_tolerates_garbage():
    assert day(dt.datetime(2026, 12, 5, 23, 0, tzinfo=dt.UTC)) == "5 Dec 2026"
    assert day("2026-01-09T00:00:00") == "9 Jan 2026"
    assert day("not a date") == "" and day(None) == ""
