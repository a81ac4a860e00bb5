"""Shared fixtures: vendor markers, an API client, raw SQL and extra database aliases."""

from __future__ import annotations

import contextlib
import copy
import os
import uuid

import pytest
from django.db import connection, connections

# The erasure tests' shared fixtures (two_subjects, purge_settings); the streaming standby
# of the replica tests (pg_standby, replica_db); on PostgreSQL, a flush after each
# transactional test that truncates only the tables the test changed.
pytest_plugins = ["tests._erasure_support", "tests._replica_support", "tests._fast_flush"]


# The modules whose tests purge on PostgreSQL (VACUUM FULL / pg_repack + CHECKPOINT), which
# waits for every older transaction of the whole cluster. On PostgreSQL their tests carry
# the `pg_cluster` marker, which `make test` runs alone in one process after the rest
# (`-m pg_cluster`); under pytest-xdist they also share one xdist_group, so --dist
# loadgroup runs them one after the other on one worker. A new module that purges: add it here.
PG_CLUSTER_MODULES = (
    "tests/api/test_api_erasure.py",
    "tests/api/test_api_erasure_crash.py",
    "tests/browser/test_admin_browser.py",
    "tests/browser/test_admin_layout.py",
    "tests/browser/test_officer_path.py",
    "tests/cli/test_compliance_cli.py",
    "tests/cli/test_subject_stdin.py",
    "tests/compliance/test_erasure.py",
    "tests/compliance/test_erasure_races.py",
    "tests/compliance/test_erasure_retries.py",
    "tests/compliance/test_erasure_verify.py",
    "tests/compliance/test_erasure_worker.py",
    "tests/compliance/test_escalation.py",
    "tests/compliance/test_purge_method.py",
    "tests/compliance/test_retention.py",
    "tests/db/test_partitioning.py",
    "tests/desk/test_requests_cli.py",
    "tests/desk/test_subject_request_api.py",
    "tests/recall/test_snapshots.py",
    "tests/replicas/test_erasure_copies.py",
    "tests/compliance/test_copy_checks.py",
)


def pytest_itemcollected(item):
    """On PostgreSQL, the tests of ``PG_CLUSTER_MODULES``, and every test that uses the
    erasure tests' ``purge_settings``, are ``pg_cluster`` tests (marker and xdist_group).

    Marked as each test is collected: pytest-xdist reads the marks in its own
    pytest_collection_modifyitems, which may run before this file's.
    """
    if connection.vendor != "postgresql":
        return
    purges = "purge_settings" in getattr(item, "fixturenames", ())  # the erasure tests' settings
    if purges or item.nodeid.split("::")[0] in PG_CLUSTER_MODULES:
        item.add_marker(pytest.mark.xdist_group("pg_cluster"))
        item.add_marker(pytest.mark.pg_cluster)  # `make test` runs these alone: -m pg_cluster


def pytest_runtest_setup(item):
    """Under ``--dist loadgroup``, a marked test that pytest-xdist did not group fails.

    pytest-xdist groups by appending ``@group`` to the node ids; pytest 9.2's structured
    ids silently undo that (pytest-xdist issue 1386): the purges would then run side by side.
    """
    if (
        item.config.getoption("loadgroup", default=False)
        and os.environ.get("PYTEST_XDIST_WORKER")  # -n 0: one process, nothing to group
        and item.get_closest_marker("xdist_group")
        and "@" not in item.nodeid
    ):
        pytest.fail("pytest-xdist did not group this test: install the pytest the dev extra pins")


def pytest_collection_modifyitems(config, items):
    """Skip ``postgres_only`` / ``sqlite_only`` tests on the other vendor."""
    vendor = connection.vendor
    for item in items:
        if "postgres_only" in item.keywords and vendor != "postgresql":
            item.add_marker(pytest.mark.skip(reason="PostgreSQL only (this pass runs on SQLite)"))
        if "sqlite_only" in item.keywords and vendor != "sqlite":
            item.add_marker(pytest.mark.skip(reason="SQLite only (this pass runs on PostgreSQL)"))


@pytest.fixture
def acme():
    """An API client of the ``acme/`` namespaces that may write and erase.

    A test file that needs a narrower client (write only) defines its own ``acme``.
    """
    from memoryapp.api.testing import token_client  # the API is an optional sub-app

    return token_client("acme-app", ["acme/"], write=True, erase=True)


@pytest.fixture
def raw_sql():
    """Run one statement outside the ORM on the default database; returns fetched rows."""

    def run(sql: str, params=()):
        with connection.cursor() as cursor:
            cursor.execute(sql, list(params))
            return cursor.fetchall() if cursor.description else []

    return run


@pytest.fixture
def extra_alias(tmp_path):
    """Register a throw-away SQLite database alias pointing at a file of the test's choice."""
    created: list[str] = []

    def make(path) -> str:
        alias = f"extra_{uuid.uuid4().hex[:8]}"
        base = copy.deepcopy(connections.settings["default"])
        base.update(
            ENGINE="django.db.backends.sqlite3",
            NAME=str(path),
            OPTIONS={"init_command": "PRAGMA journal_mode=WAL;", "timeout": 1},
            TEST={"NAME": str(path)},
        )
        connections.settings[alias] = base
        connections[alias]  # noqa: B018 - instantiate while the alias is configured
        # Unlisted again: Django's test case lets "dynamically created" connections
        # through, and nothing else (flush, close_all) iterates over this one.
        del connections.settings[alias]
        created.append(alias)
        return alias

    yield make
    for alias in created:
        with contextlib.suppress(Exception):
            connections[alias].close()
        with contextlib.suppress(AttributeError, KeyError):
            del connections[alias]


@pytest.fixture(autouse=True)
def _fresh_recall_indexes():
    """Each test starts with no cached recall index.

    A rolled-back test transaction also rolls back the change counter, so a
    later test could meet an index "current" for a counter value that now
    describes other rows (the same thing a restore from backup would do).
    """
    from memoryapp.recall.cache import INDEXES

    INDEXES.clear()
    yield
    INDEXES.clear()
