"""One server's check of an erasure: replayed far enough, the rows gone, its files scanned.

Used for every copy but the primary's own verification (:mod:`.purging`): a replica checked
by the worker (files read here when they are on this machine, else through SQL:
:mod:`memoryapp.db.purge.sql_scan`), or any server checked by ``manage.py memory
verifier`` running beside it (its files read locally, under the data directory it is
given). The result is a :class:`Check`; :mod:`.copies` records it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connections

from memoryapp.compliance.kept import explained as explained_by_kept_rows
from memoryapp.compliance.selection import ROW_MODELS
from memoryapp.db import partitioning
from memoryapp.db.purge import scan as byte_scan
from memoryapp.db.purge import sql_scan
from memoryapp.db.purge.vendors import for_connection
from memoryapp.rules.batching import batches
from memoryapp.rules.outcomes import Outcome

REPLAY_POLL = 0.1


@dataclass
class Check:
    """What one server's check came to (``outcome`` an :class:`Outcome`)."""

    outcome: Outcome
    reason: str = ""
    method: str = ""
    system_identifier: str = ""
    role: str = ""
    facts: dict = field(default_factory=dict)


def identify(alias: str) -> tuple[str, str]:
    """``(system_identifier, role)`` of the server behind ``alias`` (``("", "primary")``
    for a vendor without them)."""
    connection = connections[alias]
    if for_connection(connection).read_through_sql(connection, [], []) is None:
        return "", "primary"
    with connection.cursor() as cursor:
        return sql_scan.identity(cursor)


def how_verified(alias: str) -> tuple[str, str]:
    """How this process can byte-scan the server behind ``alias``: ``("files", "")``
    (its files are read here), ``("sql", "")`` (through ``pg_read_binary_file``), or
    ``("", why not)`` (then only a verifier beside it can; the system check says so)."""
    connection = connections[alias]
    vendor = for_connection(connection)
    files = vendor.scan_files(connection, [])
    if files.possible:
        return "files", ""
    through = vendor.read_through_sql(connection, [], [])
    if through is None:
        return "", files.note
    with connection.cursor() as cursor:
        missing = sql_scan.unreadable(cursor)
    if not missing:
        return "sql", ""
    return "", f"{files.note}; through SQL: {missing}"


def position(alias: str) -> str:
    """The WAL position of the primary behind ``alias`` now ("" for a vendor without)."""
    connection = connections[alias]
    if for_connection(connection).read_through_sql(connection, [], []) is None:
        return ""
    with connection.cursor() as cursor:
        return sql_scan.current_lsn(cursor)


def wait_for_replay(alias: str, lsn: str, seconds: float, heartbeat=None) -> bool:
    """True once the server behind ``alias`` has replayed the primary's WAL up to ``lsn``
    (at once for a primary or without a position), polling for at most ``seconds``;
    ``heartbeat`` (if any) is called at each poll."""
    if not lsn:
        return True
    deadline = time.monotonic() + seconds
    with connections[alias].cursor() as cursor:
        while True:
            if sql_scan.replayed(cursor, lsn):
                return True
            if time.monotonic() >= deadline:
                return False
            if heartbeat is not None:
                heartbeat()
            time.sleep(REPLAY_POLL)


def remaining(alias: str, erased_ids: dict) -> int:
    """The erased rows this server still shows through SQL."""
    n = 0
    for table, model in ROW_MODELS.items():
        for batch in batches((erased_ids or {}).get(table) or []):
            n += model.objects.using(alias).filter(pk__in=list(batch)).count()
    return n


