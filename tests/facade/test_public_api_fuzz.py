"""The public Python API refuses bad arguments with its documented errors, nothing else.

Issue #38: ``erase(actor='\\ud800')`` raised ``UnicodeEncodeError``,
``purge_review_queue(status=5)`` a ``TypeError``, and ``tokens_before=-1`` was
accepted. Here every argument of the facade's public methods and of the compliance
functions it stands beside is fed hostile values — lone surrogates, NULs, wrong types,
negative and huge numbers — one argument at a time, the others valid. What may escape
is a :class:`MemoryValidationError` (or, documented for a request of the compliance
functions, an :class:`ErasureRequestError`): never a ``TypeError``, a
``UnicodeEncodeError`` or a database error. Methods documented never to raise (reads,
recall, ``save_session_summary``) answer instead. Bounded: a few examples per argument.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp import MemoryManager, compliance
from memoryapp.compliance import ErasureRequestError
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError

pytestmark = pytest.mark.django_db

DOCUMENTED = (MemoryValidationError, SensitiveMemoryError, ErasureRequestError)

lone_surrogate = st.sampled_from(["\ud800", "a\udfffb", "\udc80" * 3])
with_nul = st.text(max_size=8).map(lambda s: f"{s}\x00{s}")
huge = st.one_of(st.just(2**63), st.just(-(2**63)), st.integers(min_value=2**31))
HOSTILE = st.one_of(
    lone_surrogate,
    with_nul,
    st.integers(min_value=-(2**70), max_value=2**70),
    huge,
    st.just(-1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.binary(max_size=8),
    st.lists(st.one_of(st.integers(), lone_surrogate, st.none()), min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(object()),
)

NS, USER = "fuzz/project", "fuzz/user"


def _mm() -> MemoryManager:
    return MemoryManager(project=NS, user=USER)


# (name, call taking the keyword arguments, the valid arguments; each is fuzzed in turn)
FACADE = [
    ("upsert", lambda **a: _mm().upsert(**a), {"key": "k", "value": "v", "scope": "project"}),
    ("upsert tags", lambda **a: _mm().upsert("k", "v", **a), {"tags": ["t"], "type": "note"}),
    ("upsert actor", lambda **a: _mm().upsert("k", "v", **a), {"actor": "someone"}),
    ("get_entry", lambda **a: _mm().get_entry(**a), {"memory_id": "0" * 16}),
    ("get_all_entries", lambda **a: _mm().get_all_entries(**a), {"scope": "user"}),
    ("delete", lambda **a: _mm().delete(**a), {"memory_id": "0" * 16, "actor": "a"}),
    ("delete_by_title", lambda **a: _mm().delete_by_title(**a), {"title": "t", "actor": "a"}),
    ("clear", lambda **a: _mm().clear(**a), {"scope": "user", "actor": "a"}),
    ("list_review_items", lambda **a: _mm().list_review_items(**a), {"status": "pending"}),
    ("approve_review_item", lambda **a: _mm().approve_review_item(**a), {"item_id": "0" * 16}),
    ("reject_review_item", lambda **a: _mm().reject_review_item(**a), {"item_id": "0" * 16}),
    ("reject_review_items", lambda **a: _mm().reject_review_items(**a), {"item_ids": ["0"]}),
    (
        "purge_review_queue",
        lambda **a: _mm().purge_review_queue(**a),
        {"status": "rejected", "actor": "a"},
    ),
    (
        "save_session_summary",
        lambda **a: _mm().save_session_summary(**a),
        {"text": "a summary", "tokens_before": 10, "messages_summarized": 2},
    ),
    (
        "get_recent_session_summaries",
        lambda **a: _mm().get_recent_session_summaries(**a),
        {"session_id": "s", "limit": 3},
    ),
    ("MemoryManager", lambda **a: MemoryManager(**a), {"project": NS, "user": USER}),
]
COMPLIANCE = [
    (
        "erase",
        lambda **a: compliance.erase(purge=False, **a),
        {"namespace": NS, "actor": "a"},
    ),
    ("erase subject", lambda **a: compliance.erase(purge=False, **a), {"subject": USER}),
    ("erase ids", lambda **a: compliance.erase(purge=False, namespace=NS, **a), {"ids": ["x"]}),
    (
        "erase_review_items",
        lambda **a: compliance.erase_review_items(purge=False, **a),
        {"namespace": NS, "status": "rejected", "subject": USER, "actor": "a"},
    ),
    ("preview", lambda **a: compliance.preview(**a), {"namespace": NS}),
    ("export", lambda **a: compliance.export(**a), {"subject": USER, "actor": "a"}),
    ("purge_expired", lambda **a: compliance.purge_expired(purge=False, **a), {"actor": "a"}),
]
CASES = [
    pytest.param(call, valid, name, id=f"{label}-{name}")
    for label, call, valid in FACADE + COMPLIANCE
    for name in valid
]


@pytest.mark.parametrize(("call", "valid", "name"), CASES)
def test_a_hostile_argument_is_refused_with_a_documented_error(call, valid, name):
    @settings(
        max_examples=15,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
    )
    @given(HOSTILE)
    def one(value):
        with contextlib.suppress(DOCUMENTED):  # anything else fails the test
            call(**{**valid, name: value})

    one()


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: compliance.erase(namespace=NS, actor="\ud800", purge=False), "actor"),
        (lambda: _mm().purge_review_queue(status=5), "review status"),
        (lambda: _mm().list_review_items(status=5), "review status"),
        (lambda: compliance.erase_review_items(status=5, purge=False), "status"),
    ],
)
def test_the_reported_cases_are_validation_errors(call, expected):
    with pytest.raises((MemoryValidationError, ErasureRequestError), match=expected):
        call()


def test_a_negative_counter_is_refused_not_stored_as_zero():
    assert _mm().save_session_summary("a summary", tokens_before=-1) is None
    assert _mm().save_session_summary("a summary", messages_summarized=-5) is None
    from memoryapp.rules import validation

    with pytest.raises(MemoryValidationError, match="tokens_before must not be negative"):
        validation.check_counter(-1, "tokens_before")
    assert validation.check_counter(None, "tokens_before") == 0
