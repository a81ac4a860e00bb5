"""The PostgreSQL backend's health check: no round trip on a healthy connection, and a
connection the server dropped is replaced before a request's first query."""

from __future__ import annotations

import time

import pytest
from django.db import connection, connections

from memoryapp.db.backends.postgresql import base

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def test_the_project_uses_the_backend():
    assert isinstance(connections["default"], base.DatabaseWrapper)
    assert connections["default"].settings_dict["CONN_HEALTH_CHECKS"] is True


@pytest.fixture
def own():
    """A connection of its own (the test's is inside pytest-django's machinery)."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict["CONN_HEALTH_CHECKS"] = True
    wrapper.settings_dict["CONN_MAX_AGE"] = 60
    wrapper.connect()
    yield wrapper
    wrapper.close()


def _new_request(wrapper) -> None:
    """What Django does between two requests of a persistent connection."""
    wrapper.close_if_unusable_or_obsolete()
    assert wrapper.connection is not None and not wrapper.health_check_done


def _backend_pid(wrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_healthy_connection_is_checked_without_a_query(own, monkeypatch):
    pid = _backend_pid(own)
    probes = []
    monkeypatch.setattr(type(own), "is_usable", lambda self: probes.append(1) or True)
    _new_request(own)
    assert _backend_pid(own) == pid  # the same connection, kept
    assert probes == []  # and no SELECT 1 was sent to check it


def test_a_connection_the_server_dropped_is_replaced_before_the_first_query(own):
    pid = _backend_pid(own)
    _new_request(own)
    with connection.cursor() as cursor:  # another session ends own's backend
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert cursor.fetchone()[0] is True
    _wait_for_farewell(own)  # the server's farewell reaches the socket: the check sees it
    new_pid = _backend_pid(own)  # no error: the request's first query runs on a new one
    assert new_pid != pid


def test_pending_input_is_what_the_socket_says(own):
    conn = own.connection
    assert base.has_pending_input(conn.pgconn.socket) is False
    conn.pgconn.send_query(b"SELECT 1")  # an answer now waits on the socket
    conn.pgconn.flush()
    for _ in range(200):
        if base.has_pending_input(conn.pgconn.socket):
            break
        time.sleep(0.01)
    assert base.has_pending_input(conn.pgconn.socket) is True
    own.close()  # the protocol state is ours, not psycopg's: do not reuse it


def test_a_quiet_socket_stands_in_for_select_1_only_for_a_while(own, monkeypatch):
    """A server that vanished without a word leaves the socket quiet: past
    SOCKET_CHECK_SECONDS since the last round trip that proved it, SELECT 1 runs again."""
    probes = []
    real = type(own).is_usable
    monkeypatch.setattr(type(own), "is_usable", lambda self: probes.append(1) or real(self))
    _new_request(own)
    own.close_if_health_check_failed()
    assert probes == []  # just connected: proven
    own._proven_at -= base.SOCKET_CHECK_SECONDS + 1
    _new_request(own)
    own.close_if_health_check_failed()
    assert probes == [1] and own.connection is not None  # SELECT 1, which proves it again
    _new_request(own)
    own.close_if_health_check_failed()
    assert probes == [1]


def _wait_for_farewell(wrapper) -> None:
    for _ in range(200):
        if base.has_pending_input(wrapper.connection.pgconn.socket):
            return
        time.sleep(0.01)


def test_the_snapshot_read_checks_the_connection_like_any_first_statement(own):
    """db.snapshots reads through a raw psycopg cursor; as the first statement of a request
    it still replaces a connection the server dropped, as Django's cursors do."""
    from memoryapp.db import snapshots

    default = connections["default"]
    default.ensure_connection()
    pid = _backend_pid(default)
    _new_request(default)
    with own.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    _wait_for_farewell(default)
    counters, stored = snapshots.read_with_counters("default", [("acme/web", "project")], [])
    assert counters == {("acme/web", "project"): 0} and stored == {}
    assert _backend_pid(default) != pid