def check(
    alias: str,
    *,
    primary: str,
    erased_ids: dict,
    tables: Sequence[str],
    pieces: Sequence[bytes],
    lsn: str,
    wait: float,
    data_directory: str | None = None,
    heartbeat: Callable[[], None] | None = None,
) -> Check:
    """Check the server behind ``alias`` for an erasure made on ``primary``.

    It must have replayed past ``lsn`` within ``wait`` seconds (else ``NOT_CHECKED``);
    then no erased row may remain through SQL, and no fragment (``pieces``) in its files
    — read under ``data_directory`` (a verifier beside the server), else here when
    local, else through SQL — unless a kept row on the primary holds the same bytes.
    A server that allows neither read is ``UNSCANNED``, with the reason. ``heartbeat``
    is called while it waits and between the files or chunks it reads: the caller's
    claim on the check is renewed there (:func:`memoryapp.compliance.copies.keeper`).
    """
    ident, role = identify(alias)
    base: dict[str, Any] = {"system_identifier": ident, "role": role}
    if not wait_for_replay(alias, lsn, wait, heartbeat):
        return Check(
            Outcome.NOT_CHECKED,
            f"it has not replayed the erasure yet (WAL position {lsn}) after {wait:g}s",
            **base,
        )
    left = remaining(alias, erased_ids)
    if left:
        return Check(Outcome.NOT_VERIFIED, f"{left} erased row(s) remain on it", **base)
    if not pieces:
        return Check(Outcome.UNSCANNED, "no erased value was long enough to probe", **base)
    method, found, facts, problem = _scan(alias, tables, pieces, data_directory, heartbeat)
    if method == "":
        outcome = Outcome.NOT_VERIFIED if facts.get("transient") else Outcome.UNSCANNED
        return Check(outcome, problem, facts=facts, **base)
    kept = _explained(primary, pieces, found, tables)
    facts.update(fragments=len(pieces), found=len(found) - len(kept), found_in_kept_rows=len(kept))
    if facts["found"]:
        reason = f"{facts['found']} fragment(s) of erased values found in its files"
        return Check(Outcome.NOT_VERIFIED, reason, method, facts=facts, **base)
    return Check(Outcome.VERIFIED_BY_SCAN, "", method, facts=facts, **base)


def _scan(alias: str, tables, pieces, data_directory: str | None, heartbeat=None) -> tuple:
    """``(method, found, facts, problem)``: ``method`` "" when no scan could run."""
    connection = connections[alias]
    vendor = for_connection(connection)
    if data_directory is not None:
        with connection.cursor() as cursor:
            paths = sql_scan.files_under(cursor, data_directory, tables)
        return _files("verifier", paths, pieces, heartbeat)
    files = vendor.scan_files(connection, tables)
    if files.possible:
        return _files("files", files.paths, pieces, heartbeat)
    try:
        through = vendor.read_through_sql(connection, tables, pieces, heartbeat=heartbeat)
    except DatabaseError as exc:  # a standby cancels a long read that conflicts with replay
        return "", set(), {"transient": True}, f"the scan through SQL failed ({exc})"
    if through is None:
        return "", set(), {}, f"its files cannot be read here ({files.note})"
    if not through.complete:
        why = f"its files cannot be read here ({files.note}; through SQL: {through.note})"
        return "", set(), {"transient": through.transient}, why
    return "sql", through.found, {"files": through.files, "bytes": through.bytes}, ""


def _files(method: str, paths: list[str], pieces, heartbeat=None) -> tuple:
    read: dict[str, int] = {}
    found, total = byte_scan.scan(paths, pieces, read=read, heartbeat=heartbeat)
    missing = [p for p in paths if p not in read]  # rewritten (renamed) since listed
    if missing:
        return "", set(), {"transient": True}, f"{len(missing)} relation file(s) missing"
    return method, found, {"files": len(read), "bytes": total}, ""


def _explained(primary: str, pieces, found: set[int], tables) -> set[int]:
    """The found fragments a row kept on the primary holds too (replicas hold the same)."""
    if not found:
        return set()
    order = sorted(found)
    leaves = [t for t in tables if partitioning.table_of(t)]
    return {order[j] for j in explained_by_kept_rows(primary, [pieces[i] for i in order], leaves)}
