"""PostgreSQL's purge: wait for older snapshots, rewrite (pg_repack or VACUUM FULL), checkpoint."""

from __future__ import annotations

import contextlib
import math
import time

from django.db import DatabaseError

from memoryapp import conf
from memoryapp.db import partitioning
from memoryapp.db.purge import pg_files, repack, sql_scan
from memoryapp.db.purge.common import (
    PurgeOutcome,
    ScanFiles,
    VendorPurge,
    first_line,
    not_purged,
)
from memoryapp.rules.outcomes import REPLICAS_CAVEAT


class PostgresPurge(VendorPurge):
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
            return not_purged("called inside a transaction (VACUUM cannot run there)")
        started = time.monotonic()
        notes: list[str] = []
        caveats: list[str] = []
        details: dict = {"tables": list(tables)}
        with connection.cursor() as cursor:
            blockers = self._wait_clear(cursor, (token or {}).get("xid"), started + timeout)
            if blockers:
                return not_purged(
                    f"{', '.join(blockers)}: a transaction open since before the erasure, "
                    "which can still see the erased row versions (VACUUM FULL would keep "
                    "them, pg_repack waits for it); retry when it has finished"
                )
            old_timeout, lock_ms = self._set_lock_timeout(cursor, timeout)
            try:
                failed = self._rewrite(
                    connection, cursor, tables, lock_ms / 1000, notes, caveats, details, method
                )
                if failed is None:
                    failed = self._after_rewrite(
                        connection, cursor, tables, timeout, notes, caveats
                    )
                if failed is not None:
                    return failed
            finally:
                cursor.execute("SELECT set_config('lock_timeout', %s, false)", [old_timeout])
        details["seconds"] = round(time.monotonic() - started, 3)
        return PurgeOutcome("purged", vacuumed=True, notes=notes, caveats=caveats, details=details)

    @staticmethod
    def _set_lock_timeout(cursor, timeout: float) -> tuple[str, int]:
        """Set this session's ``lock_timeout`` for the rewrite: ``(the old value, the new ms)``."""
        cursor.execute("SELECT current_setting('lock_timeout')")
        old_timeout = cursor.fetchone()[0]
        cursor.execute("SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'")
        deadlock_ms = int(cursor.fetchone()[0])
        # An autovacuum worker holding the table is cancelled by the server
        # once it has blocked us for deadlock_timeout: wait at least that.
        lock_ms = max(int(timeout * 1000), deadlock_ms + 500)
        cursor.execute("SELECT set_config('lock_timeout', %s, false)", [f"{lock_ms}ms"])
        return old_timeout, lock_ms

    def _after_rewrite(
        self, connection, cursor, tables, timeout: float, notes: list, caveats: list
    ) -> PurgeOutcome | None:
        """Statistics refreshed and their old versions purged, then a checkpoint; the
        outcome of a step that failed (None: all done)."""
        qn = connection.ops.quote_name
        if tables:
            cursor.execute(f"ANALYZE {', '.join(qn(t) for t in tables)}")
        if self._is_superuser(cursor):
            self._drop_stale_statistics(connection, cursor, tables, notes)
            failed = self._purge_statistics(cursor, timeout, notes)
            if failed is not None:
                return failed
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
                f"PostgreSQL: CHECKPOINT not run ({first_line(exc)}): the rewritten "
                "files reach the disk at the next scheduled checkpoint"
            )
        return None

    def _drop_stale_statistics(self, connection, cursor, tables, notes: list) -> None:
        """Statistics ANALYZE does not replace, dropped by hand (superuser only)."""
        qn = connection.ops.quote_name
        # ANALYZE of an empty table keeps the old statistics (sampled
        # values of the rows just erased): drop them by hand.
        for table in tables:
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {qn(table)})")
            if not cursor.fetchone()[0]:
                cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [table])
        # A partitioned table's own statistics sample every leaf, the
        # erased rows too; ANALYZE of the parent would re-read all its
        # leaves, so they are dropped (queries prune to leaves, whose
        # statistics were just refreshed).
        parents = self._parents(cursor, tables)
        for parent in parents:
            cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [parent])
        if parents:
            notes.append(
                "statistics of the partitioned tables as a whole dropped "
                "(each rewritten partition analysed)"
            )

    def _purge_statistics(self, cursor, timeout: float, notes: list) -> PurgeOutcome | None:
        """``VACUUM FULL pg_statistic`` once nothing can see the replaced statistics."""
        # The statistics ANALYZE just replaced are dead row versions of
        # pg_statistic: wait, as above, for what could still see them.
        cursor.execute("SELECT pg_current_xact_id()::text")
        analyzed = cursor.fetchone()[0]
        blockers = self._wait_clear(cursor, analyzed, time.monotonic() + timeout, catalog=True)
        if blockers:
            return not_purged(
                f"{', '.join(blockers)}: a transaction open since before the "
                "statistics were refreshed, so the old statistics (sampled "
                "values) cannot be purged yet; retry when it has finished",
                vacuumed=True,
                notes=notes,
            )
        try:
            cursor.execute("VACUUM FULL pg_statistic")
        except DatabaseError as exc:
            return not_purged(
                f"VACUUM FULL pg_statistic failed: {first_line(exc)}",
                vacuumed=True,
                notes=notes,
            )
        notes.append("pg_statistic rewritten")
        return None

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
                details["rewrite"] = f"pg_repack {repack.repack_client_version()}"
                failed = self._repack(connection, cursor, tables, timeout, notes)
                details["rewrite_seconds"] = round(time.monotonic() - started, 3)
                return failed
            if choice == "online":
                return not_purged(
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
                return not_purged(
                    f"VACUUM FULL {table} failed: {first_line(exc)} (another session "
                    "holds a lock on the table?)",
                    notes=notes,
                )
        return None

    def _repack_missing(self, connection, cursor) -> str:
        """Why pg_repack cannot run here ("" when it can)."""
        client = repack.repack_client_version()
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
        quote = repack.quote_ident
        command = [
            "pg_repack", "--no-order", "--no-kill-backend", "--no-analyze",
            f"--wait-timeout={wait}", f"--dbname={dbname}",
            *(f"--table={quote(schema)}.{quote(rel)}" for schema, rel, _ in before),
        ]  # fmt: skip
        run = repack.run_repack(command, repack.repack_env(connection), timeout)
        if run.waited_for or run.code != 0:
            self._repack_cleanup(cursor, tables)
        if run.waited_for:
            return not_purged(
                f"pg_repack waited more than {timeout:g}s for {run.waited_for} to finish "
                "(open since it began, it keeps pg_repack from taking its locks); retry "
                "when it has finished",
                notes=notes,
            )
        if run.code != 0:
            return not_purged(f"pg_repack failed: {run.problem()}", notes=notes)
        after = self._relfilenodes(cursor, tables)
        skipped = [
            rel for (_, rel, old), (_, _, new) in zip(before, after, strict=True) if old == new
        ]
        if skipped:
            return not_purged(
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
        """The relation files to scan, or why there are none (:mod:`.pg_files`)."""
        return pg_files.scan_files(connection, tables)

    def read_through_sql(self, connection, tables, pieces, *, heartbeat=None) -> sql_scan.SqlScan:
        """The byte scan through ``pg_read_binary_file`` (:mod:`.sql_scan`); a note says
        why it cannot run when this role lacks the grants."""
        with connection.cursor() as cursor:
            missing = sql_scan.unreadable(cursor)
            if missing:
                return sql_scan.SqlScan(note=missing)
            return sql_scan.scan(cursor, tables, pieces, heartbeat=heartbeat)

    def caveats(self, connection) -> list[str]:
        return [
            "PostgreSQL: the erased rows are gone from the tables' heap, index and TOAST "
            "files and from the planner statistics (the tables rewritten by pg_repack or "
            "VACUUM FULL, ANALYZE, VACUUM FULL pg_statistic). Not reached: WAL segments in "
            "pg_wal until they are recycled, the WAL archive, base backups and pg_dump "
            "files, and server logs (if statements are logged). After restoring a "
            "backup, run 'manage.py memory erase --replay'.",
            f"PostgreSQL: {REPLICAS_CAVEAT}",
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
