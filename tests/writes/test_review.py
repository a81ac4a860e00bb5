"""The review queue via the facade (docs/behaviour.md §6): crystallize, fold, decide, purge."""

from __future__ import annotations

import pytest
from django.db import connection

from memoryapp import MemoryManager
from memoryapp.models import Memory, ReviewItem

pytestmark = pytest.mark.django_db


def user(text):
    return {"role": "user", "content": text}


@pytest.fixture
def mm():
    return MemoryManager(project="acme/web", user="acme/alice")


def test_crystallize_writes_the_queue_never_memories(mm):
    items = mm.crystallize_user_messages(
        [user("Never use tabs for indentation."), {"role": "assistant", "content": "I prefer X"}]
    )
    assert [(i.key_normalized, i.scope, i.type) for i in items] == [
        ("constraint_not_use_tabs_for_indentation", "project", "constraint")
    ]
    item = items[0]
    # The prohibition stays one (issue #29): never "Constraint: use tabs …".
    assert item.title == "Constraint: never use tabs for indentation"
    assert item.content == "never use tabs for indentation"
    assert (item.namespace, item.subject, item.source_session) == (
        "acme/web",
        "acme/alice",
        mm.session_id,
    )
    assert item.status == "pending" and item.occurrences == 1 and item.confidence == "auto_summary"
    assert not Memory.objects.exists()


def test_chinese_decision(mm):
    (item,) = mm.crystallize_user_messages([user("我们决定使用 Docker 部署服务")])
    assert item.key_normalized == "decision_使用_docker_部署服务"
    assert item.type == "decision" and item.scope == "project"


def test_folding_adds_occurrences_and_raises_confidence(mm):
    (first,) = mm.crystallize_user_messages([user("I prefer dark mode")])
    assert first.scope == "user" and first.namespace == "acme/web"
    mm.archive_session("second-session")
    (again,) = mm.crystallize_user_messages(
        [user("I prefer dark mode"), user("I prefer dark mode")]
    )
    assert again.id == first.id
    row = ReviewItem.objects.get(pk=first.id)
    assert row.occurrences == 3 and row.confidence == "inferred"
    assert row.created_at == first.created_at
    assert row.source_session == "second-session"
    assert ReviewItem.objects.count() == 1


def test_list_orders_by_occurrences_then_newest(mm):
    mm.crystallize_user_messages([user("Always run the linter")])
    mm.crystallize_user_messages(
        [user("We decided to use PostgreSQL"), user("We decided to use PostgreSQL")]
    )
    mm.crystallize_user_messages([user("Must not commit secrets")])
    keys = [i.key_normalized for i in mm.list_review_items()]
    assert keys[0] == "decision_use_postgresql"
    assert keys[1:] == ["constraint_not_commit_secrets", "constraint_run_the_linter"]
    assert MemoryManager(project="other").list_review_items() == []


def test_approve_creates_a_crystallized_memory(mm):
    (item,) = mm.crystallize_user_messages([user("I prefer dark mode")])
    memory = mm.approve_review_item(item.id)
    assert memory.source == "crystallized" and memory.confidence == "auto_summary"
    assert memory.scope == "user" and memory.namespace == "acme/alice"
    assert memory.key_normalized == item.key_normalized and memory.content == "dark mode"
    assert ReviewItem.objects.get(pk=item.id).status == "approved"
    assert mm.approve_review_item(item.id) is None
    assert mm.reject_review_item(item.id) is False
    assert Memory.objects.count() == 1


def test_reject(mm):
    (item,) = mm.crystallize_user_messages([user("Always write tests first")])
    assert MemoryManager(project="other").reject_review_item(item.id) is False
    assert mm.reject_review_item(item.id) is True
    assert ReviewItem.objects.get(pk=item.id).status == "rejected"
    assert mm.approve_review_item(item.id) is None
    assert mm.reject_review_item("missing") is False
    assert not Memory.objects.exists()


def test_a_rejected_key_can_be_proposed_again(mm):
    (item,) = mm.crystallize_user_messages([user("Always write tests first")])
    mm.reject_review_item(item.id)
    (again,) = mm.crystallize_user_messages([user("Always write tests first")])
    assert again.id != item.id and again.status == "pending"


def _raw_count(namespace=None) -> int:
    with connection.cursor() as c:
        if namespace is None:
            c.execute("SELECT COUNT(*) FROM memory_review_queue")
        else:
            c.execute("SELECT COUNT(*) FROM memory_review_queue WHERE namespace = %s", [namespace])
        return c.fetchone()[0]


def test_purge_removes_rows_physically_and_only_in_its_namespace(mm):
    other = MemoryManager(project="globex")
    other.crystallize_user_messages([user("Never deploy on fridays")])
    a, b = mm.crystallize_user_messages([user("Never deploy on fridays"), user("I prefer tea")])
    mm.reject_review_item(a.id)
    assert mm.purge_review_queue(status="rejected") == 1
    assert _raw_count("acme/web") == 1
    assert mm.purge_review_queue() == 1
    assert _raw_count("acme/web") == 0
    assert _raw_count("globex") == 1
    with pytest.raises(ValueError):
        mm.purge_review_queue(status="bogus")
