"""After an erasure: the vendor purge that makes deleted bytes unrecoverable, and the byte scan.

Every vendor difference of erasure lives here, keyed by ``connection.vendor``
(:func:`for_connection`): the per-connection preparation, what to record inside
the DELETE transaction, the purge itself, the structural checks, which files a
byte scan may read, "truncate everything" and backups.

- SQLite: ``secure_delete`` on the connection; after the commit and outside any
  transaction, ``VACUUM`` (an FTS5 ``optimize`` and a fresh ``ANALYZE`` of
  ``sqlite_stat4`` first, where present), then ``PRAGMA wal_checkpoint(TRUNCATE)``
  retried until it reports ``(0, 0, 0)``. A read transaction open anywhere keeps
  the checkpoint busy: then the purge has *not* happened and says so.
- PostgreSQL: after the commit, wait while a snapshot or transaction that
  predates the erasure could still see the deleted rows (``VACUUM FULL`` would
  copy them), then ``VACUUM FULL`` each affected table, ``ANALYZE`` them,
  ``VACUUM FULL pg_statistic`` (superuser only) and ``CHECKPOINT``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.db import DatabaseError, NotSupportedError

LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


@dataclass
class PurgeOutcome:
    """What the vendor purge did. ``status`` is ``"purged"`` or ``"not purged: <reason>"``."""

    status: str
    vacuumed: bool = False
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the purge completed."""
        return self.status == "purged"


@dataclass
class Structure:
    """Vendor-level checks after a purge (SQLite: WAL size and free pages).

    ``scan_must_read`` names files (path → size) whose content the structural
    check leaves to the byte scan: the check passes only if the scan read each
    of them at least that far (:meth:`verdict`).
    """

    ok: bool
    text: str
    details: dict = field(default_factory=dict)
    scan_must_read: dict[str, int] = field(default_factory=dict)

    def verdict(self, read: Mapping[str, int]) -> tuple[bool, str]:
        """Pass/fail and text, given the bytes the byte scan read per path."""
        if not self.scan_must_read:
            return self.ok, self.text
        if any(read.get(path, 0) < size for path, size in self.scan_must_read.items()):
            return False, self.text + " (not empty, and no byte scan read it)"
        return self.ok, self.text + " (written since the purge; read by the byte scan)"


@dataclass
class ScanFiles:
    """The files a byte scan reads, or why there are none."""

    paths: list[str]
    note: str = ""

    @property
    def possible(self) -> bool:
        """True when there is something to scan."""
        return bool(self.paths)


def _not_purged(reason: str, **kw) -> PurgeOutcome:
    return PurgeOutcome(status=f"not purged: {reason}", **kw)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class _Vendor:
    name = ""
    method = ""

    def prepare(self, connection) -> None:
        """Per-connection settings before the DELETEs (inside or outside a transaction)."""

    def delete_token(self, connection) -> dict:
        """Facts recorded inside the DELETE transaction that the purge needs later."""
        return {}

    def truncate(self, connection, tables: Sequence[str]) -> None:
        """Remove every row of ``tables`` (inside the erasure's transaction)."""
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"DELETE FROM {qn(table)}")

    def purge(self, connection, tables: Sequence[str], *, token: dict, timeout: float):
        """Make the deleted rows' bytes unrecoverable; returns a :class:`PurgeOutcome`."""
        raise NotImplementedError

    def structure(self, connection) -> Structure:
        """Structural checks after a successful purge."""
        return Structure(True, "")

    def settle(self, connection) -> None:
        """Best effort, after the receipt is written: leave no residue of that write either."""

    def scan_files(self, connection, tables: Sequence[str]) -> ScanFiles:
        """The files holding ``tables`` that this process can read."""
        return ScanFiles([], "no files to scan")

    def caveats(self, connection) -> list[str]:
        """What this vendor's erasure cannot reach (for receipts and docs)."""
        return []

    def backup(self, connection, path: str) -> str:
        """Write a consistent copy to ``path`` (or explain how); returns a message."""
        raise NotImplementedError


