"""A replica that dies after it was measured usable: the read runs again on the primary.

Both vendors, without a standby: the replica is an alias whose server is gone (a port
nobody listens on; on SQLite a file in a directory that does not exist), recorded as
measured usable a moment ago, so the read is sent there and fails under it. The same
with a real standby whose server stops: tests/replicas/test_replica_reads.py.
"""

from __future__ import annotations

import copy
import socket
import time

import pytest
from django.db import OperationalError, connection, connections

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import export
from memoryapp.db import read_your_writes, replicas
from memoryapp.models import Memory
from tests._admin_support import client_for, make_staff
from tests._erasure_support import marker

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT = "acme/web"
DEAD = "replica_dead"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when this returns: nobody listens


def measured_usable(alias: str = DEAD) -> None:
    """Record ``alias`` as measured usable just now (replayed everything), as a
    measurement taken a moment before its server died would have."""
    with replicas._lock:
        replicas._statuses[alias] = replicas.ReplicaStatus(
            alias, True, "", 0.0, 2**62, time.time(), time.monotonic(), time.time()
        )


@pytest.fixture
def dead_replica(settings, tmp_path):
    """A listed replica alias whose server is gone, measured usable a moment ago."""
    conf = copy.deepcopy(connections.settings["default"])
    if connection.vendor == "sqlite":
        conf["NAME"] = str(tmp_path / "no-such-directory" / "replica.sqlite3")
    else:
        conf.update(HOST="127.0.0.1", PORT=str(_closed_port()), CONN_MAX_AGE=0)
        conf["OPTIONS"] = {**conf.get("OPTIONS", {}), "connect_timeout": 2}
    connections.settings[DEAD] = conf
    connections[DEAD]  # noqa: B018 - instantiate while the alias is configured
    del connections.settings[DEAD]
    settings.MEMORYAPP_REPLICA_DATABASES = [DEAD]
    settings.MEMORYAPP_REPLICA_CHECK_INTERVAL = 3600  # the measurement is not retaken
    read_your_writes.reset()
    replicas.forget()
    measured_usable()
    try:
        yield DEAD
    finally:
        connections[DEAD].close()
        del connections[DEAD]
        read_your_writes.reset()
        replicas.forget()


def saved(key: str) -> None:
    MemoryManager(project=PROJECT).upsert(key, f"a row the primary holds {key}")
    read_your_writes.reset()  # the test's thread reads as a caller that wrote nothing


def test_the_read_is_sent_to_the_dead_replica_first(dead_replica):
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == dead_replica
    with pytest.raises(OperationalError):
        connections[dead_replica].ensure_connection()  # and that read would fail


def test_a_failed_read_on_the_replica_runs_again_on_the_primary(dead_replica):
    key = marker("fallback")
    saved(key)
    served: list[str] = []

    def read():
        alias = replicas.lag_tolerant_alias()
        served.append(alias)
        return list(Memory.objects.using(alias).filter(namespace=PROJECT).values_list("title"))

    rows = replicas.read_with_fallback(read)
    assert (key,) in rows
    assert served == [dead_replica, "default"]
    found = replicas.status(dead_replica)
    assert not found.usable and found.reason == "a read failed"
    # Marked down: the next lag-tolerant read goes to the primary straight away.
    with read_your_writes.lag_tolerant():
        assert replicas.read_alias() == "default"


def test_an_error_of_the_primary_is_not_blamed_on_the_replica(dead_replica):
    calls: list[str] = []

    def read():
        calls.append(replicas.lag_tolerant_alias())  # a replica chosen, never connected
        raise OperationalError("the primary's own failure")

    with pytest.raises(OperationalError, match="the primary's own failure"):
        replicas.read_with_fallback(read)
    assert calls == [dead_replica]  # not run again
    assert replicas.status(dead_replica).usable  # and the replica is not marked down


def test_an_api_list_survives_the_replica_dying(dead_replica):
    key = marker("list")
    saved(key)
    client = token_client("acme-fallback", ["acme/"])
    first = client.get("/api/memories/", {"namespace": PROJECT})  # records the token (a write)
    assert first.status_code == 200
    measured_usable()
    r = client.get("/api/memories/", {"namespace": PROJECT, "page_size": 100})
    assert r.status_code == 200, r.content
    assert key in {row["title"] for row in r.json()["results"]}
    assert replicas.status(dead_replica).reason == "a read failed"


def test_an_admin_changelist_survives_the_replica_dying(dead_replica):
    key = marker("admin")
    saved(key)
    admin = client_for(make_staff("fallback-admin", superuser=True))
    measured_usable()
    page = admin.get("/admin/memoryapp/memory/")
    assert page.status_code == 200
    assert key in page.content.decode()
    assert replicas.status(dead_replica).reason == "a read failed"


def test_an_export_survives_the_replica_dying(dead_replica):
    key = marker("export")
    saved(key)
    client = token_client("acme-fallback-export", ["acme/"])
    assert client.get("/api/memories/", {"namespace": PROJECT}).status_code == 200
    measured_usable()
    r = client.get("/api/exports/", {"namespace": PROJECT})
    assert r.status_code == 200, r.content
    assert key in {m["title"] for m in r.json()["memories"]}
    assert replicas.status(dead_replica).reason == "a read failed"
    # The facade's export too (a command, a worker), counting what it read.
    measured_usable()
    progress: list[tuple[int, int]] = []
    doc = export(namespace=PROJECT, actor="op", progress=lambda d, t: progress.append((d, t)))
    assert key in {m["title"] for m in doc["memories"]}
    assert progress[-1] == (doc["counts"]["memories"], doc["counts"]["memories"])
