"""Reads served by a real streaming standby, and the primary whenever the standby would be wrong.

Each test gets the standby's copy of the test database as ``replica_1`` (``replica_db``).
A write by "another client" runs in its own thread: a thread is its own caller, so the
test's thread has not written and may read the replica.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, router
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.db import read_your_writes, replicas
from memoryapp.models import Memory
from memoryapp.ops.checks import check_replicas
from tests._admin_support import client_for, make_staff
from tests._erasure_support import marker

PROJECT = "acme/web"


@pytest.fixture(autouse=True)
def _fresh_measurements():
    replicas.forget()
    yield
    replicas.forget()


def another_client_writes(key: str, text: str) -> None:
    """Save a memory from another thread (another caller), its connection closed after."""
    failures: list[BaseException] = []

    def body():
        try:
            MemoryManager(project=PROJECT).upsert(key, text)
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            failures.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert not failures, failures


def standby_last_query(replica_db) -> str:
    """The last statement of the replica alias's backend, as the standby itself reports it."""
    pid = connections[replica_db.alias].connection.info.backend_pid  # no statement sent
    rows = replica_db.sql("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
    return rows[0][0]


def test_router_choices_per_operation(replica_db):
    from django.contrib.auth import get_user_model

    replica_db.wait()
    assert Memory.objects.all().db == "default"  # a read that did not say it tolerates lag
    with read_your_writes.lag_tolerant():
        assert router.db_for_read(Memory) == replica_db.alias
        assert router.db_for_read(get_user_model()) in (None, "default")  # not memoryapp's
        assert router.db_for_write(Memory) == "default"
        with read_your_writes.primary_reads():
            assert Memory.objects.all().db == "default"
    assert router.allow_migrate(replica_db.alias, "memoryapp") is False


def test_a_recall_reads_the_standby_while_the_primary_serves_writes(replica_db):
    key = marker("recall")
    another_client_writes(key, f"the standby answers {key}")
    replica_db.wait()
    mm = MemoryManager(project=PROJECT)
    with CaptureQueriesContext(connections["default"]) as on_primary:
        hits = mm.recall(f"standby answers {key}")
    assert [h.title for h in hits] == [key]
    # The recall's reads ran on the standby (pg_stat_activity there shows the last one).
    assert "FROM memories" in standby_last_query(replica_db)
    # The primary was asked for its WAL position (the lag measurement) and, the slice
    # being cold, stored the index built from the standby's rows (a cache fill:
    # MEMORYAPP_RECALL_SNAPSHOTS): nothing of the slice's rows was read there.
    cold = [q["sql"] for q in on_primary.captured_queries]
    assert not [q for q in cold if "FROM memories" in q or 'FROM "memories"' in q], cold
    assert any("pg_current_wal_lsn" in q for q in cold), cold
    # A cache fill is not the caller's write: its reads may still go to the standby.
    assert read_your_writes.caller().dirty == set()
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == replica_db.alias
    # Warm: another client's write, replayed; the held index catches up from the standby
    # and the primary is asked for its WAL position only.
    second = marker("recall")
    another_client_writes(second, f"the standby answers again {second}")
    replica_db.wait()
    replicas.forget()
    with CaptureQueriesContext(connections["default"]) as on_primary:
        hits = mm.recall(f"standby answers again {second}")
    assert [h.title for h in hits][:1] == [second]
    warm = [q["sql"] for q in on_primary.captured_queries]
    assert warm and all("pg_current_wal_lsn" in q for q in warm), warm
    assert "FROM memories" in standby_last_query(replica_db)


def test_own_write_then_recall_is_never_stale(replica_db):
    replica_db.standby.pause_replay()  # the standby will not have the write
    mm = MemoryManager(project=PROJECT)
    key = marker("own")
    mm.upsert(key, f"my own fresh write {key}")
    hits = mm.recall(f"own fresh write {key}")
    assert [h.title for h in hits] == [key]
    assert replicas.read_alias() == "default"  # not even outside a lag-tolerant scope
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == "default"
    replica_db.standby.resume_replay()
    replica_db.wait()
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == replica_db.alias  # replayed past the write


def test_an_api_write_then_list_by_the_same_client_is_never_stale(replica_db):
    acme = token_client("acme-replica", ["acme/"], write=True)
    other = token_client("acme-other", ["acme/"], write=True)
    # A token's first use records it (a write, which pins that request to the primary):
    # done before the standby stops replaying, so the next reads of `other` write nothing.
    assert other.get("/api/memories/", {"namespace": PROJECT}).status_code == 200
    replica_db.wait()
    replica_db.standby.pause_replay()
    key = marker("api")
    r = acme.post("/api/memories/", {"project": PROJECT, "key": key, "value": key}, format="json")
    assert r.status_code == 201, r.content
    listed = acme.get("/api/memories/", {"namespace": PROJECT, "page_size": 100})
    assert key in {row["title"] for row in listed.json()["results"]}
    # Another client reads the (within the bound) lagging standby: it does not see it yet.
    seen = other.get("/api/memories/", {"namespace": PROJECT, "page_size": 100})
    assert key not in {row["title"] for row in seen.json()["results"]}
    replica_db.standby.resume_replay()
    replica_db.wait()
    replicas.forget()
    seen = other.get("/api/memories/", {"namespace": PROJECT, "page_size": 100})
    assert key in {row["title"] for row in seen.json()["results"]}


def test_a_replica_beyond_the_lag_bound_is_skipped(replica_db, settings):
    settings.MEMORYAPP_REPLICA_MAX_LAG = 0.5
    replica_db.standby.pause_replay()
    key = marker("lag")
    another_client_writes(key, f"written while the standby lags {key}")
    time.sleep(1.0)  # the standby's last replayed commit is now older than the bound
    found = replicas.status(replica_db.alias, fresh=True)
    assert not found.usable and found.reason.startswith("lags"), found
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == "default"
    hits = MemoryManager(project=PROJECT).recall(f"standby lags {key}")
    assert [h.title for h in hits] == [key]  # visible: the primary served
    assert [m.id for m in check_replicas(databases=["default"])] == ["memoryapp.W010"]


def test_within_the_bound_a_lagging_replica_serves_other_clients(replica_db, settings):
    settings.MEMORYAPP_REPLICA_MAX_LAG = 3600
    key = marker("stale")
    replica_db.standby.pause_replay()
    another_client_writes(key, f"not replayed yet {key}")
    hits = MemoryManager(project=PROJECT).recall(f"not replayed yet {key}")
    assert hits == []  # the standby served, and it lags (tolerated: another client's write)


def test_a_stopped_replica_is_skipped_and_nothing_fails(spare_replica_db, settings):
    # A standby of its own: stopping the shared one took it down for every later test.
    replica_db = spare_replica_db
    settings.MEMORYAPP_REPLICA_CHECK_INTERVAL = 3600  # measured usable, and kept
    acme = token_client("acme-down", ["acme/"])
    admin = client_for(make_staff("replica-down-admin", superuser=True))
    assert acme.get("/api/memories/", {"namespace": PROJECT}).status_code == 200  # token noted
    read_your_writes.reset()  # the clients were made here: this thread reads as a reader
    key = marker("down")
    another_client_writes(key, f"the standby is down {key}")
    replica_db.wait()  # every write above replayed (the API client's token use included)
    replicas.forget()
    mm = MemoryManager(project=PROJECT)
    assert [h.title for h in mm.recall(f"standby is down {key}")] == [key]  # from the standby
    assert "FROM memories" in standby_last_query(replica_db)
    measured = replicas.status(replica_db.alias)
    assert measured.usable
    replica_db.standby.stop_server()
    try:
        from memoryapp.recall.cache import INDEXES

        INDEXES.clear()  # the next recall must read rows, not answer from the cache
        assert [h.title for h in mm.recall(f"standby is down {key}")] == [key]
        assert replicas.status(replica_db.alias).reason == "a read failed"
        # Each read below is sent to the standby (measured usable a moment ago), which is
        # down: it fails there and runs again on the primary.
        for name, read in (
            ("api list", lambda: acme.get("/api/memories/", {"namespace": PROJECT})),
            ("admin changelist", lambda: admin.get("/admin/memoryapp/memory/")),
            ("export", lambda: acme.get("/api/exports/", {"namespace": PROJECT})),
        ):
            replicas._statuses[replica_db.alias] = measured
            with read_your_writes.lag_tolerant():
                assert replicas.read_alias() == replica_db.alias, name
            r = read()
            assert r.status_code == 200, (name, r.content[:300])
            assert key in r.content.decode(), name
            assert replicas.status(replica_db.alias).reason == "a read failed", name
    finally:
        replica_db.standby.start_server()
    replicas.forget()
    replica_db.wait()
    assert replicas.status(replica_db.alias).usable  # back, measured again


def test_the_system_check_reports_the_replica_in_recovery(replica_db):
    messages = check_replicas(databases=["default"])
    assert [m.id for m in messages] == ["memoryapp.I010"]
    assert "in recovery" in messages[0].msg
