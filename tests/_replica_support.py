"""A real streaming standby of the test database, for the replica tests (and any other folder).

Fixtures (registered in ``tests/conftest.py`` through ``pytest_plugins``):

- ``pg_standby`` (session): a hot standby of the local PostgreSQL cluster, made by
  ``scripts/pg_standby.sh start PORT`` on a free port and dropped at the end of the run
  (``stop PORT``); a :class:`Standby`. A standby left by a killed run is dropped first
  (``prune``). On the SQLite pass it skips (a replica is a PostgreSQL feature); where no
  standby can be made on PostgreSQL it says why and skips, or fails under ``CI=true``.
- ``spare_standby`` (function): another standby of its own, dropped after the test (a
  promotion cannot be undone, a stopped server must not take the shared one down).
- ``replica_db`` (function, transactional): the standby's copy of the *test* database
  registered as the read-only alias ``replica_1`` and listed in
  ``MEMORYAPP_REPLICA_DATABASES``; a :class:`ReplicaDB`. pytest-django creates the test
  database on the primary; the fixture waits until the standby has replayed it. The test's
  data is committed (a replica only ever sees committed rows), hence transactional.
- ``spare_replica_db`` (function): the same on a ``spare_standby`` (a test that stops it).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.db import connection, connections

from memoryapp.db import read_your_writes, replicas

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pg_standby.sh"
REPLICA_ALIAS = "replica_1"
PRIMARY_HOST, PRIMARY_PORT = "127.0.0.1", 5432


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def standby_impossible() -> str | None:
    """Why no standby can be made here (PostgreSQL pass), or None when it can be tried."""
    settings = connection.settings_dict
    host, port = settings.get("HOST") or "", str(settings.get("PORT") or "5432")
    if host not in {"127.0.0.1", "localhost"} or port != str(PRIMARY_PORT):
        return f"the test database is not the local cluster at {PRIMARY_HOST}:{PRIMARY_PORT}"
    missing = [t for t in ("pg_createcluster", "pg_basebackup", "psql") if not shutil.which(t)]
    if missing:
        return f"{', '.join(missing)} not installed (Debian's postgresql-common)"
    if os.geteuid() != 0:
        return "not root: scripts/pg_standby.sh creates a cluster as the postgres user"
    return None


def no_standby(reason: str):
    """Skip loudly, or fail under CI=true: the replica tests did not run."""
    message = f"NO STREAMING STANDBY: the replica tests did not run: {reason}"
    if _under_ci():
        pytest.fail(message + " (failing: CI=true)", pytrace=False)
    warnings.warn(message, stacklevel=2)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _script(*args: str, owner: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if owner is not None:
        env["PG_STANDBY_OWNER"] = str(owner)
    try:
        return subprocess.run(
            [str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=900, check=False
        )
    except subprocess.TimeoutExpired as exc:  # reported like any other failure to start
        return subprocess.CompletedProcess(exc.cmd, 124, str(exc.stdout or ""), "timed out")


@dataclass
class Standby:
    """A running hot standby of the local cluster (127.0.0.1:``port``)."""

    port: int

    def connect(self, dbname: str = "postgres", **kwargs) -> psycopg.Connection:
        """A superuser connection to the standby (autocommit)."""
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user="postgres",
            dbname=dbname,
            autocommit=True,
            connect_timeout=5,
            **kwargs,
        )

    def sql(self, statement: str, params=(), dbname: str = "postgres") -> list[tuple]:
        """Run one statement on the standby; its rows."""
        with self.connect(dbname) as conn, conn.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    @staticmethod
    def primary_lsn() -> str:
        """The primary's current WAL position."""
        with psycopg.connect(
            host=PRIMARY_HOST, port=PRIMARY_PORT, user="postgres", dbname="postgres"
        ) as conn:
            return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]

    def wait_for_replay(self, lsn: str | None = None, timeout: float = 180.0) -> None:
        """Wait until the standby has replayed the primary's WAL up to ``lsn`` (default: now)."""
        lsn = lsn or self.primary_lsn()
        deadline = time.monotonic() + timeout
        while True:
            rows = self.sql(
                "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0", [lsn]
            )
            if rows and rows[0][0]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby on {self.port} did not replay {lsn}")
            time.sleep(0.05)

    def wait_for_database(self, name: str, timeout: float = 180.0) -> None:
        """Wait until database ``name`` (created on the primary) exists on the standby."""
        deadline = time.monotonic() + timeout
        while not self.sql("SELECT 1 FROM pg_database WHERE datname = %s", [name]):
            if time.monotonic() > deadline:
                raise AssertionError(f"database {name} never reached the standby on {self.port}")
            time.sleep(0.1)
        self.wait_for_replay(timeout=timeout)

    def pause_replay(self) -> None:
        """Stop applying WAL (it is still received): the standby lags from now on."""
        self.sql("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        """Apply WAL again (no-op when not paused or no longer in recovery)."""
        with contextlib.suppress(psycopg.Error):
            self.sql("SELECT pg_wal_replay_resume()")

    def stop_server(self) -> None:
        """Stop the standby's server (the cluster stays; :meth:`start_server` brings it back)."""
        subprocess.run(
            [
                "pg_ctlcluster",
                "--skip-systemctl-redirect",
                self.version,
                self.name,
                "stop",
                "-m",
                "fast",
            ],
            check=True,
            capture_output=True,
        )

    def start_server(self) -> None:
        """Start the stopped standby again and wait until it answers."""
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, "start"]
            + ["--", "-t", "300"],
            check=True,
            capture_output=True,
        )
        deadline = time.monotonic() + 300
        while True:
            with contextlib.suppress(psycopg.Error):
                self.sql("SELECT 1")
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby on {self.port} did not come back")
            time.sleep(0.2)

    def in_recovery(self) -> bool:
        """Whether the server is still a standby (not promoted)."""
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])

    @property
    def name(self) -> str:
        """The cluster's name (``standby_PORT``)."""
        return f"standby_{self.port}"

    @property
    def version(self) -> str:
        """The cluster's major version: the primary's (a standby is of the same major).

        Asked of the primary, never of the standby itself: :meth:`start_server` needs it
        while the standby is stopped (asking the stopped server failed, and the standby
        of every later test stayed down).
        """
        with psycopg.connect(
            host=PRIMARY_HOST, port=PRIMARY_PORT, user="postgres", dbname="postgres"
        ) as conn:
            num = int(conn.execute("SHOW server_version_num").fetchone()[0])
        return str(num // 10000)


@pytest.fixture(scope="session")
def pg_standby():
    """A streaming hot standby of the local cluster for the whole run; dropped at the end."""
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL: a streaming replica is a PostgreSQL feature"
            " (this pass runs on SQLite)"
        )
    reason = standby_impossible()
    if reason:
        no_standby(reason)
    _script("prune")  # standbys of killed runs (their owner process is gone)
    port = _free_port()
    started = _script("start", str(port), owner=os.getpid())
    if started.returncode != 0:
        _script("stop", str(port))
        no_standby(f"scripts/pg_standby.sh start {port} failed:\n{started.stdout}{started.stderr}")
    standby = Standby(port)
    try:
        yield standby
    finally:
        stopped = _script("stop", str(port))
        if stopped.returncode != 0:
            warnings.warn(f"could not drop the standby on {port}: {stopped.stderr}", stacklevel=1)


