"""Escalation, not repetition: a purge whose verification finds erased bytes tries a stronger one.

:func:`purge` runs the vendor's ladder (:mod:`memoryapp.db.ladder`) for the
receipts of one database: the configured purge, its verification, and — only
for the receipts whose verification found residue — the next stronger purge and
its verification, within the same attempt, until each verifies or the ladder
ends. Each step is recorded on the receipt (``details["aliases"][alias]
["purge_steps"]``) and, once more than one step ran, in its verification text in
plain words ("incremental purge at T1: 6 fragment(s) of erased values remained;
full rewrite at T2: verified"). A stronger step is written to the receipt
*before* it runs, so a process killed during it leaves an honest trace, and the
next attempt starts at that step rather than at the one already shown too weak.
What happens across attempts (backoff, a receipt that needs a person) is the
worker's (:mod:`.worker`); a receipt that no step verified is returned to it
unverified, as any failed purge is.

Never a loop (issue #38): a step that left a receipt's residue is not run again
for it automatically — the next attempt starts above it —, and once the
strongest step has left residue (a step's result says when it is the same as
the step before left: the bytes are live, no rewrite moves them) the receipt
*needs attention* at once, with that reason (``details["stalled"]``), rather
than repeating the strongest rewrite at every attempt. A step that rewrites
every tenant's rows (:attr:`memoryapp.db.ladder.Step.everything`) starts, as
an escalation, at most once per ``MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL`` on
a database (the last start is a ``schema_meta`` row, shared by every process):
a receipt that needs it sooner is recorded ``deferred`` and retried when the
interval has passed (``details["deferred_until"]``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable, Sequence

from django.db import connections

from memoryapp import conf, metrics
from memoryapp.compliance import phases
from memoryapp.db import ladder, meta
from memoryapp.db.purge.common import PurgeOutcome
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt

# What each step's verification came to (the ``outcome`` of a recorded step).
VERIFIED, RESIDUE, NOT_VERIFIED, NOT_PURGED = "verified", "residue", "not verified", "not purged"
STARTED, INTERRUPTED, DEFERRED = "started", "interrupted", "deferred"
SHOWN_STEPS = 8  # steps quoted in the verification text; the rest stay in the details

Check = tuple[bool, str, dict]
Verify = Callable[[str, ErasureReceipt, object, list[str]], Check]


def purge(
    alias: str,
    receipts: Sequence[ErasureReceipt],
    vendor,
    *,
    logical: Sequence[str],
    remainders: list[int] | None,
    token: dict,
    timeout: float,
    verify: Verify,
    using: str,
) -> dict[tuple[str, str], tuple[PurgeOutcome, Check | None]]:
    """Purge ``alias`` for ``receipts`` and verify each, escalating while residue is found.

    ``logical`` names the erased tables, ``remainders`` the hash partitions their
    rows were in (None: all). Returns, per (receipt id, alias), the outcome of
    the last purge that receipt saw and its verification (None when that purge
    did not complete), as the one-purge path did.
    """
    connection = connections[alias]
    steps = ladder.ladder(vendor.name, conf.erasure_purge_method())
    run_id = now().isoformat()
    first = _start(receipts, alias, len(steps))
    pending = list(receipts)
    results: dict[tuple[str, str], tuple[PurgeOutcome, Check | None]] = {}
    previous: PurgeOutcome | None = None
    for level in range(first, len(steps)):
        step = steps[level]
        if previous is not None and step.repeats(previous):
            continue
        if level > 0 and step.everything and not _slot(pending, alias, run_id, level, step):
            _waiting(pending, alias, results)
            break  # deferred: each receipt says until when
        remain = None if step.whole_tables else remainders
        tables, partitions = vendor.storage_tables(connection, logical, remain)
        at = now()
        entries = [_entry(r, alias, run_id, level, step, at) for r in pending]
        phases.report("purging" if previous is None else "escalating")
        _announce(pending, level, using)
        began = time.monotonic()
        outcome = ladder.run(step, vendor, connection, tables, token=token, timeout=timeout)
        seconds = time.monotonic() - began
        metrics.purge_done(vendor.name, seconds, ok=outcome.ok)
        if partitions:
            outcome.details["partitions"] = partitions
        outcome.details["step"] = step.name
        how = (vendor, tables, verify, seconds)
        still = _verify_each(alias, pending, entries, outcome, how, results)
        pending, previous = still, outcome
        if not pending:
            break
    for r in pending:
        _stall_if_top(r, alias, len(steps) - 1)
    return results


def _verify_each(alias: str, pending, entries, outcome: PurgeOutcome, how, results) -> list:
    """Verify each receipt after ``outcome`` (``how``: the vendor, the purged tables, the
    verification and the purge's seconds), record it in its step and in ``results``;
    the receipts with residue left."""
    vendor, tables, verify, seconds = how
    still = []
    for r, entry in zip(pending, entries, strict=True):
        check: Check | None = None
        if outcome.ok:
            phases.report("verifying")
            check = verify(alias, r, vendor, tables)
        results[(r.id, alias)] = (outcome, check)
        entry.update(_result(outcome, check), seconds=round(seconds, 3))
        if entry["outcome"] == RESIDUE:
            _compare(r, alias, entry)
            still.append(r)
    return still


def _announce(pending: list[ErasureReceipt], level: int, using: str) -> None:
    """A stronger step is written before it runs: a process killed during a long
    rewrite leaves the receipt saying so, and the next attempt starts there."""
    if level > 0:
        for r in pending:
            r.save(using=using, update_fields=["details"])


def _waiting(pending: list[ErasureReceipt], alias: str, results) -> None:
    """The outcome of receipts deferred before any purge ran in this attempt (a retry
    that starts at the deferred step): not purged, and why."""
    for r in pending:
        wait = PurgeOutcome("not purged: " + _steps(r, alias)[-1]["result"][:200])
        results.setdefault((r.id, alias), (wait, None))


def _slot(pending: list[ErasureReceipt], alias: str, run_id: str, level: int, step) -> bool:
    """Take the database's once-per-interval slot for a rewrite of every tenant's rows;
    when it is taken, record the step ``deferred`` on each receipt and answer False."""
    interval = conf.erasure_full_rewrite_interval()
    opens = meta.claim_interval(meta.FULL_REWRITE_KEY, time.time(), interval, using=alias)
    if not opens:
        return True
    until = dt.datetime.fromtimestamp(opens, dt.UTC)
    said = (
        f"deferred until {until:%Y-%m-%d %H:%M:%S} UTC: an erasure started a rewrite "
        f"of every tenant's rows less than {interval:g} s ago "
        "(MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL); retried then"
    )
    at = now()
    for r in pending:
        _entry(r, alias, run_id, level, step, at).update(outcome=DEFERRED, result=said)
        r.details["deferred_until"] = until.isoformat()
    return False


def _compare(r: ErasureReceipt, alias: str, entry: dict) -> None:
    """Say so when a step left the very fragments the step before it left."""
    mark = entry.get("residue")
    earlier = [s for s in _steps(r, alias) if s is not entry and s.get("outcome") == RESIDUE]
    if mark and earlier and earlier[-1].get("residue") == mark:
        entry["same_as"] = earlier[-1]["step"]
        entry["result"] += f" (the same as after {earlier[-1]['step']})"


def _stall_if_top(r: ErasureReceipt, alias: str, top: int) -> None:
    """The strongest step left residue: nothing stronger remains, and repeating it at
    every attempt would only rewrite again what it rewrote. The receipt needs a person."""
    last = _steps(r, alias)[-1]
    if last.get("outcome") != RESIDUE or int(last.get("level", 0)) < top:
        return
    same = f", the same as after {last['same_as']}" if last.get("same_as") else ""
    r.details["stalled"] = {
        "since": last["at"],
        "reason": (
            f"{last['step']} left {last.get('found', 'some')} fragment(s) of erased values"
            f"{same}; no stronger purge remains, so it is not repeated automatically: "
            "a person must look (docs/compliance.md, residue that stays)"
        ),
    }


def _steps(r: ErasureReceipt, alias: str) -> list[dict]:
    r.details = r.details or {}
    info = r.details.setdefault("aliases", {}).setdefault(alias, {})
    return info.setdefault("purge_steps", [])


def _entry(r, alias, run_id: str, level: int, step: ladder.Step, at) -> dict:
    entry = {"run": run_id, "level": level, "step": step.name, "at": at.isoformat()}
    entry["outcome"] = STARTED
    _steps(r, alias).append(entry)
    return entry


def _start(receipts: Sequence[ErasureReceipt], alias: str, count: int) -> int:
    """The ladder step this attempt starts at: above any step an earlier attempt showed
    too weak, at a step an earlier attempt was stopped in (``kill -9``), else the first.

    A step still ``started`` now was left so by a process that died during it; a
    ``deferred`` step waited for the full-rewrite interval and runs now.
    """
    level = 0
    for r in receipts:
        for entry in _steps(r, alias):
            if entry.get("outcome") == STARTED:
                entry["outcome"] = INTERRUPTED
                entry["result"] = "interrupted (the process stopped during it)"
            if entry.get("outcome") in (INTERRUPTED, DEFERRED):
                level = max(level, int(entry.get("level", 0)))
            elif entry.get("outcome") == RESIDUE:
                level = max(level, int(entry.get("level", 0)) + 1)
    return min(level, count - 1)


def _result(outcome: PurgeOutcome, check: Check | None) -> dict:
    """A step's outcome and its plain-words result."""
    if check is None:
        return {"outcome": NOT_PURGED, "result": outcome.status}
    ok, text, facts = check
    if ok:
        return {"outcome": VERIFIED, "result": "verified"}
    remaining = int(facts.get("remaining", 0))
    if remaining:
        # A stronger purge cannot remove rows that are still there.
        return {"outcome": NOT_VERIFIED, "result": f"{remaining} erased row(s) remain"}
    scan = facts.get("scan") or {}
    if scan.get("transient"):
        # The files changed under the scan (another rewrite): a stronger purge proves
        # nothing more; the worker checks again at its next attempt. (A scan that cannot
        # run here at all also says why it is "unavailable", but is no moment: when the
        # check failed on the structure, a stronger purge is what helps.)
        return {"outcome": NOT_VERIFIED, "result": "the byte scan could not run now"}
    found = int(scan.get("found", 0))
    if found:
        return {
            "outcome": RESIDUE,
            "result": f"{found} fragment(s) of erased values remained",
            "found": found,
            "residue": scan.get("residue"),  # which ones (a digest of their positions)
        }
    return {"outcome": RESIDUE, "result": f"not verified ({text})"}


def fingerprint(unexplained: Sequence[int]) -> str | None:
    """Which fragments were found unexplained, as a digest of their positions in the
    receipt's list (never the bytes): equal digests after two steps mean the same
    residue. None when none was."""
    if not unexplained:
        return None
    text = ",".join(str(i) for i in sorted(unexplained))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def describe(r: ErasureReceipt) -> None:
    """Put the purge steps on the receipt in plain words, once more than one ran.

    The verification text starts with them; ``purge_method`` names the stronger
    purges that ran. Called after the receipt is recorded (:func:`.purging.finish`).
    """
    multi = len(r.databases) > 1
    lines: list[str] = []
    stronger: list[str] = []
    for alias in r.databases:
        steps = (r.details or {}).get("aliases", {}).get(alias, {}).get("purge_steps", [])
        if len(steps) < 2 and not any(s.get("level") for s in steps):
            continue
        shown = steps[-SHOWN_STEPS:]
        said = [f"{s['step']} at {s['at'][:19]}: {s.get('result') or s['outcome']}" for s in shown]
        if len(steps) > len(shown):
            said.insert(0, f"{len(steps) - len(shown)} earlier step(s) in the details")
        lines.append((f"{alias}: " if multi else "") + "purge steps: " + "; ".join(said))
        stronger.extend(s["step"] for s in steps if s.get("level"))
    if not lines:
        return
    r.verification = " | ".join([*lines, r.verification])
    base = r.purge_method.split("; escalated to ")[0]
    if stronger:
        r.purge_method = (base + "; escalated to " + ", ".join(dict.fromkeys(stronger)))[:255]


__all__ = ["describe", "fingerprint", "purge"]
