"""The Python API refuses what the driver cannot send with MemoryValidationError, on both vendors.

A lone surrogate (no UTF-8 form: ``UnicodeEncodeError`` from the driver), a NUL
or an over-long actor (PostgreSQL's ``DataError``, SQLite stored it), an integer
namespace (``ProgrammingError``) and a counter beyond the integer column
(``tokens_before=2**63``) used to reach the database; PostgreSQL then logged the
failing statement with its values. ``memoryapp.rules.validation`` refuses them at the
service and facade boundary, before any statement (issue #26, Low).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.services import review as review_service

pytestmark = pytest.mark.django_db

NS = "acme/web"
BAD_ACTORS = ["\ud800", "dpo\x00", "a" * 5000, 5, None]
BAD_IDS = ["\ud800", "x\x00", "i" * 65, 7]
BAD_NAMESPACES = ["\ud800", "acme/\x00", 5, "n" * 256, "acme/../globex"]


def _refused_before_any_statement(call) -> MemoryValidationError:
    with CaptureQueriesContext(connection) as queries, pytest.raises(MemoryValidationError) as exc:
        call()
    assert len(queries) == 0, [q["sql"][:80] for q in queries]
    return exc.value


@pytest.mark.parametrize("actor", BAD_ACTORS, ids=repr)
def test_a_bad_actor_is_refused_on_every_write(actor):
    mm = MemoryManager(project=NS)
    kept = mm.upsert("kept key", "kept value")
    item = ReviewItem.objects.create(
        namespace=NS, scope="project", type="note", key_normalized="k", title="k", content="c"
    )
    events = MemoryEvent.objects.count()
    calls = [
        lambda: mm.upsert("key", "value", actor=actor),
        lambda: mm.delete(kept.pk, actor=actor),
        lambda: mm.clear(actor=actor),
        lambda: mm.approve_review_item(item.pk, actor=actor),
        lambda: mm.reject_review_item(item.pk, actor=actor),
        lambda: mm.approve_review_items([item.pk], actor=actor),
        lambda: mm.reject_review_items([item.pk], actor=actor),
        lambda: Memory.objects.upsert("key", "value", namespace=NS, actor=actor),
    ]
    for call in calls:
        assert "actor" in str(_refused_before_any_statement(call))
    assert list(Memory.objects.live().values_list("pk", flat=True)) == [kept.pk]
    assert ReviewItem.objects.get(pk=item.pk).status == "pending"
    assert MemoryEvent.objects.count() == events


def test_a_good_actor_is_recorded():
    mm = MemoryManager(project=NS)
    memory = mm.upsert("key", "value", actor="a" * 255)
    assert MemoryEvent.objects.filter(memory_id=memory.pk).get().actor == "a" * 255


@pytest.mark.parametrize("item_id", BAD_IDS, ids=repr)
def test_a_bad_review_item_id_is_refused(item_id):
    mm = MemoryManager(project=NS)
    _refused_before_any_statement(lambda: mm.approve_review_item(item_id))
    _refused_before_any_statement(lambda: mm.reject_review_item(item_id))
    _refused_before_any_statement(lambda: mm.approve_review_items([item_id]))
    _refused_before_any_statement(
        lambda: review_service.approve(item_id=item_id, namespace=NS, using="default")
    )


@pytest.mark.parametrize("namespace", BAD_NAMESPACES, ids=repr)
def test_memory_objects_upsert_refuses_a_bad_namespace_or_subject(namespace):
    _refused_before_any_statement(
        lambda: Memory.objects.upsert("key", "value", namespace=namespace)
    )
    _refused_before_any_statement(
        lambda: Memory.objects.upsert("key", "value", namespace=NS, subject=namespace)
    )
    assert not Memory.objects.exists()


@pytest.mark.parametrize("tokens", [2**63, 2**31, -(2**63) - 1 + 2**64, 1.5, "12", True])
def test_save_session_summary_refuses_a_counter_the_column_cannot_hold(tokens, caplog):
    mm = MemoryManager(project=NS)
    text = "summarymarker of the session"
    with CaptureQueriesContext(connection) as queries:
        assert mm.save_session_summary(text, tokens_before=tokens) is None
        assert mm.save_session_summary(text, messages_summarized=tokens) is None
    assert len(queries) == 0
    assert not SessionSummary.objects.exists()
    assert "summarymarker" not in caplog.text


def test_save_session_summary_counters_in_range():
    mm = MemoryManager(project=NS)
    row = mm.save_session_summary("text", tokens_before=2**31 - 1, messages_summarized=0)
    assert row is not None
    row.refresh_from_db()
    assert (row.tokens_before, row.messages_summarized) == (2**31 - 1, 0)
    # A negative count is a caller's bug: refused (issue #38), not stored as 0.
    assert mm.save_session_summary("text", messages_summarized=-5) is None
