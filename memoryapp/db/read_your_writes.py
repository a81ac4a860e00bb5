"""Read-your-writes with read replicas: who has written, and which reads may lag.

A *caller* is a request (``ReadYourWritesMiddleware``), else the thread (a worker, a
command, a host process calling the facade). Three rules, read by
:func:`memoryapp.db.replicas.read_alias`:

- Only a read inside :func:`lag_tolerant` may go to a replica (recall's index reads, the
  API's and admin's lists, exports); any other read, and every read inside
  :func:`primary_reads`, reads the primary. Writes always go to the primary.
- A request that has written (any statement other than a read on a primary connection,
  seen by :func:`install_write_detector`), and any unsafe-method request (POST, PUT,
  PATCH, DELETE) from its start, reads the primary until it ends.
- After a write the caller owns the primary's WAL position at that moment: its later
  reads go to a replica only once that replica has replayed that position. A request
  keeps the position in the cache for its client (API token, session, else address) for
  ``MEMORYAPP_REPLICA_STICKY_SECONDS``, so the client's next requests on any worker of
  any machine (with a shared cache) obey it too.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.core.cache import cache
from django.db import connections

from memoryapp.conf import replica_databases, replica_sticky_seconds

# Statements that change nothing: any other statement on a primary marks a write.
_READS = ("SELECT", "SHOW", "SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT", "SET", "EXPLAIN")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_MARK_KEY = "memoryapp:replica:written:{}"


@dataclass
class Caller:
    """One caller's read-your-writes state."""

    in_request: bool = False
    pinned: bool = False  # this request reads the primary until it ends
    dirty: set[str] = field(default_factory=set)  # primaries written since their position
    positions: dict[str, int] = field(default_factory=dict)  # primary -> WAL position


_caller: ContextVar[Caller | None] = ContextVar("memoryapp_replica_caller", default=None)
_tolerant: ContextVar[bool] = ContextVar("memoryapp_replica_lag_tolerant", default=False)
_primary_only: ContextVar[bool] = ContextVar("memoryapp_replica_primary_only", default=False)
_unseen: ContextVar[bool] = ContextVar("memoryapp_replica_unseen_writes", default=False)


def caller() -> Caller:
    """This request's or thread's state (made on first use)."""
    state = _caller.get()
    if state is None:
        state = Caller()
        _caller.set(state)
    return state


def reset() -> None:
    """Forget this thread's writes (tests: a new test is a new caller)."""
    _caller.set(None)


@contextlib.contextmanager
def lag_tolerant() -> Iterator[None]:
    """Reads inside may be served by a replica (within the lag bound, after own writes)."""
    token = _tolerant.set(True)
    try:
        yield
    finally:
        _tolerant.reset(token)


@contextlib.contextmanager
def primary_reads() -> Iterator[None]:
    """Every read inside goes to the primary, even inside :func:`lag_tolerant`."""
    token = _primary_only.set(True)
    try:
        yield
    finally:
        _primary_only.reset(token)


@contextlib.contextmanager
def not_the_callers_write() -> Iterator[None]:
    """Statements inside change nothing the caller reads back: they do not mark it.

    A cache fill on the primary (a recall index's stored snapshot, built from a
    replica's rows) is no write of the caller's data: counted as one, a lag-tolerant
    recall pinned its request to the primary and made the client wait for the replicas
    to replay a row it never asked for.
    """
    token = _unseen.set(True)
    try:
        yield
    finally:
        _unseen.reset(token)


def replica_allowed() -> bool:
    """Whether the current read may go to a replica at all (before lag and positions)."""
    if not _tolerant.get() or _primary_only.get():
        return False
    state = _caller.get()
    return state is None or not state.pinned


def note_write(alias: str) -> None:
    """A statement that may write ran on ``alias`` (a primary) for the current caller."""
    state = caller()
    state.dirty.add(alias)
    if state.in_request:
        state.pinned = True


def current_position(alias: str) -> int | None:
    """The primary's WAL position now, as a number (None: not PostgreSQL, or unreadable)."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
            return int(cursor.fetchone()[0])
    except Exception:  # noqa: BLE001 - an aborted transaction: the caller reads the primary
        return None


def required_position(primary: str) -> int | None:
    """The WAL position a replica must have replayed to serve this caller; 0 when none.

    None: the caller's write position cannot be read now (the primary serves).
    """
    state = _caller.get()
    if state is None:
        return 0
    if primary in state.dirty:
        if connections[primary].in_atomic_block:
            return None  # the write is not committed: no replica can have it
        position = current_position(primary)
        if position is None:
            return None
        state.positions[primary] = max(position, state.positions.get(primary, 0))
        state.dirty.discard(primary)
    return state.positions.get(primary, 0)


def _is_write(sql: str) -> bool:
    return not sql.lstrip()[:9].upper().startswith(_READS)


def _detect_writes(execute, sql, params, many, context):
    if _is_write(sql) and not _unseen.get():
        note_write(context["connection"].alias)
    return execute(sql, params, many, context)


def install_write_detector(sender=None, connection=None, **kwargs) -> None:
    """``connection_created`` receiver: watch a primary connection's statements for writes."""
    if connection is None or connection.alias in replica_databases():
        return
    if _detect_writes not in connection.execute_wrappers:
        connection.execute_wrappers.append(_detect_writes)


def client_key(request) -> str:
    """Who a request comes from, hashed: its API token, else its session, else its address."""
    auth = request.META.get("HTTP_AUTHORIZATION", "")
    session = request.COOKIES.get("sessionid", "")
    who = auth or session or request.META.get("REMOTE_ADDR", "")
    return hashlib.sha256(who.encode()).hexdigest()[:32]


class ReadYourWritesMiddleware:
    """Scope read-your-writes to each request, and carry a client's write position on.

    Does nothing without configured replicas. At the start it reads the client's last
    write position from the cache; at the end, if the request wrote, it stores the
    primary's position for ``MEMORYAPP_REPLICA_STICKY_SECONDS``.
    """

    def __init__(self, get_response):
        """Django's middleware protocol."""
        self.get_response = get_response

    def __call__(self, request):
        """Run the request with its own caller state."""
        if not replica_databases():
            return self.get_response(request)
        key = _MARK_KEY.format(client_key(request))
        state = Caller(in_request=True, pinned=request.method not in _SAFE_METHODS)
        remembered = cache.get(key)
        if isinstance(remembered, dict):
            state.positions.update(remembered)
        token = _caller.set(state)
        try:
            return self.get_response(request)
        finally:
            _caller.reset(token)
            self._remember(key, state)

    @staticmethod
    def _remember(key: str, state: Caller) -> None:
        for primary in list(state.dirty):
            position = current_position(primary)
            if position is not None:
                state.positions[primary] = max(position, state.positions.get(primary, 0))
        if state.dirty and state.positions:
            cache.set(key, state.positions, replica_sticky_seconds())
