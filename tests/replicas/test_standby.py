"""The standby the replica tests use is real: in recovery, streaming, replaying."""

from __future__ import annotations

from django.db import connections

from memoryapp.models import Memory
from tests._erasure_support import marker


def test_the_standby_streams_from_the_primary(pg_standby):
    assert pg_standby.in_recovery()
    assert pg_standby.sql("SELECT status FROM pg_stat_wal_receiver") == [("streaming",)]


def test_the_replica_alias_sees_committed_rows_once_replayed(replica_db):
    key = marker("standby")
    Memory.objects.create(
        namespace="acme/web", scope="project", key_normalized=key, title=key, content=key
    )
    replica_db.wait()
    with connections[replica_db.alias].cursor() as cursor:
        cursor.execute(
            "SELECT pg_is_in_recovery(), count(*) FROM memories WHERE key_normalized = %s", [key]
        )
        assert cursor.fetchone() == (True, 1)


def test_the_replica_alias_refuses_writes(replica_db):
    import pytest
    from django.db import InternalError

    with (
        pytest.raises(InternalError, match="read-only"),
        connections[replica_db.alias].cursor() as cursor,
    ):
        cursor.execute("DELETE FROM memories")