class SQLitePurge(_Vendor):
    """SQLite: secure_delete, VACUUM and a truncating WAL checkpoint."""

    name = "sqlite"
    method = "sqlite: secure_delete + VACUUM + wal_checkpoint(TRUNCATE)"

    def prepare(self, connection) -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete = ON")

    def purge(self, connection, tables, *, token, timeout) -> PurgeOutcome:
        if connection.in_atomic_block:
            return _not_purged("called inside a transaction (VACUUM cannot run there)")
        started = time.monotonic()
        notes: list[str] = []
        caveats: list[str] = []
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            old_timeout = int(cursor.fetchone()[0])
            # Short waits, retried by our own loop: the busy handler Django
            # configures (30 s) would otherwise block each attempt that long.
            cursor.execute(f"PRAGMA busy_timeout = {max(int(min(timeout, 0.2) * 1000), 1)}")
            try:
                for name in self._fts5_tables(cursor):
                    qn = connection.ops.quote_name(name)
                    cursor.execute(f"INSERT INTO {qn}({qn}) VALUES('optimize')")
                    notes.append(f"FTS5 table {name} optimized")
                cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat4'")
                if cursor.fetchone():
                    cursor.execute("ANALYZE")  # stat4 keeps sampled index keys
                    notes.append("sqlite_stat4 refreshed")
                try:
                    self._retry(cursor, "VACUUM", started + timeout)
                except DatabaseError as exc:
                    return _not_purged(f"VACUUM failed: {_first_line(exc)}", notes=notes)
                cursor.execute("PRAGMA journal_mode")
                journal = str(cursor.fetchone()[0]).lower()
                details = {"journal_mode": journal}
                if journal == "persist":
                    caveats.append(
                        "SQLite journal_mode=PERSIST keeps old pages in the -journal file; "
                        "use WAL (the project default) or DELETE"
                    )
                if journal == "wal":
                    result = self._checkpoint(cursor, started + timeout)
                    details["checkpoint"] = list(result)
                    if result != (0, 0, 0):
                        busy, log, done = result
                        return _not_purged(
                            f"WAL checkpoint incomplete after {timeout:g}s (busy={busy}, "
                            f"frames={log}, checkpointed={done}): another connection holds "
                            "an open read transaction; retry when it has finished",
                            vacuumed=True,
                            notes=notes,
                            caveats=caveats,
                            details=details,
                        )
            finally:
                cursor.execute(f"PRAGMA busy_timeout = {old_timeout}")
        details["seconds"] = round(time.monotonic() - started, 3)
        return PurgeOutcome("purged", vacuumed=True, notes=notes, caveats=caveats, details=details)

    @staticmethod
    def _fts5_tables(cursor) -> list[str]:
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%'"
        )
        return [name for name, sql in cursor.fetchall() if "fts5" in (sql or "").lower()]

    @staticmethod
    def _retry(cursor, sql: str, deadline: float) -> None:
        while True:
            try:
                cursor.execute(sql)
                return
            except DatabaseError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    @staticmethod
    def _checkpoint(cursor, deadline: float) -> tuple[int, int, int]:
        while True:
            try:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                result = tuple(int(v) for v in cursor.fetchone())
            except DatabaseError:
                result = (1, -1, -1)
            if result == (0, 0, 0) or time.monotonic() >= deadline:
                return result
            time.sleep(0.05)

    def settle(self, connection) -> None:
        if connection.in_atomic_block:
            return
        try:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA busy_timeout")
                old_timeout = int(cursor.fetchone()[0])
                cursor.execute("PRAGMA busy_timeout = 50")
                try:
                    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    cursor.fetchall()
                finally:
                    cursor.execute(f"PRAGMA busy_timeout = {old_timeout}")
        except DatabaseError:
            pass

    def _main_file(self, connection) -> str:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA database_list")
            rows = cursor.fetchall()
        return next((row[2] for row in rows if row[1] == "main"), "") or ""

    def structure(self, connection) -> Structure:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA freelist_count")
            free = int(cursor.fetchone()[0])
            cursor.execute("PRAGMA journal_mode")
            journal = str(cursor.fetchone()[0]).lower()
        path = self._main_file(connection)
        wal = _size(path + "-wal") if path else 0
        parts = [f"freelist {free} page(s)"]
        ok = free == 0
        must_read = {}
        if journal == "wal":
            parts.append(f"-wal {wal} byte(s)")
            if wal:
                # The purge's checkpoint truncated the WAL after the VACUUM, so
                # these are pages other connections wrote since. Requiring an
                # empty WAL would fail every erasure while another tenant writes:
                # what the pages hold is what matters, and the byte scan reads it.
                must_read[path + "-wal"] = wal
        details = {"freelist_count": free, "wal_bytes": wal}
        return Structure(ok, ", ".join(parts), details, scan_must_read=must_read)

    def scan_files(self, connection, tables) -> ScanFiles:
        path = self._main_file(connection)
        if not path:
            return ScanFiles([], "in-memory database: no files")
        paths = [p for p in (path, path + "-wal", path + "-shm", path + "-journal")]
        return ScanFiles([p for p in paths if os.path.exists(p)])

    def caveats(self, connection) -> list[str]:
        return [
            "SQLite: the erased rows are gone from the database file, its -wal and -shm "
            "files (VACUUM rewrote the file, the WAL was truncated). Not reached: copies "
            "of the file made before the erasure (backups, VACUUM INTO copies, file-system "
            "snapshots, replicas such as Litestream) keep the data until they expire; after "
            "restoring one, run 'manage.py memory erase --replay'. Storage below the file "
            "system (SSD wear levelling, file-system journals) may keep freed blocks until "
            "they are reused."
        ]

    def backup(self, connection, path: str) -> str:
        if os.path.exists(path):
            raise ValueError(f"{path} already exists; choose a new file")
        if connection.in_atomic_block:
            raise ValueError("a backup cannot run inside a transaction")
        with connection.cursor() as cursor:
            cursor.execute("VACUUM INTO %s", [path])
        return f"Wrote a consistent copy of the database to {path} ({_size(path)} bytes)."


