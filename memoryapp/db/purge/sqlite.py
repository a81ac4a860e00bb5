"""SQLite's purge: secure_delete, incremental_vacuum (or VACUUM), a truncating WAL checkpoint."""

from __future__ import annotations

import os
import time

from django.db import DatabaseError

from memoryapp import conf
from memoryapp.db.purge.common import (
    PurgeOutcome,
    ScanFiles,
    Structure,
    VendorPurge,
    file_size,
    first_line,
    not_purged,
)


class SQLitePurge(VendorPurge):
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
            return not_purged("called inside a transaction (VACUUM cannot run there)")
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
                    return not_purged(f"{step} failed: {first_line(exc)}", notes=notes)
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
                        return not_purged(
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
        wal = file_size(path + "-wal") if path else 0
        parts = [f"freelist {free} page(s)"]
        ok = free == 0
        must_read = {}
        if free and path:
            # The purge ended with no free page (incremental_vacuum or VACUUM), so
            # these are pages other connections freed since — zeroed by their
            # secure_delete, but that is their setting, not a fact we can see.
            # As for the WAL below: the byte scan must read the whole file.
            ok = True
            must_read[path] = file_size(path)
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
        if not os.access(path, os.R_OK):
            # Named so: a scan that could not open the file would find nothing in it.
            return ScanFiles([], "database file not readable by this process")
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
        return f"Wrote a consistent copy of the database to {path} ({file_size(path)} bytes)."
