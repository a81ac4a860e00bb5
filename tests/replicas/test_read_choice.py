"""Which database serves a read, without a standby (both vendors): every doubt reads the primary."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, router, transaction
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.db import read_your_writes, replicas
from memoryapp.db.routers import ReplicaRouter
from memoryapp.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_measurements():
    replicas.forget()
    yield
    replicas.forget()


def test_without_replicas_every_read_is_the_primarys(settings):
    settings.MEMORYAPP_REPLICA_DATABASES = []
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == "default"
        assert router.db_for_read(Memory) == "default"


def test_an_unreachable_replica_is_skipped_without_an_error(settings):
    # An alias that is not even configured: the measurement fails, the primary serves.
    settings.MEMORYAPP_REPLICA_DATABASES = ["replica_nowhere"]
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == "default"
    found = replicas.status("replica_nowhere")
    assert not found.usable and found.reason.startswith("unreachable")
    mm = MemoryManager(project="acme/web")
    mm.upsert("deploy-target", "we deploy to the blue cluster")
    assert [h.title for h in mm.recall("blue cluster deploy")] == ["deploy-target"]


def test_the_router_never_writes_or_migrates_on_a_replica(settings):
    settings.MEMORYAPP_REPLICA_DATABASES = ["replica_1"]
    rr = ReplicaRouter()
    assert rr.db_for_write(Memory) is None
    assert rr.allow_migrate("replica_1", "memoryapp") is False
    assert rr.allow_migrate("default", "memoryapp") is None


def test_a_statement_that_writes_marks_the_caller_and_a_read_does_not():
    def run(sql: str) -> set[str]:
        seen: list[set[str]] = []

        def body():  # a fresh thread: a fresh caller
            with connection.cursor() as cursor:
                cursor.execute(sql)
            seen.append(set(read_your_writes.caller().dirty))
            connection.close()

        worker = threading.Thread(target=body)
        worker.start()
        worker.join()
        return seen[0]

    assert run("SELECT 1") == set()
    assert run("UPDATE schema_meta SET value = value WHERE key = 'none'") == {"default"}


def test_a_read_inside_a_transaction_stays_on_the_primary(settings):
    settings.MEMORYAPP_REPLICA_DATABASES = ["replica_nowhere"]
    with transaction.atomic(), read_your_writes.lag_tolerant(), CaptureQueriesContext(connection):
        # Not even measured: a transaction reads its own snapshot.
        assert replicas.read_source() is None
    assert "replica_nowhere" not in replicas._statuses


def test_primary_reads_override_a_lag_tolerant_scope(settings):
    settings.MEMORYAPP_REPLICA_DATABASES = ["replica_nowhere"]
    with read_your_writes.lag_tolerant(), read_your_writes.primary_reads():
        assert not read_your_writes.replica_allowed()
    with read_your_writes.lag_tolerant():
        assert read_your_writes.replica_allowed()
    assert not read_your_writes.replica_allowed()  # outside any scope


def test_the_system_check_names_a_replica_it_cannot_use(settings):
    from memoryapp.ops.checks import check_replicas

    settings.MEMORYAPP_REPLICA_DATABASES = ["replica_nowhere"]
    assert [m.id for m in check_replicas(databases=["default"])] == ["memoryapp.E010"]
    settings.MEMORYAPP_REPLICA_DATABASES = []
    assert check_replicas(databases=["default"]) == []
