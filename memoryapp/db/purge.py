"""After an erasure: the vendor purge that makes deleted bytes unrecoverable, and the byte scan.

Every vendor difference of erasure lives here, keyed by ``connection.vendor``
(:func:`for_connection`): the per-connection preparation, what to record inside
the DELETE transaction, the purge itself, the structural checks, which files a
byte scan may read, "truncate everything" and backups.
``MEMORYAPP_ERASURE_PURGE_METHOD`` (:func:`memoryapp.conf.erasure_purge_method`)
chooses between rewriting everything and the methods that do not (issue 14.2;
the measurements are in bench/ERASURE.md).

- SQLite: ``secure_delete`` on the connection, so the DELETE itself overwrites
  the erased cells and every page it frees with zeros. After the commit and
  outside any transaction: an FTS5 ``optimize`` and a fresh ``ANALYZE`` of
  ``sqlite_stat4`` where present; then ``PRAGMA incremental_vacuum`` gives the
  freed (zeroed) pages back — the first purge of a file converts it to
  ``auto_vacuum=INCREMENTAL`` with one ``VACUUM`` — or, with the ``rewrite``
  method, ``VACUUM`` rewrites the whole file; last ``PRAGMA
  wal_checkpoint(TRUNCATE)``, retried until it reports ``(0, 0, 0)``. A read
  transaction open anywhere keeps the checkpoint busy: then the purge has
  *not* happened and says so.
- PostgreSQL: after the commit, wait while a snapshot or transaction that
  predates the erasure could still see the deleted rows, then rewrite each
  affected table — ``pg_repack`` (brief locks at its start and end; other
  sessions keep reading and writing) or ``VACUUM FULL`` (an ``ACCESS
  EXCLUSIVE`` lock for the whole rewrite) — then ``ANALYZE`` them,
  ``VACUUM FULL pg_statistic`` (superuser only) and ``CHECKPOINT``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from django.db import DatabaseError, NotSupportedError

from memoryapp import conf
from memoryapp.db import partitioning

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
    """The files a byte scan reads, or why there are none.

    ``transient`` marks a reason that may pass (the files changed under the scan:
    another session is rewriting them): the erasure is then not verified yet and is
    checked again later, instead of being taken as verified without a scan, as it is
    where no scan can ever run here (a database server on another machine).
    """

    paths: list[str]
    note: str = ""
    transient: bool = False

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

    @property
    def method(self) -> str:
        """The receipt's ``purge_method`` (each vendor names its own)."""
        return ""

    def prepare(self, connection) -> None:
        """Per-connection settings before the DELETEs (inside or outside a transaction)."""

    def delete_token(self, connection) -> dict:
        """Facts recorded inside the DELETE transaction that the purge needs later."""
        return {}

    @contextlib.contextmanager
    def by_index(self, connection):
        """Around the erasure's selection and deletes (inside its transaction): rows are
        found through their indexes."""
        yield

    def truncate(self, connection, tables: Sequence[str]) -> None:
        """Remove every row of ``tables`` (inside the erasure's transaction)."""
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"DELETE FROM {qn(table)}")

    def purge(
        self, connection, tables: Sequence[str], *, token: dict, timeout: float, method: str = ""
    ):
        """Make the deleted rows' bytes unrecoverable; returns a :class:`PurgeOutcome`.

        ``method`` overrides ``MEMORYAPP_ERASURE_PURGE_METHOD`` for this purge (a
        stronger purge after a failed verification: :mod:`.ladder`).
        """
        raise NotImplementedError

    def structure(self, connection) -> Structure:
        """Structural checks after a successful purge."""
        return Structure(True, "")

    def settle(self, connection) -> None:
        """Best effort, after the receipt is written: leave no residue of that write either."""

    def storage_tables(
        self, connection, tables: Sequence[str], remainders: Sequence[int] | None
    ) -> tuple[list[str], dict[str, str]]:
        """The relations that hold ``tables``' rows for an erasure whose rows were in
        the hash partitions ``remainders`` (None: unknown, all of them), and a note per
        partitioned table. Unpartitioned vendors purge the tables as they are."""
        return list(tables), {}

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
    """SQLite: secure_delete, incremental_vacuum (or VACUUM), a truncating WAL checkpoint."""

    name = "sqlite"

    @property
    def method(self) -> str:
        """The receipt's ``purge_method`` under the configured purge method."""
        if conf.erasure_purge_method() == "rewrite":
            return "sqlite: secure_delete + VACUUM + wal_checkpoint(TRUNCATE)"
        return "sqlite: secure_delete + incremental_vacuum + wal_checkpoint(TRUNCATE)"

    def prepare(self, connection) -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete = ON")

    def purge(self, connection, tables, *, token, timeout, method="") -> PurgeOutcome:
        if connection.in_atomic_block:
            return _not_purged("called inside a transaction (VACUUM cannot run there)")
        started = time.monotonic()
        notes: list[str] = []
        caveats: list[str] = []
        details: dict = {}
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
                    self._reclaim(connection, cursor, started + timeout, notes, details, method)
                except DatabaseError as exc:
                    step = details.get("reclaim", "VACUUM").split(" (")[0]
                    return _not_purged(f"{step} failed: {_first_line(exc)}", notes=notes)
                cursor.execute("PRAGMA journal_mode")
                journal = str(cursor.fetchone()[0]).lower()
                details["journal_mode"] = journal
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

    def _reclaim(
        self, connection, cursor, deadline: float, notes: list[str], details, method: str = ""
    ) -> None:
        """Take the erased rows' freed pages out of the file; ``details["reclaim"]`` says how.

        The DELETE ran with ``secure_delete=ON`` (:meth:`prepare`), which
        overwrites a deleted cell with zeros in its page and zeroes every page
        it puts on the freelist, so no byte of the erased rows is left in the
        pages. What remains is returning the free pages: ``incremental_vacuum``
        moves pages from the end of the file into them and truncates the file,
        at a cost that follows the pages freed, not the size of the file
        (bench/ERASURE.md: the same residue-free result as ``VACUUM``).
        ``incremental_vacuum`` needs ``auto_vacuum=INCREMENTAL``, which only a
        ``VACUUM`` can switch on for a file that has tables: the first purge
        does that once. With ``auto_vacuum=FULL`` every commit already did it.
        """
        if (method or conf.erasure_purge_method()) == "rewrite":
            details["reclaim"] = "VACUUM"
            self._retry(cursor, "VACUUM", deadline)
            return
        cursor.execute("PRAGMA auto_vacuum")
        mode = int(cursor.fetchone()[0])
        if mode == 0:
            details["reclaim"] = "VACUUM (conversion to auto_vacuum=INCREMENTAL)"
            if self._convert_alone(cursor, deadline):
                notes.append(
                    "file converted to auto_vacuum=INCREMENTAL (one VACUUM); later purges "
                    "free the erased pages only"
                )
                return
            details["reclaim"] = "VACUUM"
            self._retry(cursor, "VACUUM", deadline)
            notes.append(
                "file not converted to auto_vacuum=INCREMENTAL (other connections had it "
                "open; the conversion needs the file to itself), so this purge rewrote it "
                "with VACUUM; docs/compliance.md §3 says how to convert it"
            )
            return
        cursor.execute("PRAGMA freelist_count")
        details["freed_pages"] = int(cursor.fetchone()[0])
        details["reclaim"] = "incremental_vacuum" if mode == 2 else "auto_vacuum=FULL (at commit)"
        if mode == 2 and details["freed_pages"]:
            self._retry_script(connection, "PRAGMA incremental_vacuum;", deadline)

    @classmethod
    def _convert_alone(cls, cursor, deadline: float) -> bool:
        """Switch the file to ``auto_vacuum=INCREMENTAL`` if no other connection has it open.

        The switch is a ``VACUUM`` after ``PRAGMA auto_vacuum``. Done in WAL mode
        while another connection stays open, it corrupted the file for the
        other connections' next writes (SQLite 3.40, bench/ERASURE.md): so it
        runs in rollback-journal mode, which SQLite lets a connection enter
        only when it is the file's only one — the proof that it is alone.
        Returns False (nothing changed) when it is not.
        """
        cursor.execute("PRAGMA journal_mode")
        journal = str(cursor.fetchone()[0]).lower()
        if journal == "wal":
            try:
                cursor.execute("PRAGMA journal_mode = DELETE")
            except DatabaseError as exc:
                if "locked" in str(exc):
                    return False
                raise
            if str(cursor.fetchone()[0]).lower() != "delete":
                return False
        try:
            cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
            cls._retry(cursor, "VACUUM", deadline)
        except DatabaseError:
            # Not left pending: a later VACUUM in WAL mode would apply it.
            cursor.execute("PRAGMA auto_vacuum = NONE")
            raise
        finally:
            if journal == "wal":
                # Another process may have begun reading meanwhile: retried as the VACUUM.
                cls._retry(cursor, "PRAGMA journal_mode = WAL", max(deadline, time.monotonic() + 5))
        return True

    @classmethod
    def _retry_script(cls, connection, sql: str, deadline: float) -> None:
        """Run ``sql`` to its end, retrying while the database is locked.

        ``executescript`` because Python's ``execute`` steps a statement that
        returns no rows only once, and ``incremental_vacuum`` frees one page
        per step.
        """
        while True:
            try:
                with connection.wrap_database_errors:
                    connection.connection.executescript(sql)
                return
            except DatabaseError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

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
    def _checkpoint(cursor, deadline: float) -> tuple[int, ...]:
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
                    # The receipt's own update (its sealed request emptied) freed a
                    # few pages after the purge: secure_delete zeroed them, and in an
                    # auto_vacuum=INCREMENTAL file this returns them too (a no-op in
                    # any other file; the cost follows the free pages, not the file).
                    self._retry_script(connection, "PRAGMA incremental_vacuum;", 0.0)
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
        if free and path:
            # The purge ended with no free page (incremental_vacuum or VACUUM), so
            # these are pages other connections freed since — zeroed by their
            # secure_delete, but that is their setting, not a fact we can see.
            # As for the WAL below: the byte scan must read the whole file.
            ok = True
            must_read[path] = _size(path)
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
        how = (
            "VACUUM rewrote the file"
            if conf.erasure_purge_method() == "rewrite"
            else "secure_delete zeroed their cells and freed pages, incremental_vacuum "
            "returned the free pages"
        )
        shared = (
            []
            if conf.erasure_purge_method() == "rewrite"
            else [
                "SQLite: old versions of rows that a program without secure_delete=ON "
                "updated or deleted stay in free space until the next VACUUM; if such a "
                "program writes this file, set MEMORYAPP_ERASURE_PURGE_METHOD = 'rewrite'."
            ]
        )
        return [
            f"SQLite: the erased rows are gone from the database file, its -wal and -shm "
            f"files ({how}, the WAL was truncated). Not reached: copies "
            "of the file made before the erasure (backups, VACUUM INTO copies, file-system "
            "snapshots, replicas such as Litestream) keep the data until they expire; after "
            "restoring one, run 'manage.py memory erase --replay'. Storage below the file "
            "system (SSD wear levelling, file-system journals) may keep freed blocks until "
            "they are reused.",
            *shared,
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
    """PostgreSQL: pg_repack or VACUUM FULL, ANALYZE, VACUUM FULL pg_statistic, CHECKPOINT."""

    name = "postgresql"
    _STEPS = "ANALYZE + VACUUM FULL pg_statistic + CHECKPOINT"

    @property
    def method(self) -> str:
        """The receipt's ``purge_method`` under the configured purge method.

        Written before the purge runs, so under ``auto`` it names both
        rewrites; the purge's details (``rewrite``) and caveats say which ran.
        """
        rewrite = {
            "rewrite": "VACUUM FULL",
            "online": "pg_repack",
            "auto": "pg_repack (VACUUM FULL without it)",
        }[conf.erasure_purge_method()]
        return f"postgresql: {rewrite} + {self._STEPS}"

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
    def _parents(cursor, tables) -> list[str]:
        """The partitioned tables whose leaves are among ``tables``."""
        cursor.execute(
            "SELECT DISTINCT i.inhparent::regclass::text FROM pg_inherits i "
            "WHERE i.inhrelid = ANY(SELECT to_regclass(t) FROM unnest(%s::text[]) AS t) "
            "ORDER BY 1",
            [list(tables)],
        )
        return [row[0] for row in cursor.fetchall()]

    @staticmethod
    def _is_superuser(cursor) -> bool:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
        return bool(row and row[0])

    def storage_tables(self, connection, tables, remainders):
        with connection.cursor() as cursor:
            return partitioning.storage_tables(cursor, tables, remainders)

    @contextlib.contextmanager
    def by_index(self, connection):
        # "memory_id IN (500 ids)" on a partitioned table: the planner expects all 500
        # in every partition and reads each whole (10,000,000 rows at that size);
        # through the index it is 500 probes a partition. Transaction-local, and
        # restored, since the erasure may run inside a caller's transaction.
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_seqscan')")
            old = cursor.fetchone()[0]
            cursor.execute("SELECT set_config('enable_seqscan', 'off', true)")
            try:
                yield
            finally:
                cursor.execute("SELECT set_config('enable_seqscan', %s, true)", [old])

    def purge(self, connection, tables, *, token, timeout, method="") -> PurgeOutcome:
        if connection.in_atomic_block:
            return _not_purged("called inside a transaction (VACUUM cannot run there)")
        started = time.monotonic()
        qn = connection.ops.quote_name
        notes: list[str] = []
        caveats: list[str] = []
        details: dict = {"tables": list(tables)}
        with connection.cursor() as cursor:
            blockers = self._wait_clear(cursor, (token or {}).get("xid"), started + timeout)
            if blockers:
                return _not_purged(
                    f"{', '.join(blockers)}: a transaction open since before the erasure, "
                    "which can still see the erased row versions (VACUUM FULL would keep "
                    "them, pg_repack waits for it); retry when it has finished"
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
                failed = self._rewrite(
                    connection, cursor, tables, lock_ms / 1000, notes, caveats, details, method
                )
                if failed is not None:
                    return failed
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
                    # A partitioned table's own statistics sample every leaf, the
                    # erased rows too; ANALYZE of the parent would re-read all its
                    # leaves, so they are dropped (queries prune to leaves, whose
                    # statistics were just refreshed).
                    parents = self._parents(cursor, tables)
                    for parent in parents:
                        cursor.execute(
                            "DELETE FROM pg_statistic WHERE starelid = %s::regclass", [parent]
                        )
                    if parents:
                        notes.append(
                            "statistics of the partitioned tables as a whole dropped "
                            "(each rewritten partition analysed)"
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
        details["seconds"] = round(time.monotonic() - started, 3)
        return PurgeOutcome("purged", vacuumed=True, notes=notes, caveats=caveats, details=details)

    # ------------------------------------------------------------ the rewrite
    def _rewrite(self, connection, cursor, tables, timeout, notes, caveats, details, method=""):
        """Rewrite ``tables`` without the erased rows; a not-purged outcome, or None when done.

        ``details["rewrite"]`` names what ran. Under ``auto`` a missing
        pg_repack falls back to ``VACUUM FULL`` and a caveat says why (the
        erasure is as complete; other sessions were locked out meanwhile);
        under ``online`` it is a failure, so that no rewrite locks the tables.
        """
        started = time.monotonic()
        choice = method or conf.erasure_purge_method()
        if choice != "rewrite":
            missing = self._repack_missing(connection, cursor)
            if not missing:
                details["rewrite"] = f"pg_repack {_repack_client_version()}"
                failed = self._repack(connection, cursor, tables, timeout, notes)
                details["rewrite_seconds"] = round(time.monotonic() - started, 3)
                return failed
            if choice == "online":
                return _not_purged(
                    f"pg_repack is not available ({missing}) and "
                    "MEMORYAPP_ERASURE_PURGE_METHOD is 'online'; install it (docs/compliance.md "
                    "§10) or choose 'auto' or 'rewrite'",
                    details={"rewrite": "none", "pg_repack": missing},
                )
            details["pg_repack"] = missing
            caveats.append(
                f"PostgreSQL: pg_repack is not available ({missing}), so the tables were "
                "rewritten by VACUUM FULL, which locked every other session out of each table "
                "for its whole rewrite; install postgresql-15-repack and run CREATE EXTENSION "
                "pg_repack (docs/compliance.md §10)"
            )
        details["rewrite"] = "VACUUM FULL"
        failed = self._vacuum_full(connection, cursor, tables, notes)
        details["rewrite_seconds"] = round(time.monotonic() - started, 3)
        return failed

    @staticmethod
    def _vacuum_full(connection, cursor, tables, notes) -> PurgeOutcome | None:
        """``VACUUM FULL`` each table, under the session's ``lock_timeout``."""
        qn = connection.ops.quote_name
        for table in tables:
            try:
                cursor.execute(f"VACUUM FULL {qn(table)}")
            except DatabaseError as exc:
                return _not_purged(
                    f"VACUUM FULL {table} failed: {_first_line(exc)} (another session "
                    "holds a lock on the table?)",
                    notes=notes,
                )
        return None

    def _repack_missing(self, connection, cursor) -> str:
        """Why pg_repack cannot run here ("" when it can)."""
        client = _repack_client_version()
        if not client:
            return "the pg_repack program is not on the PATH of this process"
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_repack'")
        row = cursor.fetchone()
        if row is None:
            return (
                f"CREATE EXTENSION pg_repack has not been run in database "
                f"{connection.settings_dict['NAME']!r}"
            )
        if row[0] != client:
            return f"the pg_repack program is version {client}, the extension {row[0]}"
        if not self._is_superuser(cursor):
            return "pg_repack needs a superuser connection"
        return ""

    def _repack(self, connection, cursor, tables, timeout, notes) -> PurgeOutcome | None:
        """Rewrite ``tables`` with the pg_repack program; a not-purged outcome on failure.

        pg_repack copies the live rows into a new table under its own snapshot
        (taken after the erasure committed and after :meth:`_wait_clear`, so
        no erased row is copied), replays the writes made meanwhile and swaps
        the files; it holds an ``ACCESS EXCLUSIVE`` lock only briefly, to
        install its trigger and to swap. With ``--no-kill-backend`` a lock it
        cannot take within ``--wait-timeout`` makes it *skip* the table and
        still exit 0, so each table's ``relfilenode`` is compared afterwards:
        a table not rewritten is a purge that did not happen.
        """
        before = self._relfilenodes(cursor, tables)
        wait = max(1, math.ceil(timeout))
        dbname = connection.get_connection_params()["dbname"]
        command = [
            "pg_repack", "--no-order", "--no-kill-backend", "--no-analyze",
            f"--wait-timeout={wait}", f"--dbname={dbname}",
            *(f"--table={_quote_ident(schema)}.{_quote_ident(rel)}" for schema, rel, _ in before),
        ]  # fmt: skip
        run = _run_repack(command, _repack_env(connection), timeout)
        if run.waited_for or run.code != 0:
            self._repack_cleanup(cursor, tables)
        if run.waited_for:
            return _not_purged(
                f"pg_repack waited more than {timeout:g}s for {run.waited_for} to finish "
                "(open since it began, it keeps pg_repack from taking its locks); retry "
                "when it has finished",
                notes=notes,
            )
        if run.code != 0:
            return _not_purged(f"pg_repack failed: {run.problem()}", notes=notes)
        after = self._relfilenodes(cursor, tables)
        skipped = [
            rel for (_, rel, old), (_, _, new) in zip(before, after, strict=True) if old == new
        ]
        if skipped:
            return _not_purged(
                f"pg_repack did not rewrite {len(skipped)} table(s): it could not take the "
                f"table lock within {wait}s (another session holds a lock; "
                f"{run.problem()}); retry ({', '.join(skipped)})",
                notes=notes,
            )
        notes.append(f"{len(after)} table(s) rewritten by pg_repack")
        return None

    @staticmethod
    def _relfilenodes(cursor, tables) -> list[tuple[str, str, int]]:
        """(schema, table, relfilenode) of each table, in the order given."""
        out = []
        for table in tables:
            cursor.execute(
                "SELECT n.nspname, c.relname, c.relfilenode::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
                [table],
            )
            row = cursor.fetchone()
            if row is None:
                raise DatabaseError(f"table {table!r} does not exist")
            out.append((row[0], row[1], int(row[2])))
        return out

    @staticmethod
    def _repack_cleanup(cursor, tables) -> None:
        """Drop the trigger and log table an interrupted pg_repack left on ``tables``, if any.

        pg_repack removes them itself when it is interrupted or fails; this is
        for the case it could not (its connection was lost first). Only our
        tables: another pg_repack may be running on others.
        """
        cursor.execute(
            "SELECT DISTINCT tgrelid::bigint FROM pg_trigger WHERE tgname = 'repack_trigger' "
            "AND tgrelid = ANY(SELECT to_regclass(t) FROM unnest(%s::text[]) AS t)",
            [list(tables)],
        )
        for (oid,) in cursor.fetchall():
            # Best effort: the receipt already says "not purged".
            with contextlib.suppress(DatabaseError):
                cursor.execute("SELECT repack.repack_drop(%s, 4)", [oid])

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
                        # A rewrite (pg_repack, VACUUM FULL) by another session in flight.
                        return ScanFiles(
                            [], "relation files do not match the server's sizes", transient=True
                        )
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
            "files and from the planner statistics (the tables rewritten by pg_repack or "
            "VACUUM FULL, ANALYZE, VACUUM FULL pg_statistic). Not reached: WAL segments in "
            "pg_wal until they are recycled, the WAL archive, base backups and pg_dump "
            "files, and server logs (if statements are logged). Replicas replay the same "
            "erasure, but their own WAL and backups are not purged. After restoring a "
            "backup, run 'manage.py memory erase --replay'.",
            "PostgreSQL: the tables are partitioned by namespace; the purge rewrote, and "
            "the byte scan read, the partitions that held the erased rows. The app never "
            "moves a row to another namespace; a row that another program moved keeps its "
            "old version in its former partition until that one is rewritten.",
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


# ------------------------------------------------------------------ pg_repack
@lru_cache(maxsize=4)
def _repack_version_of(path: str) -> str:
    """The version the pg_repack program at ``path`` reports ("" if it does not run)."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    words = (done.stdout or "").split()
    return words[-1] if done.returncode == 0 and words else ""


def _repack_client_version() -> str:
    """The pg_repack program's version, "" when there is none on the PATH."""
    path = shutil.which("pg_repack")
    return _repack_version_of(path) if path else ""


# The libpq parameters of the app's connection, as the environment variables that
# give them to another libpq program. pg_repack takes the database as a plain name
# (a connection string works for its first connection only), so everything goes
# through the environment; the password too, as command lines are visible to every
# local user.
_LIBPQ_ENV = {
    "host": "PGHOST", "hostaddr": "PGHOSTADDR", "port": "PGPORT", "dbname": "PGDATABASE",
    "user": "PGUSER", "password": "PGPASSWORD", "passfile": "PGPASSFILE",
    "service": "PGSERVICE", "connect_timeout": "PGCONNECT_TIMEOUT", "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT", "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY",
    "sslcrl": "PGSSLCRL", "gssencmode": "PGGSSENCMODE",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
}  # fmt: skip


def _repack_env(connection) -> dict[str, str]:
    """This process's environment with the app's connection parameters as ``PG*`` variables."""
    env = {k: v for k, v in os.environ.items() if k not in _LIBPQ_ENV.values()}
    for key, value in connection.get_connection_params().items():
        if key in _LIBPQ_ENV and value not in (None, ""):
            env[_LIBPQ_ENV[key]] = str(value)
    env["PGAPPNAME"] = "memoryapp erasure purge"
    return env


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _RepackRun:
    """How one pg_repack run ended: exit code, its output lines, what it waited for too long."""

    code: int
    output: list[str]
    waited_for: str = ""

    def problem(self) -> str:
        """The last ERROR or WARNING line of the output (or its last line)."""
        for line in reversed(self.output):
            if line.startswith(("ERROR", "WARNING", "FATAL")) or "Skipping" in line:
                return line
        return self.output[-1] if self.output else f"exit code {self.code}"


def _run_repack(command: list[str], env: dict[str, str], timeout: float) -> _RepackRun:
    """Run pg_repack; interrupt it when it waits for other transactions longer than ``timeout``.

    Before copying a table pg_repack waits, without a time limit, for every
    transaction that was running when it installed its trigger ("Waiting for
    N transactions to finish"). A session left idle in a transaction would
    hold the erasure for ever, so after ``timeout`` seconds of that the
    program is interrupted (SIGINT: it drops its trigger and log table) and
    the purge reports what it waited for.
    """
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output = process.stdout
    assert output is not None  # stdout=PIPE
    lines: list[str] = []
    waiting: list[float | None] = [None]  # when the current wait began

    def read() -> None:
        for raw in output:
            line = raw.strip()
            lines.append(line)
            if "Waiting for" in line:
                waiting[0] = waiting[0] or time.monotonic()
            else:
                waiting[0] = None

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    waited_for = ""
    while process.poll() is None:
        began = waiting[0]
        if began is not None and time.monotonic() - began > timeout:
            waited_for = _waited_for(lines)
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            break
        time.sleep(0.05)
    process.wait()
    reader.join(timeout=5)
    return _RepackRun(process.returncode, lines, waited_for)


def _waited_for(lines: list[str]) -> str:
    """'1 transaction (first pid 123)' from pg_repack's last "Waiting for" line."""
    line = next((ln for ln in reversed(lines) if "Waiting for" in ln), "")
    words = line.split()
    try:
        count = words[words.index("for") + 1]
        pid = words[words.index("PID:") + 1]
    except (ValueError, IndexError):
        return "transactions open since it began"
    return f"{count} transaction(s) (first pid {pid})"


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
