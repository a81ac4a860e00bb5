"""The kept-row pass over a whole file (SQLite's scan; no relations named) reads the tables
that own erased values, not every table (issue #39): a fragment only another table's row
holds (an export record's actor here) stays unexplained — over-reported, never hidden."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.compliance import kept
from memoryapp.models import ExportRecord

pytestmark = pytest.mark.django_db

IN_MEMORY = b"quartzbanjo-in-a-kept-memory"
IN_RECORD = b"velvetlynx-in-an-export-record"


def test_the_whole_file_pass_reads_the_owning_tables_only():
    MemoryManager(project="acme/web").upsert("note", IN_MEMORY.decode(), scope="project")
    ExportRecord.objects.create(via="api", target_kind="subject", actor=IN_RECORD.decode())
    pieces = [IN_MEMORY, IN_RECORD, b"nowhere-at-all-fragment"]
    with CaptureQueriesContext(connection) as bounded_queries:
        assert kept.explained(DEFAULT_DB_ALIAS, pieces) == {0}
    assert kept.explained(DEFAULT_DB_ALIAS, pieces, every_table=True) == {0, 1}
    read = " ".join(q["sql"] for q in bounded_queries)
    assert "memory_export_records" not in read and "auth_user" not in read
    assert "memories" in read
    assert {"memories", "memory_events", "django_admin_log"} <= kept.OWNING_TABLES
