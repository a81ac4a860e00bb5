"""Stronger purges, for a purge whose verification still finds erased bytes (issue 27).

:func:`ladder` lists, per vendor and configured ``MEMORYAPP_ERASURE_PURGE_METHOD``,
the purges an erasure may try in turn, weakest (and cheapest) first;
:func:`run` runs one. :mod:`memoryapp.erasure.escalation` climbs the ladder:
the first step is the configured purge, and a step runs only when the
verification of the one before it found erased bytes. The common case — the
first purge verifies — costs what it cost before (bench/ESCALATION.md).

- SQLite. ``secure_delete`` zeroes a deleted cell where it lies, but when a
  deletion rebalances a b-tree, SQLite rebuilds a surviving page from its cells
  without zeroing the space those cells used to fill (``rebuildPage`` in
  btree.c): copies of cells that were moved away, and later deleted elsewhere,
  stay there. ``incremental_vacuum`` moves such a page whole. So:
  1. the configured purge (incremental, or ``VACUUM`` under ``"rewrite"``);
  2. *index rebuild*: ``REINDEX`` of each erased table, which empties its
     indexes (their pages freed, and zeroed by ``secure_delete``) and builds
     them anew, then the incremental purge again. Index pages are where the
     residue was seen (tests/test_escalation.py reproduces it), and rebuilding
     them costs a fraction of a ``VACUUM`` (bench/ESCALATION.md);
  3. *full rewrite*: ``VACUUM``, which rebuilds every page of the file, table
     pages too.
- PostgreSQL. A rewrite copies live row versions only, so residue after one
  means the rewrite did not cover where the bytes are (a partition another
  program moved a row into, a rewrite skipped):
  1. the configured purge of the partitions that held the erased rows
     (``pg_repack``, or ``VACUUM FULL``);
  2. ``VACUUM FULL`` of those partitions (skipped when step 1 already ran
     ``VACUUM FULL``; not under ``"online"``, which promises no table lock);
  3. the whole tables: every partition of each erased table, rewritten
     (``VACUUM FULL``; ``pg_repack`` under ``"online"``), and the byte scan
     then reads every partition.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import DatabaseError

from .purge import PurgeOutcome, _first_line, _not_purged


@dataclass(frozen=True)
class Step:
    """One purge of the ladder: its name in the receipt and what it runs."""

    name: str
    """Plain words for the receipt ("incremental purge", "index rebuild", …)."""
    method: str
    """The ``MEMORYAPP_ERASURE_PURGE_METHOD`` the vendor purge runs with."""
    reindex: bool = False
    """SQLite: ``REINDEX`` each erased table before the purge."""
    whole_tables: bool = False
    """PostgreSQL: every partition of the erased tables, not only those that held rows."""

    def repeats(self, previous: PurgeOutcome) -> bool:
        """True when ``previous`` already did what this step would (PostgreSQL's
        ``"auto"`` falls back to ``VACUUM FULL`` without pg_repack): it is skipped."""
        return (
            self.method == "rewrite"
            and not self.whole_tables
            and previous.details.get("rewrite") == "VACUUM FULL"
        )


def ladder(vendor: str, method: str) -> list[Step]:
    """The purges to try in turn on ``vendor`` under the configured ``method``."""
    if vendor == "sqlite":
        if method == "rewrite":
            return [Step("full rewrite (VACUUM)", "rewrite")]
        return [
            Step("incremental purge", method),
            Step("index rebuild (REINDEX) and incremental purge", method, reindex=True),
            Step("full rewrite (VACUUM)", "rewrite"),
        ]
    if vendor == "postgresql":
        first = {
            "auto": "rewrite of the erased partitions (pg_repack, VACUUM FULL without it)",
            "online": "rewrite of the erased partitions (pg_repack)",
            "rewrite": "rewrite of the erased partitions (VACUUM FULL)",
        }[method]
        if method == "online":
            return [
                Step(first, "online"),
                Step("rewrite of the whole tables (pg_repack)", "online", whole_tables=True),
            ]
        steps = [Step(first, method)]
        if method != "rewrite":
            steps.append(Step("rewrite of the erased partitions (VACUUM FULL)", "rewrite"))
        steps.append(
            Step("rewrite of the whole tables (VACUUM FULL)", "rewrite", whole_tables=True)
        )
        return steps
    return [Step("purge", method)]


def run(
    step: Step, vendor, connection, tables: Sequence[str], *, token: dict, timeout: float
) -> PurgeOutcome:
    """Run ``step`` on ``tables`` (the relations to purge, as the vendor names them)."""
    if step.reindex:
        failed = _reindex(connection, tables, time.monotonic() + timeout)
        if failed is not None:
            return failed
    outcome = vendor.purge(connection, tables, token=token, timeout=timeout, method=step.method)
    if step.reindex and outcome.ok:
        outcome.notes.insert(0, f"indexes of {len(tables)} table(s) rebuilt (REINDEX)")
        outcome.details["reindexed"] = list(tables)
    return outcome


def _reindex(connection, tables: Sequence[str], deadline: float) -> PurgeOutcome | None:
    """``REINDEX`` each table (SQLite), retrying while another connection writes."""
    if connection.in_atomic_block:
        return _not_purged("called inside a transaction (the index rebuild cannot run there)")
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        old_timeout = int(cursor.fetchone()[0])
        # Short waits retried by this loop, as the purge does (the 30 s busy
        # handler would otherwise hold each try that long).
        cursor.execute("PRAGMA busy_timeout = 200")
        try:
            for table in tables:
                while True:
                    try:
                        cursor.execute(f"REINDEX {qn(table)}")
                        break
                    except DatabaseError as exc:
                        if "locked" not in str(exc) or time.monotonic() >= deadline:
                            return _not_purged(f"REINDEX {table} failed: {_first_line(exc)}")
                        time.sleep(0.05)
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {old_timeout}")
    return None


__all__ = ["Step", "ladder", "run"]