class PostgresPurge(_Vendor):
    """PostgreSQL: VACUUM FULL, ANALYZE, VACUUM FULL pg_statistic, CHECKPOINT."""

    name = "postgresql"
    method = "postgresql: VACUUM FULL + ANALYZE + VACUUM FULL pg_statistic + CHECKPOINT"

    def delete_token(self, connection) -> dict:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_xact_id()::text")
            return {"xid": cursor.fetchone()[0]}

    def truncate(self, connection, tables) -> None:
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {', '.join(qn(t) for t in tables)}")

    def _blockers(self, cursor, xid: str | None, *, catalog: bool = False) -> list[str]:
        """What would make ``VACUUM FULL`` keep row versions deleted by transaction ``xid``.

        VACUUM FULL keeps every version some snapshot may still see: those of
        this database's sessions whose snapshot predates ``xid`` — and, since
        its own snapshot starts at the oldest transaction running anywhere in
        the cluster, every session of *any* database whose transaction began
        before ``xid``; plus prepared transactions and replication slots.
        """
        if not xid:
            return []
        short = str(int(xid) % 4294967296)
        cursor.execute(
            "SELECT pid::text, datname, datname = current_database() FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND ("
            " (backend_xid IS NOT NULL AND age(backend_xid) >= age(%s::xid)) OR"
            " (datname = current_database() AND backend_xmin IS NOT NULL"
            "  AND age(backend_xmin) >= age(%s::xid)"
            # A lazy VACUUM's snapshot does not hold the horizon back; an ANALYZE's does.
            "  AND NOT (backend_type = 'autovacuum worker'"
            "   AND query LIKE 'autovacuum: VACUUM%%')))",
            [short, short],
        )
        found = [
            f"session pid {pid}" + ("" if here else f" (database {db})")
            for pid, db, here in cursor.fetchall()
        ]
        cursor.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE age(transaction) >= age(%s::xid)", [short]
        )
        found += [f"prepared transaction {row[0]}" for row in cursor.fetchall()]
        column = "catalog_xmin" if catalog else "xmin"
        cursor.execute(
            f"SELECT slot_name FROM pg_replication_slots "
            f"WHERE {column} IS NOT NULL AND age({column}) >= age(%s::xid)",
            [short],
        )
        found += [f"replication slot {row[0]}" for row in cursor.fetchall()]
        return found

    def _wait_clear(self, cursor, xid, deadline: float, *, catalog: bool = False) -> list[str]:
        """Poll :meth:`_blockers` until there are none or the deadline passes."""
        while True:
            blockers = self._blockers(cursor, xid, catalog=catalog)
            if not blockers or time.monotonic() >= deadline:
                return blockers
            time.sleep(0.05)

    @staticmethod
    def _is_superuser(cursor) -> bool:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
        return bool(row and row[0])

    def purge(self, connection, tables, *, token, timeout) -> PurgeOutcome:
        if connection.in_atomic_block:
            return _not_purged("called inside a transaction (VACUUM cannot run there)")
        started = time.monotonic()
        qn = connection.ops.quote_name
        notes: list[str] = []
        caveats: list[str] = []
        with connection.cursor() as cursor:
            blockers = self._wait_clear(cursor, (token or {}).get("xid"), started + timeout)
            if blockers:
                return _not_purged(
                    f"{', '.join(blockers)}: a transaction open since before the erasure, "
                    "so VACUUM FULL would keep the erased row versions it can still see; "
                    "retry when it has finished"
                )
            cursor.execute("SELECT current_setting('lock_timeout')")
            old_timeout = cursor.fetchone()[0]
            cursor.execute("SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'")
            deadlock_ms = int(cursor.fetchone()[0])
            # An autovacuum worker holding the table is cancelled by the server
            # once it has blocked us for deadlock_timeout: wait at least that.
            lock_ms = max(int(timeout * 1000), deadlock_ms + 500)
            cursor.execute("SELECT set_config('lock_timeout', %s, false)", [f"{lock_ms}ms"])
            try:
                for table in tables:
                    try:
                        cursor.execute(f"VACUUM FULL {qn(table)}")
                    except DatabaseError as exc:
                        return _not_purged(
                            f"VACUUM FULL {table} failed: {_first_line(exc)} (another session "
                            "holds a lock on the table?)",
                            notes=notes,
                        )
                if tables:
                    cursor.execute(f"ANALYZE {', '.join(qn(t) for t in tables)}")
                superuser = self._is_superuser(cursor)
                if superuser:
                    # ANALYZE of an empty table keeps the old statistics (sampled
                    # values of the rows just erased): drop them by hand.
                    for table in tables:
                        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {qn(table)})")
                        if not cursor.fetchone()[0]:
                            cursor.execute(
                                "DELETE FROM pg_statistic WHERE starelid = %s::regclass", [table]
                            )
                if superuser:
                    # The statistics ANALYZE just replaced are dead row versions of
                    # pg_statistic: wait, as above, for what could still see them.
                    cursor.execute("SELECT pg_current_xact_id()::text")
                    analyzed = cursor.fetchone()[0]
                    blockers = self._wait_clear(
                        cursor, analyzed, time.monotonic() + timeout, catalog=True
                    )
                    if blockers:
                        return _not_purged(
                            f"{', '.join(blockers)}: a transaction open since before the "
                            "statistics were refreshed, so the old statistics (sampled "
                            "values) cannot be purged yet; retry when it has finished",
                            vacuumed=True,
                            notes=notes,
                        )
                    try:
                        cursor.execute("VACUUM FULL pg_statistic")
                    except DatabaseError as exc:
                        return _not_purged(
                            f"VACUUM FULL pg_statistic failed: {_first_line(exc)}",
                            vacuumed=True,
                            notes=notes,
                        )
                    notes.append("pg_statistic rewritten")
                else:
                    caveats.append(
                        "PostgreSQL: not a superuser, so pg_statistic was not rewritten: "
                        "planner statistics may still hold sampled values of erased rows "
                        "(until the next ANALYZE of a non-empty table and a vacuum of "
                        "pg_statistic)"
                    )
                try:
                    cursor.execute("CHECKPOINT")
                    notes.append("checkpoint done")
                except DatabaseError as exc:
                    caveats.append(
                        f"PostgreSQL: CHECKPOINT not run ({_first_line(exc)}): the rewritten "
                        "files reach the disk at the next scheduled checkpoint"
                    )
            finally:
                cursor.execute("SELECT set_config('lock_timeout', %s, false)", [old_timeout])
        details = {"seconds": round(time.monotonic() - started, 3), "tables": list(tables)}
        return PurgeOutcome("purged", vacuumed=True, notes=notes, caveats=caveats, details=details)

    def scan_files(self, connection, tables) -> ScanFiles:
        host = str(connection.settings_dict.get("HOST") or "")
        if host not in LOCAL_HOSTS and not host.startswith("/"):
            return ScanFiles([], f"database server {host!r} is not on this machine")
        with connection.cursor() as cursor:
            try:
                cursor.execute("SELECT current_setting('data_directory')")
                data_dir = cursor.fetchone()[0]
            except DatabaseError:
                return ScanFiles([], "data directory not visible (needs pg_read_all_settings)")
            if not os.access(data_dir, os.R_OK | os.X_OK):
                return ScanFiles([], "data directory not readable by this process")
            paths: list[str] = []
            for table in [*tables, "pg_statistic"]:
                for rel_path, size in self._relation_files(cursor, table):
                    full = os.path.join(data_dir, rel_path)
                    segments = _segments(full)
                    if sum(_size(p) for p in segments) < size:
                        return ScanFiles([], "relation files do not match the server's sizes")
                    paths.extend(segments)
        return ScanFiles(paths)

    @staticmethod
    def _relation_files(cursor, table: str) -> list[tuple[str, int]]:
        cursor.execute(
            "WITH t AS (SELECT to_regclass(%s) AS oid), rels AS ("
            " SELECT oid FROM t"
            " UNION SELECT indexrelid FROM pg_index, t WHERE indrelid = t.oid"
            " UNION SELECT c.reltoastrelid FROM pg_class c, t"
            "  WHERE c.oid = t.oid AND c.reltoastrelid <> 0"
            " UNION SELECT i.indexrelid FROM pg_index i, pg_class c, t"
            "  WHERE c.oid = t.oid AND i.indrelid = c.reltoastrelid)"
            " SELECT pg_relation_filepath(oid), pg_relation_size(oid) FROM rels"
            " WHERE oid IS NOT NULL",
            [table],
        )
        return [(path, int(size)) for path, size in cursor.fetchall() if path]

    def caveats(self, connection) -> list[str]:
        return [
            "PostgreSQL: the erased rows are gone from the tables' heap, index and TOAST "
            "files and from the planner statistics (VACUUM FULL, ANALYZE, VACUUM FULL "
            "pg_statistic). Not reached: WAL segments in pg_wal until they are recycled, the "
            "WAL archive, base backups and pg_dump files, and server logs (if statements "
            "are logged). Replicas replay the same erasure, but their own WAL and backups "
            "are not purged. After restoring a backup, run 'manage.py memory erase --replay'."
        ]

    def backup(self, connection, path: str) -> str:
        s = connection.settings_dict
        parts = ["pg_dump", "--format=custom", "--no-password", f"--file={path}"]
        for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
            if s.get(key):
                parts.append(f"{flag}={s[key]}")
        parts.append(f"--dbname={s['NAME']}")
        return (
            "PostgreSQL backups are taken by pg_dump (or your base-backup tooling), not by "
            "this app. Run:\n  " + " ".join(parts) + "\n(password from PGPASSWORD or "
            "~/.pgpass). Keep it no longer than needed: erasures after the dump are not in "
            "it; after restoring it, run 'manage.py memory erase --replay'."
        )