@pytest.fixture
def spare_standby(pg_standby):
    """A second standby of its own, for a test that changes it for good (a promotion)."""
    port = _free_port()
    started = _script("start", str(port), owner=os.getpid())
    if started.returncode != 0:
        _script("stop", str(port))
        no_standby(f"scripts/pg_standby.sh start {port} failed:\n{started.stdout}{started.stderr}")
    try:
        yield Standby(port)
    finally:
        _script("stop", str(port))


@dataclass
class ReplicaDB:
    """The standby's copy of the test database, registered as a database alias."""

    alias: str
    standby: Standby
    dbname: str

    def wait(self, timeout: float = 180.0) -> None:
        """Wait until the standby has replayed everything the primary committed so far."""
        self.standby.wait_for_replay(timeout=timeout)

    def sql(self, statement: str, params=()) -> list[tuple]:
        """Run one statement on the standby's test database (outside Django)."""
        return self.standby.sql(statement, params, dbname=self.dbname)


def register_alias(alias: str, port: int, *, dbname: str | None = None) -> str:
    """Register ``alias``: the primary's test database settings on another server (``port``).

    Listed only long enough to build the connection: Django's test cases let such a
    "dynamically created" connection through and never flush it (it is read-only).
    """
    settings = copy.deepcopy(connections.settings["default"])
    settings.update(HOST="127.0.0.1", PORT=str(port), CONN_MAX_AGE=0)
    settings["NAME"] = dbname or connections["default"].settings_dict["NAME"]
    settings["OPTIONS"] = {**settings.get("OPTIONS", {}), "connect_timeout": 2}
    connections.settings[alias] = settings
    connections[alias]  # noqa: B018 - instantiate while the alias is configured
    del connections.settings[alias]
    return alias


def unregister_alias(alias: str) -> None:
    """Close and forget an alias made by :func:`register_alias`."""
    with contextlib.suppress(Exception):
        connections[alias].close()
    with contextlib.suppress(AttributeError, KeyError):
        del connections[alias]


def _as_replica(standby: Standby, settings):
    """Register ``standby``'s copy of the test database as ``replica_1``; the ReplicaDB."""
    dbname = connections["default"].settings_dict["NAME"]
    standby.resume_replay()  # a test that paused replay and failed must not stall the next
    standby.wait_for_database(dbname)
    register_alias(REPLICA_ALIAS, standby.port, dbname=dbname)
    settings.MEMORYAPP_REPLICA_DATABASES = [REPLICA_ALIAS]
    # The shared machine's other test runs create databases on the primary, whose replay
    # can hold a standby back for many seconds: a test about lag sets its own bound.
    settings.MEMORYAPP_REPLICA_MAX_LAG = 600
    read_your_writes.reset()  # this test's thread starts as a caller that wrote nothing
    replicas.forget()
    return ReplicaDB(REPLICA_ALIAS, standby, dbname)


def _unregister_replica(standby: Standby) -> None:
    with contextlib.suppress(psycopg.Error):
        standby.resume_replay()
    unregister_alias(REPLICA_ALIAS)
    read_your_writes.reset()
    replicas.forget()


@pytest.fixture
def replica_db(pg_standby, transactional_db, settings):
    """The standby's copy of the test database as alias ``replica_1``, listed as a replica."""
    try:
        yield _as_replica(pg_standby, settings)
    finally:
        _unregister_replica(pg_standby)


@pytest.fixture
def spare_replica_db(spare_standby, transactional_db, settings):
    """:func:`replica_db` on a standby of its own: for a test that stops its server (the
    shared standby then stays up for every later test, whatever happens to this one)."""
    try:
        yield _as_replica(spare_standby, settings)
    finally:
        _unregister_replica(spare_standby)
