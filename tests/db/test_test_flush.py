"""The tests' narrowed PostgreSQL flush (tests/_fast_flush.py) empties what a full one empties.

The byte-scanning erasure tests rely on it: a flush that skipped a table holding a
previous test's bytes would let them find another test's "erased" value.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.models import Memory
from tests import _fast_flush

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def _flush() -> list[str]:
    """Django's test flush; returns the TRUNCATE statements it ran."""
    with CaptureQueriesContext(connection) as queries:
        call_command("flush", verbosity=0, interactive=False, reset_sequences=False)
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith("TRUNCATE")]


def _tables() -> list[str]:
    return connection.introspection.django_table_names(only_existing=True, include_views=False)


def test_a_flush_after_writes_truncates_the_changed_leaves_only_and_leaves_them_as_new():
    _flush()  # the first flush of the database is Django's own, then the empty sizes are noted
    MemoryManager(project="flushcheck/app").upsert(key="k", value="a value to forget")
    User.objects.create(username="flushcheck")  # a plain table, not partitioned
    empty = _fast_flush._EMPTY_SIZES[connection.settings_dict["NAME"]]
    changed = _fast_flush.changed_leaves(connection, _tables())
    leaf = next(leaf for leaf in changed if leaf.startswith("memories_p"))

    (statement,) = _flush()

    assert re.findall(r"\bmemories_p\d+\b", statement) == [leaf]  # not all 64 partitions
    assert re.search(r"\bauth_user\b", statement)
    assert not Memory.objects.exists() and not User.objects.exists()
    sizes = _fast_flush.leaf_sizes(connection, _tables())
    assert sizes[leaf] == empty[leaf]  # the partition's files are as a TRUNCATE leaves them


def test_a_rolled_back_write_still_counts_as_a_change():
    _flush()
    with pytest.raises(RuntimeError), transaction.atomic():
        MemoryManager(project="flushcheck/app").upsert(key="k", value="rolled back bytes")
        raise RuntimeError("roll back")

    assert not Memory.objects.exists()
    assert any(
        leaf.startswith("memories_p") for leaf in _fast_flush.changed_leaves(connection, _tables())
    )


def test_a_table_holding_rows_after_a_flush_is_truncated_every_time():
    """schema_meta keeps rows in the same pages (a trigger rewrites its counter as
    ``memories`` is truncated): its size cannot tell a new row, so it is always emptied."""
    from memoryapp.db import meta

    _flush()
    assert meta.claim_interval("flushcheck_slot", 1000.0, 60) == 0.0
    _flush()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM schema_meta WHERE key = 'flushcheck_slot'")
        assert cursor.fetchone()[0] == 0