VENDORS: dict[str, _Vendor] = {"sqlite": SQLitePurge(), "postgresql": PostgresPurge()}


def for_connection(connection) -> _Vendor:
    """The purge implementation for a connection's vendor; unsupported vendors fail loudly."""
    try:
        return VENDORS[connection.vendor]
    except KeyError:
        raise NotSupportedError(
            f"memoryapp cannot purge erased data on the {connection.vendor!r} database vendor "
            f"(supported: {', '.join(sorted(VENDORS))})."
        ) from None


def scan(
    paths: Iterable[str], pieces: Sequence[bytes], *, read: dict[str, int] | None = None
) -> tuple[set[int], int]:
    """Find which ``pieces`` (each at least 8 bytes) occur in the raw bytes of ``paths``.

    The files are read by a child process (:mod:`.scan_child` says why: closing
    a descriptor of a SQLite file in this process would drop its connection's
    locks), in chunks with an overlap of the longest piece, never mapped
    (another process may truncate a ``-wal`` file while it reads). Returns the
    indexes of the pieces found and the number of bytes read; ``read``, when
    given, receives the bytes read per path (a file that could not be opened is
    missing from it). The cost does not grow with the number of pieces
    (:class:`.finder.Finder`).
    """
    paths = list(paths)
    if not pieces:
        return set(), 0
    request = json.dumps(
        {"paths": paths, "pieces": [base64.b64encode(p).decode("ascii") for p in pieces]}
    )
    package_root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "memoryapp.db.scan_child"],
        input=request,
        capture_output=True,
        text=True,
        cwd=package_root,
        check=False,
    )
    if result.returncode != 0:
        raise OSError(f"byte scan failed: {(result.stderr or '').strip()[-300:]}")
    answer = json.loads(result.stdout)
    if read is not None:
        read.update(answer["read"])
    return set(answer["found"]), int(answer["total"])


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _segments(path: str) -> list[str]:
    """A relation's main fork and its 1 GB continuation segments (``.1``, ``.2`` …)."""
    out = [path] if os.path.exists(path) else []
    n = 1
    while os.path.exists(f"{path}.{n}"):
        out.append(f"{path}.{n}")
        n += 1
    return out


__all__ = [
    "PurgeOutcome",
    "PostgresPurge",
    "SQLitePurge",
    "ScanFiles",
    "Structure",
    "VENDORS",
    "for_connection",
    "scan",
]
