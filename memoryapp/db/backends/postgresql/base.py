"""Django's PostgreSQL backend whose per-request health check mostly needs no round trip.

With ``CONN_HEALTH_CHECKS`` on, Django checks a persistent connection before the
first query of every request by running ``SELECT 1``. On the recall path that was
one round trip of ten, and on a busy machine each round trip waits for both
processes to be scheduled (bench/TENANTS.md, the HTTP cold phase).

This backend asks the connection's socket first: an idle connection the server has
given up on (restart, ``pg_terminate_backend``, a crashed backend) has something to
read — the server's farewell message or end of file — while a healthy idle one has
nothing. A quiet socket stands in for ``SELECT 1`` for :data:`SOCKET_CHECK_SECONDS`
after the connection was last proven by a round trip (connecting, or a ``SELECT 1``);
then ``SELECT 1`` runs again. The bound is for a server that vanished without a word
(a host that rebooted, an address moved to a failover): the socket stays quiet until
a statement draws a reset, and that statement would fail the request. So under steady
traffic a connection sends ``SELECT 1`` about once a second instead of once per
request, and a request is exposed to such a silent loss only within that second. When
the socket has something to read, or a transaction is open, Django's ``SELECT 1``
decides as before; a connection that saw an error is still checked at the end of its
request (Django's ``close_if_unusable_or_obsolete``, unchanged).

Use it as ``ENGINE = "memoryapp.db.backends.postgresql"`` (project/settings.py
does for a ``postgres://`` ``DATABASE_URL``); everything else is Django's backend.
"""

from __future__ import annotations

import select
import time

import psycopg
from django.db.backends.postgresql import base

__all__ = ["DatabaseWrapper"]


def has_pending_input(fileno: int) -> bool:
    """Whether the socket ``fileno`` has data (or end of file) to read now, without waiting."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


SOCKET_CHECK_SECONDS = 1.0
"""How long after a round trip proved a connection a quiet socket is taken as healthy."""


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL wrapper; the health check polls the socket (module docstring)."""

    health_check_enabled: bool  # set by Django's BaseDatabaseWrapper (not in the stubs)
    health_check_done: bool
    _proven_at = float("-inf")  # time.monotonic() of the last round trip that proved it

    def connect(self) -> None:
        super().connect()
        self._proven_at = time.monotonic()

    def close_if_health_check_failed(self) -> None:
        if (
            self.pool
            or self.connection is None
            or not self.health_check_enabled
            or self.health_check_done
        ):
            return super().close_if_health_check_failed()
        if time.monotonic() - self._proven_at < SOCKET_CHECK_SECONDS and self._socket_quiet():
            self.health_check_done = True
            return None
        super().close_if_health_check_failed()  # SELECT 1 decides
        if self.connection is not None:
            self._proven_at = time.monotonic()
        return None

    def _socket_quiet(self) -> bool:
        """True when the idle connection is open and the server has sent nothing since."""
        conn = self.connection
        try:
            if conn.closed or conn.broken:
                return False
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                return False  # mid-transaction or failed: SELECT 1 tells
            return not has_pending_input(conn.pgconn.socket)
        except (OSError, ValueError, psycopg.Error):
            return False
