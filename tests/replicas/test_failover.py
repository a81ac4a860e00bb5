"""A replica promoted (failover) keeps working once the app's settings point at it."""

from __future__ import annotations

import time

from django.db import connections

from memoryapp import MemoryManager
from memoryapp.db import read_your_writes, replicas
from memoryapp.db.meta import read_slice_counters
from memoryapp.ops.checks import check_replicas
from tests._erasure_support import marker
from tests._replica_support import register_alias, unregister_alias

PROJECT = "acme/web"


def test_a_promoted_replica_serves_reads_and_writes_as_the_new_primary(
    spare_standby, transactional_db, settings
):
    dbname = connections["default"].settings_dict["NAME"]
    before = marker("before")
    MemoryManager(project=PROJECT).upsert(before, f"written on the old primary {before}")
    spare_standby.wait_for_database(dbname)
    # Still a replica: listed as one, it serves lag-tolerant reads.
    register_alias("replica_1", spare_standby.port, dbname=dbname)
    register_alias("promoted", spare_standby.port, dbname=dbname)
    try:
        settings.MEMORYAPP_REPLICA_DATABASES = ["replica_1"]
        settings.MEMORYAPP_REPLICA_MAX_LAG = 600
        read_your_writes.reset()
        replicas.forget()
        assert [m.id for m in check_replicas(databases=["default"])] == ["memoryapp.I010"]

        spare_standby.sql("SELECT pg_promote(true, 60)")
        deadline = time.monotonic() + 60
        while spare_standby.in_recovery():
            assert time.monotonic() < deadline, "the standby was not promoted"
            time.sleep(0.2)

        # Left listed as a replica, the promoted server is skipped (no longer in recovery).
        replicas.forget()
        assert replicas.status("replica_1").reason.startswith("not in recovery")
        assert [m.id for m in check_replicas(databases=["default"])] == ["memoryapp.W010"]

        # DATABASE_URL pointed at it (here: the alias the app uses): it has the old
        # primary's data, takes writes, and its counters and recall work.
        settings.MEMORYAPP_REPLICA_DATABASES = []
        mm = MemoryManager(project=PROJECT, using="promoted")
        assert [h.title for h in mm.recall(f"old primary {before}")] == [before]
        counter = read_slice_counters("promoted", [(PROJECT, "project")])[(PROJECT, "project")]
        after = marker("after")
        mm.upsert(after, f"written on the promoted server {after}")
        moved = read_slice_counters("promoted", [(PROJECT, "project")])[(PROJECT, "project")]
        assert moved != counter  # a random version at every change, never ordered
        assert [h.title for h in mm.recall(f"promoted server {after}")] == [after]
        fresh = MemoryManager(project=PROJECT, using="promoted")  # another manager, same cache
        assert {m.title for m in fresh.get_all_entries()} >= {before, after}
    finally:
        unregister_alias("replica_1")
        unregister_alias("promoted")
        read_your_writes.reset()
        replicas.forget()
