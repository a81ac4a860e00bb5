"""One validation layer: every entry point refuses bad input the same way, on both vendors.

Before it, such input reached the database driver: a lone surrogate raised
``UnicodeEncodeError``, on PostgreSQL a NUL byte or a 300-character namespace
raised ``DataError`` (and the server logged the failing INSERT with the memory's
text), ``delete(5)`` raised ``ProgrammingError``, and on SQLite a 10 MB search
raised ``OperationalError``. Each case here asserts a ``MemoryValidationError``
(Python) or a 400 (HTTP), and that nothing was written.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.compliance import ErasureRequestError, erase, export
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import (
    MAX_QUERY_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    check_namespace,
)

pytestmark = pytest.mark.django_db

SURROGATE = "bad \ud800 text"
NUL = "bad \x00 text"


def _nothing_written():
    assert Memory.objects.count() == 0
    assert MemoryEvent.objects.count() == 0
    assert ReviewItem.objects.count() == 0
    assert SessionSummary.objects.count() == 0


def post_json(client, path: str, body: dict):
    """POST ``body`` as ASCII JSON: a lone surrogate travels as its ``\\ud800`` escape."""
    return client.generic("POST", path, json.dumps(body), content_type="application/json")


# (field, value) pairs of one upsert that must be refused before any SQL
BAD_UPSERTS = {
    "key-surrogate": {"key": SURROGATE},
    "key-nul": {"key": NUL},
    "value-surrogate": {"value": SURROGATE},
    "value-nul": {"value": NUL},
    "tag-surrogate": {"tags": [SURROGATE]},
    "tag-nul": {"tags": [NUL]},
    "tag-too-long": {"tags": ["t" * (MAX_TAG_CHARS + 1)]},
    "too-many-tags": {"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]},
    "ns-surrogate": {"project": "acme/" + SURROGATE},
    "ns-nul": {"project": "acme/a\x00b"},
    "ns-too-long": {"project": "acme/" + "x" * 300},
    "ns-control": {"project": "acme/a\nb"},
    "ns-dotdot": {"project": "acme/../globex/web"},
    "ns-dot": {"project": "acme/./web"},
    "ns-empty-segment": {"project": "acme//web"},
    "ns-trailing-slash": {"project": "acme/web/"},
    "ns-whitespace": {"project": " acme/web"},
    "user-surrogate": {"user": "acme/" + SURROGATE},
    "user-too-long": {"user": "acme/" + "u" * 300},
}


def _call(overrides: dict) -> dict:
    call = {"project": "acme/web", "user": None, "key": "editor", "value": "uses vim", "tags": []}
    call.update(overrides)
    return call


@pytest.mark.parametrize("case", sorted(BAD_UPSERTS))
def test_a_bad_upsert_is_refused_in_python_before_any_sql(case):
    call = _call(BAD_UPSERTS[case])
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(MemoryValidationError) as refused,
    ):
        MemoryManager(project=call["project"], user=call["user"]).upsert(
            call["key"], call["value"], tags=call["tags"]
        )
    # The driver never saw the value: no statement could carry it into a server log.
    assert not [q for q in queries.captured_queries if "INSERT" in q["sql"].upper()]
    assert "\x00" not in str(refused.value) and "\ud800" not in str(refused.value)
    _nothing_written()


@pytest.mark.parametrize("case", sorted(BAD_UPSERTS))
def test_a_bad_upsert_is_a_400_over_http(acme, case):
    call = _call(BAD_UPSERTS[case])
    body = {k: v for k, v in call.items() if v is not None}
    r = post_json(acme, "/api/memories/", body)
    assert r.status_code == 400, r.content
    _nothing_written()


def test_the_same_namespace_refusal_reads_the_same_in_python_and_http(acme):
    bad = "acme/../globex/web"
    with pytest.raises(MemoryValidationError) as refused:
        MemoryManager(project=bad)
    r = acme.post("/api/memories/", {"project": bad, "key": "k", "value": "v"}, format="json")
    assert r.status_code == 400
    assert r.json()["project"] == [str(refused.value)]


def test_a_refused_namespace_never_passes_a_prefix_grant(acme):
    """``acme/../globex`` starts with ``acme/``: refused, it never reaches the grant check."""
    for bad in ("acme/../globex/web", "acme/./../globex"):
        r = acme.post("/api/recall/", {"project": bad, "query": "q", "messages": []}, format="json")
        assert r.status_code == 400


@pytest.mark.parametrize(
    "memory_id", ["a\x00b", "x" * 65, 5, None, "a\ud800"], ids=["nul", "long", "int", "none", "sur"]
)
def test_bad_ids_are_refused_by_get_entry_and_delete(memory_id):
    mm = MemoryManager(project="acme/web")
    mm.upsert("editor", "uses vim")
    with pytest.raises(MemoryValidationError):
        mm.get_entry(memory_id)
    with pytest.raises(MemoryValidationError):
        mm.delete(memory_id)
    assert Memory.objects.live().count() == 1


def test_oversized_search_and_tag_filters_are_refused_not_sent_to_sql(acme):
    mm = MemoryManager(project="acme/web")
    mm.upsert("editor", "uses vim", tags=["tools"])
    huge = "x" * 10_000_000
    for call in (mm.search, mm.filter_by_tag):
        with pytest.raises(MemoryValidationError):
            call(huge)
        with pytest.raises(MemoryValidationError):
            call(SURROGATE)
    # the longest accepted query still runs (and finds nothing)
    assert mm.search("x" * MAX_QUERY_CHARS) == []
    for param in ("q", "tag"):
        r = acme.get("/api/memories/", {param: "x" * 60_000})
        assert r.status_code == 400, r.content
        assert param in r.json()


def test_a_bad_session_summary_is_refused_and_not_stored():
    mm = MemoryManager(project="acme/web", session_id="s1")
    assert mm.save_session_summary("s" * (MAX_SUMMARY_CHARS + 1)) is None
    assert mm.save_session_summary(SURROGATE) is None
    assert mm.save_session_summary(NUL) is None
    assert mm.save_session_summary("a fine summary") is not None
    assert list(SessionSummary.objects.values_list("summary_text", flat=True)) == ["a fine summary"]


def test_an_oversized_session_summary_is_a_400(acme):
    body = {"project": "acme/web", "session_id": "s1", "summary": "s" * (MAX_SUMMARY_CHARS + 1)}
    r = acme.post("/api/session-summaries/", body, format="json")
    assert r.status_code == 400
    assert "summary" in r.json()
    _nothing_written()


def test_crystallize_drops_proposals_it_could_not_store():
    mm = MemoryManager(project="acme/web")
    items = mm.crystallize_user_messages(
        [{"role": "user", "content": "I prefer tabs \ud800 over spaces"}]
    )
    assert items == []
    _nothing_written()


@pytest.mark.parametrize("value", [SURROGATE, NUL, "s" * 300])
def test_erasure_and_export_refuse_values_no_column_can_hold(value):
    with pytest.raises(ErasureRequestError):
        erase(subject=value)
    with pytest.raises(ErasureRequestError):
        export(subject=value)
    with pytest.raises(ErasureRequestError):
        erase(namespace=value)
    with pytest.raises(ErasureRequestError):
        erase(ids=[value])


def test_erasure_still_reaches_a_legacy_namespace_the_write_rules_now_refuse():
    """Rows stored before the write rules (e.g. ``a//b``) can still be erased by name."""
    MemoryManager(project="legacy/web").upsert("editor", "uses vim")
    Memory.objects.update(namespace="legacy//web")
    with pytest.raises(MemoryValidationError):
        check_namespace("legacy//web")
    receipt = erase(namespace="legacy//web")
    assert receipt.counts["memories"] == 1
    assert Memory.objects.count() == 0


def test_the_cli_reports_a_bad_namespace_as_a_command_error():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="segments"):
        call_command("memory", "list", "--project", "acme//web")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"tags": "one-string"}, "tags"),
        ({"tags": ["x" * 200]}, "tags"),
        ({"scope": "nowhere"}, "scope"),
        ({"type": "bogus"}, "type"),
        ({"source": "bogus"}, "source"),
    ],
)
def test_a_refused_write_names_its_field(options, field):
    """What the admin form attaches the message to (MemoryValidationError.field)."""
    from memoryapp.rules.guard import MemoryGuard
    from memoryapp.writes import store

    with pytest.raises(MemoryValidationError) as caught:
        store.prepare(MemoryGuard(), "a key", "some content", **options)
    assert caught.value.field == field


def test_a_credential_in_a_tag_is_refused_on_the_tags():
    from memoryapp.rules.errors import SensitiveMemoryError
    from memoryapp.rules.guard import MemoryGuard
    from memoryapp.writes import store

    with pytest.raises(SensitiveMemoryError) as caught:
        store.prepare(MemoryGuard(), "a key", "some content", ["AKIA" + "IOSFODNN7EXAMPLE"])
    assert caught.value.field == "tags"
