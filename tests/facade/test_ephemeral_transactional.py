"""A host's transactional tests that use a sub-agent: the ephemeral alias flushes at teardown.

A ``TransactionTestCase`` (pytest-django: ``transactional_db``) empties every table of every
database it uses when it ends. The ephemeral in-memory store must therefore hold the memory
tables only: a table there that points at ``auth_user`` (which the router keeps out) made the
flush fail with "no such table: main.auth_user".
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connections
from django.test import TransactionTestCase

from memoryapp import MemoryManager
from memoryapp.conf import ephemeral_database
from memoryapp.models import Memory, SessionSummary

EPH = ephemeral_database()


class SubAgentInATransactionTestCase(TransactionTestCase):
    databases = {"default", EPH}

    def test_a_child_writes_through_and_keeps_its_summary_in_the_throwaway_store(self):
        parent = MemoryManager(project="acme/web", user="acme/alice")
        kid = parent.child()
        kid.save_memory("Build tool", "make")
        kid.save_session_summary("the sub-agent's summary")
        self.assertEqual(Memory.objects.get().key_normalized, "build_tool")
        self.assertEqual(SessionSummary.objects.using(EPH).count(), 1)
        # Left in place on purpose: the teardown's flush must empty it.
        self.assertIsNotNone(kid)

    def test_the_flush_left_the_throwaway_store_empty(self):
        # Runs after the test above (alphabetical order): its rows were flushed.
        self.assertFalse(SessionSummary.objects.using(EPH).exists())
        self.assertFalse(Memory.objects.exists())


@pytest.mark.django_db(transaction=True, databases=["default", EPH])
def test_transactional_db_with_a_child_passes_teardown():
    kid = MemoryManager(project="acme/web").child()
    kid.save_session_summary("kept until the flush")
    assert SessionSummary.objects.using(EPH).count() == 1


@pytest.mark.django_db(databases=["default", EPH])
def test_the_ephemeral_alias_holds_the_memory_tables_only():
    from memoryapp.db.routers import EPHEMERAL_MODELS
    from memoryapp.facade.ephemeral import ephemeral_alias
    from memoryapp.models import ExportRecord

    alias = ephemeral_alias()
    tables = set(connections[alias].introspection.table_names())
    memory_tables = {apps.get_model("memoryapp", m)._meta.db_table for m in EPHEMERAL_MODELS}
    assert memory_tables <= tables
    # Migrations record themselves in django_migrations; nothing else is there.
    assert tables - memory_tables == {"django_migrations"}
    assert ExportRecord._meta.db_table not in tables and "auth_user" not in tables
    with connections[alias].cursor() as cursor:
        cursor.execute("PRAGMA foreign_key_check")
        assert cursor.fetchall() == []
        cursor.execute("SELECT sql FROM sqlite_master WHERE sql LIKE '%auth_user%'")
        assert cursor.fetchall() == []
