"""Django's PostgreSQL backend whose per-request health check needs no round trip.

With ``CONN_HEALTH_CHECKS`` on, Django checks a persistent connection before the
first query of every request by running ``SELECT 1``. On the recall path that is
one round trip of seven or eight, and on a busy machine each round trip waits for
both processes to be scheduled (bench/TENANTS.md, the HTTP cold phase).

This backend asks the connection's socket instead: an idle connection the server
has given up on (restart, ``pg_terminate_backend``, a crashed backend) has
something to read — the server's farewell message or end of file — while a
healthy idle connection has nothing. Only when there is something to read does it
run Django's own check, which then fails and reconnects (or passes, after a
harmless asynchronous message). A connection that saw an error in the previous
request is still checked by ``SELECT 1`` (Django's ``close_if_unusable_or_obsolete``
is unchanged). What neither check sees in time is a peer that vanished without
closing: ``SELECT 1`` would wait on it as long as the request's own query does.

Use it as ``ENGINE = "memoryapp.db.backends.postgresql"`` (project/settings.py
does for a ``postgres://`` ``DATABASE_URL``); everything else is Django's backend.
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base

__all__ = ["DatabaseWrapper"]


def has_pending_input(fileno: int) -> bool:
    """Whether the socket ``fileno`` has data (or end of file) to read now, without waiting."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL wrapper; the health check polls the socket (module docstring)."""

    health_check_enabled: bool  # set by Django's BaseDatabaseWrapper (not in the stubs)
    health_check_done: bool

    def close_if_health_check_failed(self) -> None:
        if (
            self.pool
            or self.connection is None
            or not self.health_check_enabled
            or self.health_check_done
        ):
            return super().close_if_health_check_failed()
        if self._socket_quiet():
            self.health_check_done = True
            return None
        return super().close_if_health_check_failed()  # SELECT 1 decides

    def _socket_quiet(self) -> bool:
        """True when the idle connection is open and the server has sent nothing since."""
        conn = self.connection
        try:
            if conn.closed or conn.broken:
                return False
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                return False  # mid-transaction or failed: SELECT 1 tells
            return not has_pending_input(conn.pgconn.socket)
        except (AttributeError, OSError, ValueError, psycopg.Error):  # psycopg2: SELECT 1
            return False
