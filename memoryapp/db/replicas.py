"""Read replicas: which database serves a lag-tolerant read, and how far each replica trails.

``MEMORYAPP_REPLICA_DATABASES`` lists streaming replicas of the ``default`` database.
:func:`read_alias` answers the primary unless the read may lag
(:mod:`memoryapp.db.read_your_writes`) and a replica is reachable, in recovery, within
``MEMORYAPP_REPLICA_MAX_LAG`` and past the caller's last write. The lag is measured
per replica at most once per ``MEMORYAPP_REPLICA_CHECK_INTERVAL`` per process: the
primary's WAL position, then the replica's replayed position; caught up, the lag is 0,
else it is the time since the replica's last replayed commit. An unreachable replica
is remembered as down for five intervals. Nothing here raises: every doubt reads the
primary. A replica that dies after it was measured fails the read running on it:
:func:`read_with_fallback` marks it down and runs that read again on the primary.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

from memoryapp.conf import replica_check_interval, replica_databases, replica_max_lag
from memoryapp.db import read_your_writes

_DOWN_INTERVALS = 5  # an unreachable replica is retried after this many check intervals

_REPLICA_SQL = (
    "SELECT pg_is_in_recovery(),"
    " COALESCE(pg_last_wal_replay_lsn() - '0/0'::pg_lsn, 0),"
    " EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()),"
    " EXTRACT(EPOCH FROM pg_last_xact_replay_timestamp())"
)


@dataclass(frozen=True)
class ReplicaStatus:
    """One measurement of a replica: whether it may serve, and why not."""

    alias: str
    usable: bool
    reason: str  # "" when usable
    lag: float | None = None  # seconds behind the primary (0: replayed all it had)
    replayed: int = 0  # the replayed WAL position
    replayed_at: float | None = None  # when the last replayed commit was made (epoch s)
    measured: float = 0.0  # time.monotonic() of the measurement
    # Every commit made before this moment (epoch s) is on the replica: the measurement's
    # start when it had replayed all the primary had written, else its last replayed commit.
    current_at: float | None = None


_statuses: dict[str, ReplicaStatus] = {}
_lock = threading.Lock()
_turn = itertools.count()
# The replicas chosen inside the innermost read_with_fallback (None: outside any).
_chosen: ContextVar[list[str] | None] = ContextVar("memoryapp_replicas_chosen", default=None)
T = TypeVar("T")


def replicas_of(primary: str) -> list[str]:
    """The replica aliases that may serve reads of ``primary`` (only ``default`` has any)."""
    return replica_databases() if primary == DEFAULT_DB_ALIAS else []


def forget() -> None:
    """Drop every cached measurement (tests; after a failover)."""
    with _lock:
        _statuses.clear()


def mark_down(alias: str, reason: str) -> None:
    """A read on ``alias`` failed: skip it until it is measured again."""
    with _lock:
        _statuses[alias] = ReplicaStatus(alias, False, reason, measured=time.monotonic())
    _close_quietly(alias)


def _close_quietly(alias: str) -> None:
    # A dead connection may fail to close: it is dropped all the same.
    with contextlib.suppress(Exception):
        connections[alias].close()


def measure(alias: str, primary: str = DEFAULT_DB_ALIAS) -> ReplicaStatus:
    """Measure ``alias`` now (one query on the primary, one on the replica); never raises."""
    started, wall = time.monotonic(), time.time()
    head = read_your_writes.current_position(primary)
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(_REPLICA_SQL)
            in_recovery, replayed, since_commit, replayed_at = cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - unreachable, refused, not PostgreSQL: skipped
        _close_quietly(alias)
        return ReplicaStatus(alias, False, f"unreachable ({type(exc).__name__})", measured=started)
    replayed = int(replayed)
    replayed_at = float(replayed_at) if replayed_at is not None else None
    if not in_recovery:
        return ReplicaStatus(alias, False, "not in recovery (promoted?)", measured=started)
    if head is None:
        return ReplicaStatus(alias, False, "the primary's position is unreadable", measured=started)
    if replayed >= head:
        lag = 0.0
    elif since_commit is None:
        lag = float("inf")  # behind, and no commit replayed since it started
    else:
        lag = max(float(since_commit), 0.0)
    usable = lag <= replica_max_lag()
    reason = "" if usable else f"lags {lag:.1f}s (bound {replica_max_lag():g}s)"
    current_at = wall if lag == 0.0 else replayed_at
    return ReplicaStatus(alias, usable, reason, lag, replayed, replayed_at, started, current_at)


def status(alias: str, primary: str = DEFAULT_DB_ALIAS, *, fresh: bool = False) -> ReplicaStatus:
    """The replica's measurement, reused for ``MEMORYAPP_REPLICA_CHECK_INTERVAL`` seconds."""
    interval = replica_check_interval()
    with _lock:
        known = _statuses.get(alias)
    if known is not None and not fresh:
        age = time.monotonic() - known.measured
        if age < (interval if known.usable else interval * _DOWN_INTERVALS):
            return known
    measured = measure(alias, primary)
    with _lock:
        _statuses[alias] = measured
    return measured


