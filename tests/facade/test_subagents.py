"""Sub-agent (child) managers and ephemeral managers (docs/behaviour.md §7)."""

from __future__ import annotations

import gc

import pytest

from memoryapp import MemoryManager
from memoryapp.models import Memory, ReviewItem, SessionSummary

pytestmark = pytest.mark.django_db(databases=["default", "memoryapp_ephemeral"])

EPH = "memoryapp_ephemeral"


def test_child_writes_go_to_the_parent():
    parent = MemoryManager(project="acme/web", user="acme/alice")
    kid = parent.child()
    assert kid.save_memory("Build tool", "make") == "Saved memory: build_tool"
    assert kid.save_memory("user_tz", "Europe/Paris") == "Saved memory: user_tz"
    assert [m.key_normalized for m in parent.get_all_entries()] == ["build_tool", "user_tz"]
    assert Memory.objects.get(key_normalized="user_tz").namespace == "acme/alice"
    assert not Memory.objects.using(EPH).exists()


def test_child_summaries_and_candidates_stay_in_the_throwaway_store():
    parent = MemoryManager(project="acme/web", user="acme/alice")
    kid = parent.child()
    kid.save_session_summary("the sub-agent's summary")
    kid.crystallize_user_messages([{"role": "user", "content": "Never use tabs"}])
    assert not SessionSummary.objects.exists()
    assert not ReviewItem.objects.exists()
    assert SessionSummary.objects.using(EPH).count() == 1
    assert parent.get_cross_session_tail() == ""
    kid.close()
    assert not SessionSummary.objects.using(EPH).exists()
    assert not ReviewItem.objects.using(EPH).exists()


def test_child_reads_see_nothing():
    parent = MemoryManager(project="acme/web")
    parent.upsert("visible to parent", "yes")
    kid = parent.child()
    kid.save_memory("written by kid", "yes")
    assert kid.get_all_entries() == []
    assert kid.search("yes") == []
    assert kid.filter_by_tag("x") == []
    kid.archive_session()
    assert kid.get_cross_session_tail() == ""


def test_child_without_a_route_has_no_save_memory():
    class NoTool(MemoryManager):
        save_memory = None

    kid = NoTool(project="p").child()
    assert not hasattr(kid, "save_memory")
    with pytest.raises(AttributeError):
        kid.save_memory("k", "v")


def test_ephemeral_works_for_the_session_and_leaves_nothing():
    mm = MemoryManager.ephemeral()
    assert mm.save_memory("scratch", "value") == "Saved memory: scratch"
    assert mm.save_memory("user_name", "Bob") == "Saved memory: user_name"
    assert [m.key_normalized for m in mm.get_all_entries()] == ["scratch", "user_name"]
    assert mm.search("bob")[0].key_normalized == "user_name"
    mm.save_session_summary("s")
    assert not Memory.objects.exists() and not SessionSummary.objects.exists()
    namespaces = (mm.project, mm.user)
    del mm
    gc.collect()
    assert not Memory.objects.using(EPH).filter(namespace__in=namespaces).exists()
    assert not SessionSummary.objects.using(EPH).exists()


def test_two_ephemeral_managers_do_not_share():
    a, b = MemoryManager.ephemeral(), MemoryManager.ephemeral()
    a.upsert("k", "from a")
    assert b.get_all_entries() == []
    a.close()
    b.close()


def test_a_host_test_without_the_alias_gets_an_error_that_says_what_to_add():
    """A host's Django TestCase that allows only 'default' (pytest-django's plain
    ``django_db`` marker does the same) is told the marker to add."""
    import io
    import unittest

    from django.test import TestCase
    from django.test.testcases import DatabaseOperationForbidden

    from memoryapp.facade.ephemeral import ephemeral_alias

    ephemeral_alias()  # registered earlier in the process, as in a real test session

    class HostTest(TestCase):
        databases = {"default"}

        def test_child(self):
            with self.assertRaisesMessage(
                DatabaseOperationForbidden, "databases=['default', 'memoryapp_ephemeral']"
            ):
                MemoryManager(project="host").child()

        def test_plain_managers_still_work(self):
            MemoryManager(project="host").upsert("k", "v")

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(HostTest)
    result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    assert result.testsRun == 2
