"""The facade methods a host of Agentao calls: same names, arguments and results.

Each test runs the same operations on Agentao 0.5.17's ``MemoryManager`` (over its
SQLite stores) and on ours, and compares what a host sees.
"""

from __future__ import annotations

import time

import pytest
from django.db import DatabaseError, connection

from memoryapp import MemoryManager

agentao_memory = pytest.importorskip("agentao.memory")
from agentao.memory import MemoryManager as AgentaoManager  # noqa: E402
from agentao.memory import SQLiteMemoryStore  # noqa: E402
from agentao.memory.models import SaveMemoryRequest  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pair(tmp_path):
    theirs = AgentaoManager(
        project_store=SQLiteMemoryStore(str(tmp_path / "project.db")),
        user_store=SQLiteMemoryStore(str(tmp_path / "user.db")),
    )
    ours = MemoryManager(project="acme/web", user="acme/bob")
    return theirs, ours


def _tick():
    # Agentao stamps whole seconds and orders by the stamp alone: ties would be
    # SQLite's choice, so each write gets its own second.
    time.sleep(1.01)


def _summaries(pair, texts):
    for text in texts:
        for mm in pair:
            mm.save_session_summary(text, 100, 4)
        _tick()


def test_session_summary_methods_answer_as_agentaos(pair):
    theirs, ours = pair
    for mm in pair:
        mm.archive_session("s1")
    _summaries(pair, ["one", "two", "three"])
    for mm in pair:
        mm.archive_session("s2")
    _summaries(pair, ["four"])

    def view(mm):
        return {
            "recent": [r.summary_text for r in mm.get_recent_session_summaries()],
            "recent_s1_2": [
                r.summary_text for r in mm.get_recent_session_summaries(session_id="s1", limit=2)
            ],
            "remain": mm.session_summaries_remain(),
        }

    assert (
        view(theirs)
        == view(ours)
        == {
            "recent": ["four"],
            "recent_s1_2": ["three", "two"],
            "remain": True,
        }
    )
    for mm in pair:
        assert mm.clear_session() is None
    assert view(theirs) == view(ours)
    assert view(ours)["recent"] == [] and view(ours)["recent_s1_2"] == ["three", "two"]
    assert theirs.clear_all_session_summaries() == ours.clear_all_session_summaries() == 3
    assert view(theirs) == view(ours) == {"recent": [], "recent_s1_2": [], "remain": False}
    assert theirs.clear_all_session_summaries() == ours.clear_all_session_summaries() == 0


def test_the_stable_selection_takes_recent_project_limit(pair):
    theirs, ours = pair
    saves = [("user_lang", "English", [])] + [
        (f"fact {i}", f"the service listens on port {8000 + i}", ["project_fact"]) for i in range(4)
    ]
    saves += [("Deploy day", "Tuesday", ["decision"])]
    for key, value, tags in saves:
        theirs.upsert(SaveMemoryRequest(key=key, value=value, tags=tags))
        ours.upsert(key, value, tags)
        _tick()
    for limit in (0, 1, 3, 10):
        expected = [r.title for r in theirs.get_stable_entries(recent_project_limit=limit)]
        assert [m.title for m in ours.get_stable_entries(recent_project_limit=limit)] == expected
        assert len(expected) == 2 + min(limit, 4)
    assert len(ours.get_stable_entries()) == 5  # 3 by default, as Agentao's


def test_store_change_version_moves_on_another_writers_write(pair):
    theirs, ours = pair
    before_theirs, before_ours = theirs.store_change_version(), ours.store_change_version()
    assert len(before_theirs) == len(before_ours) == 2
    AgentaoManager(project_store=theirs.project_store).upsert(SaveMemoryRequest(key="k", value="v"))
    MemoryManager(project="acme/web").upsert("k", "v")  # another manager, same store
    assert theirs.store_change_version() != before_theirs
    assert ours.store_change_version() != before_ours
    assert ours.write_version == 0  # this manager wrote nothing
    assert len(MemoryManager(project="acme/web").store_change_version()) == 1  # no user store


def test_read_failures_and_noted_problems(pair):
    _, ours = pair
    assert ours.read_failures == 0

    def broken(execute, sql, params, many, context):
        if "memories" in sql:
            raise DatabaseError("disk I/O error")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(broken):
        assert ours.get_stable_entries() == []
        assert ours.recall("port", top_k=3) == []
    assert ours.read_failures == 2
    assert ours.recall_error_count == 1 and ours.last_recall_error == "DatabaseError"
    assert ours.take_store_problems()  # reported once ...
    assert ours.take_store_problems() == []
    assert ours.note_store_problem("user", "the user store could not be opened") is True
    assert ours.note_store_problem("user", "again") is False
    ours.get_all_entries()  # a good read does not clear what the host noted
    assert ours.take_store_problems() == ["the user store could not be opened"]


def test_recall_counts_its_hits():
    mm = MemoryManager(project="acme/web")
    mm.upsert("port", "the service listens on port 8000")
    mm.upsert("other", "the service listens on port 9000")
    assert len(mm.recall("port service", top_k=5)) == 2
    mm.recall("nothing zzz")
    assert mm.recall_count == 2 and mm.recall_error_count == 0