def read_source(primary: str = DEFAULT_DB_ALIAS) -> ReplicaStatus | None:
    """The replica to read ``primary``'s data from now, or None for the primary itself."""
    replicas = replicas_of(primary)
    if not replicas or not read_your_writes.replica_allowed():
        return None
    if connections[primary].in_atomic_block:
        return None  # a transaction reads its own snapshot, on the primary
    needed = read_your_writes.required_position(primary)
    if needed is None:
        return None
    start = next(_turn) % len(replicas)  # spread the reads over the replicas
    for alias in replicas[start:] + replicas[:start]:
        found = status(alias, primary)
        if found.usable and found.replayed < needed:
            found = status(alias, primary, fresh=True)  # maybe replayed since measured
        if found.usable and found.replayed >= needed:
            chosen = _chosen.get()
            if chosen is not None:
                chosen.append(alias)
            return found
    return None


def read_alias(primary: str = DEFAULT_DB_ALIAS) -> str:
    """The alias to read ``primary``'s data from now: a usable replica, else ``primary``."""
    source = read_source(primary)
    return source.alias if source is not None else primary


def lag_tolerant_alias(primary: str = DEFAULT_DB_ALIAS) -> str:
    """:func:`read_alias` for a read that tolerates lag (a list, an export's rows)."""
    with read_your_writes.lag_tolerant():
        return read_alias(primary)


def read_with_fallback(read: Callable[[], T]) -> T:
    """``read()``, run again on the primary if a replica it read from failed under it.

    ``read`` runs its lag-tolerant reads where :func:`read_alias` sends them. A replica
    measured usable may die before or during the read (a stopped server, a dropped
    connection): the read fails with ``OperationalError`` or ``InterfaceError`` on that
    replica's connection. Then every replica it chose whose connection failed is marked
    down (:func:`mark_down`) and ``read()`` runs once more with every read on the primary.
    An error of the primary itself (no replica connection failed) propagates as it is.
    ``read`` must only read: it may run twice.
    """
    chosen: list[str] = []
    token = _chosen.set(chosen)
    try:
        return read()
    except (OperationalError, InterfaceError):
        failed = [a for a in dict.fromkeys(chosen) if _connection_failed(a)]
        if not failed:
            raise
        for alias in failed:
            mark_down(alias, "a read failed")
    finally:
        _chosen.reset(token)
    with read_your_writes.primary_reads():
        return read()


def _connection_failed(alias: str) -> bool:
    # Django flags a connection whose statement or connect raised a database error
    # other than a data or integrity error (reset at its next connect).
    try:
        connection = connections[alias]
    except Exception:  # noqa: BLE001 - an alias gone from the settings: not ours to judge
        return False
    return bool(connection.errors_occurred)
