"""Stronger purges, for a purge whose verification still finds erased bytes.

:func:`ladder` lists, per vendor and configured ``MEMORYAPP_ERASURE_PURGE_METHOD``,
the purges an erasure may try in turn, weakest (and cheapest) first;
:func:`run` runs one. :mod:`memoryapp.compliance.escalation` climbs the ladder:
the first step is the configured purge, and a step runs only when the
verification of the one before it found erased bytes. The common case — the
first purge verifies — costs what it cost before (bench/ESCALATION.md).

- SQLite. ``secure_delete`` zeroes a deleted cell where it lies, but when a
  deletion rebalances a b-tree, SQLite rebuilds a surviving page from its cells
  without zeroing the space those cells used to fill (``rebuildPage`` in
  btree.c): copies of cells that were moved away, and later deleted elsewhere,
  stay there — mostly in index pages (tests/compliance/test_escalation.py
  reproduces it). ``incremental_vacuum`` moves such a page whole. So:
  1. the configured purge (incremental, or ``VACUUM`` under ``"rewrite"``);
  2. *full rewrite*: ``VACUUM``, which builds every page anew. A ``REINDEX`` of
     the erased tables (a rebuild of their index pages only) was measured as
     the step between and not kept: slower than ``VACUUM`` at a million
     memories (25 s against 18 s), and it cannot reach table pages, so when it
     failed the full rewrite and a third byte scan would follow
     (bench/ESCALATION.md).
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

A step that rewrites every tenant's rows (``everything``: PostgreSQL's whole
tables, SQLite's ``VACUUM`` after the incremental purge) is, as an escalation,
started at most once per ``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL`` across
processes; a step that already left a receipt's residue is not run again for it
automatically (:mod:`memoryapp.compliance.escalation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memoryapp.db.purge.common import PurgeOutcome


@dataclass(frozen=True)
class Step:
    """One purge of the ladder: its name in the receipt and what it runs."""

    name: str
    """Plain words for the receipt ("incremental purge", "index rebuild", …)."""
    method: str
    """The ``MEMORYAPP_ERASURE_PURGE_METHOD`` the vendor purge runs with."""
    whole_tables: bool = False
    """PostgreSQL: every partition of the erased tables, not only those that held rows."""
    everything: bool = False
    """It rewrites every tenant's rows (the whole tables, SQLite's whole file): as an
    escalation, at most one per ``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL``
    (:mod:`memoryapp.compliance.escalation`)."""

    def repeats(self, previous: PurgeOutcome) -> bool:
        """True when ``previous`` already did what this step would, so it is skipped: a
        SQLite purge that rewrote the file anyway (the conversion to
        ``auto_vacuum=INCREMENTAL``, or a file it could not convert), PostgreSQL's
        ``"auto"`` falling back to ``VACUUM FULL`` without pg_repack."""
        if self.method != "rewrite" or self.whole_tables:
            return False
        done = previous.details
        return done.get("rewrite") == "VACUUM FULL" or str(done.get("reclaim", "")).startswith(
            "VACUUM"
        )


def ladder(vendor: str, method: str) -> list[Step]:
    """The purges to try in turn on ``vendor`` under the configured ``method``."""
    if vendor == "sqlite":
        full = Step("full rewrite (VACUUM)", "rewrite", everything=True)
        if method == "rewrite":
            return [full]
        return [Step("incremental purge", method), full]
    if vendor == "postgresql":
        first = {
            "auto": "rewrite of the erased partitions (pg_repack, VACUUM FULL without it)",
            "online": "rewrite of the erased partitions (pg_repack)",
            "rewrite": "rewrite of the erased partitions (VACUUM FULL)",
        }[method]
        if method == "online":
            return [
                Step(first, "online"),
                Step(
                    "rewrite of the whole tables (pg_repack)",
                    "online",
                    whole_tables=True,
                    everything=True,
                ),
            ]
        steps = [Step(first, method)]
        if method != "rewrite":
            steps.append(Step("rewrite of the erased partitions (VACUUM FULL)", "rewrite"))
        steps.append(
            Step(
                "rewrite of the whole tables (VACUUM FULL)",
                "rewrite",
                whole_tables=True,
                everything=True,
            )
        )
        return steps
    return [Step("purge", method)]


def run(
    step: Step, vendor, connection, tables: Sequence[str], *, token: dict, timeout: float
) -> PurgeOutcome:
    """Run ``step`` on ``tables`` (the relations to purge, as the vendor names them)."""
    return vendor.purge(connection, tables, token=token, timeout=timeout, method=step.method)


__all__ = ["Step", "ladder", "run"]
