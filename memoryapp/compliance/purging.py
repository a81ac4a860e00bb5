"""After the commit: run the vendor purge once per database (stronger ones while residue is
found), verify each receipt, record it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from memoryapp import conf
from memoryapp.compliance import attention, copies, escalation, probes, sealed
from memoryapp.compliance.kept import explained as explained_by_kept_rows
from memoryapp.compliance.receipts import append_ledger
from memoryapp.compliance.selection import (
    ADMIN_LOG,
    CONTENT_TABLES,
    ROW_MODELS,
    Target,
    batches,
    id_list,
    id_restriction,
    id_rows,
    purged_with,
    row_filter,
)
from memoryapp.db.purge import scan as byte_scan
from memoryapp.db.purge.common import PurgeOutcome
from memoryapp.db.purge.vendors import for_connection
from memoryapp.fields import now
from memoryapp.models import (
    RETRIED_STATES,
    UNFINISHED_STATES,
    ErasureReceipt,
    MemoryEvent,
    ReceiptState,
)
from memoryapp.rules.outcomes import Outcome, of_check, worst

logger = logging.getLogger(__name__)


def caveats(aliases, vendors, notes: Iterable[str] = ()) -> str:
    """The receipt's caveat text: each vendor's limits, then this purge's own notes."""
    lines: list[str] = []
    for alias in aliases:
        lines.extend(vendors[alias].caveats(connections[alias]))
    lines.extend(notes)
    return "\n".join(dict.fromkeys(lines))


def finish_after_commit(receipt_id: str, using: str) -> None:
    """The ``on_commit`` hook of an erasure made inside a transaction."""
    try:
        receipt = ErasureReceipt.objects.using(using).get(pk=receipt_id)
        finish([receipt], using=using)
    except Exception:  # an on_commit hook must not break the caller's request
        logger.warning("erasure %s: purge after commit failed", receipt_id, exc_info=True)


def finish(receipts: Sequence[ErasureReceipt], *, using: str) -> list[ErasureReceipt]:
    """Purge each database the receipts cover (once per database), verify, record.

    A receipt whose verification finds erased bytes gets the next stronger purge
    at once (:mod:`.escalation`), and its steps are recorded on it. Receipts
    already purged and verified are left as they are.
    """
    receipts = [
        r for r in receipts if r.state == ReceiptState.DELETED or (r.purged and not r.verified)
    ]
    if not receipts:
        return []
    _mark_started(receipts, using)
    results: dict[tuple[str, str], tuple[PurgeOutcome, tuple | None]] = {}
    aliases = list(dict.fromkeys(a for r in receipts for a in r.databases))
    vendors = {a: for_connection(connections[a]) for a in aliases}
    timeout = conf.erasure_purge_timeout()
    for alias in aliases:
        covered = [r for r in receipts if alias in r.databases]
        results.update(_purge_database(alias, covered, vendors[alias], timeout, using))
    held = copies.fragments(receipts)  # read before a verified receipt drops them
    _record_all(receipts, results, vendors, held, using)
    return list(receipts)


def _record_all(receipts: Sequence[ErasureReceipt], results, vendors, held, using: str) -> None:
    """Each receipt's outcome saved and its copies recorded, the databases settled, then
    the ledger written. The copies' rows are the last writes: settled after them, they
    leave no residue either (an SQLite WAL emptied after the last write, not before it)."""
    stamp = now()
    for r in receipts:
        _record(r, results, vendors, stamp)
        escalation.describe(r)
        r.save(using=using)
    copies.record(receipts, held, using=using)
    for alias, vendor in vendors.items():
        vendor.settle(connections[alias])
    for r in receipts:
        append_ledger(r)
        if r.verified:
            probes.forget(r.id)


def _mark_started(receipts: Sequence[ErasureReceipt], using: str) -> None:
    """Progress a reader of the receipt can see while the purge runs."""
    started = now().isoformat()
    for r in receipts:
        r.details = r.details or {}
        r.details.setdefault("phases", {})["purge_started"] = started
        r.save(using=using, update_fields=["details"])


def _purge_database(alias: str, covered: list[ErasureReceipt], vendor, timeout, using: str):
    """One vendor purge of ``alias`` for every receipt it covers (stronger ones while
    verification finds residue); ``(receipt id, alias) -> (outcome, check)``."""
    connection = connections[alias]
    infos = [(r.details or {}).get("aliases", {}).get(alias, {}) for r in covered]
    logical = purged_with(
        t for t in (*CONTENT_TABLES, ADMIN_LOG) if any(t in i.get("tables", ()) for i in infos)
    )
    remainders = _partitions([i for i in infos if i.get("tables")])
    tables, _ = vendor.storage_tables(connection, logical, remainders)
    if not tables:
        outcome = PurgeOutcome("purged", notes=["nothing to purge"])
        check: tuple[bool, str, dict] = (
            True,
            "nothing was deleted, so nothing needed purging",
            {"outcome": Outcome.NOTHING_ERASED.value},
        )
        return {(r.id, alias): (outcome, check) for r in covered}
    return escalation.purge(
        alias,
        covered,
        vendor,
        logical=logical,
        remainders=remainders,
        token=_newest_token([i.get("token") or {} for i in infos]),
        timeout=timeout,
        verify=_verify,
        using=using,
    )


def _partitions(infos: list[dict]) -> list[int] | None:
    """The hash partitions the receipts' rows were in; None when one receipt does not say
    (recorded before partitioning, or an erasure of everything): then every partition."""
    if any("partitions" not in i for i in infos):
        return None
    return sorted({int(p) for i in infos for p in i["partitions"]})


def _newest_token(tokens: list[dict]) -> dict:
    xids = [int(t["xid"]) for t in tokens if t.get("xid")]
    return {"xid": str(max(xids))} if xids else {}


def _record(r: ErasureReceipt, results, vendors, stamp) -> None:
    multi = len(r.databases) > 1
    statuses, texts, notes = [], [], []
    vacuumed = verified = True
    details = r.details or {"aliases": {}}
    for alias in r.databases:
        outcome, check = results[(r.id, alias)]
        prefix = f"{alias}: " if multi else ""
        if not outcome.ok:
            statuses.append(prefix + outcome.status.removeprefix("not purged: "))
        vacuumed = vacuumed and outcome.vacuumed
        notes.extend(outcome.caveats)
        info = details.setdefault("aliases", {}).setdefault(alias, {})
        info["purge"] = {**outcome.details, "notes": outcome.notes, "status": outcome.status}
        info["purge"]["caveats"] = outcome.caveats
        if check is None:
            verified = False
            texts.append(prefix + "not verified: the purge did not complete")
        else:
            ok, text, facts = check
            verified = verified and ok
            texts.append(prefix + text)
            info["verification"] = facts
    r.attempts += 1
    r.vacuumed = vacuumed
    r.purge_status = ("not purged: " + "; ".join(statuses))[:255] if statuses else "purged"
    r.verified = verified and not statuses
    r.verification = " | ".join(texts)
    _record_outcome(r, details, results, failed=bool(statuses))
    r.caveats = caveats(r.databases, vendors, notes)
    phases = details.setdefault("phases", {})
    phases["verified" if r.verified else "checked"] = stamp.isoformat()
    r.details = details
    r.updated_at = stamp
    if not statuses:
        r.purged_at = stamp
        phases["purged"] = stamp.isoformat()
    if r.verified:
        # Nothing is left to finish: the sealed request and fragments go now.
        r.state = ReceiptState.COMPLETE
        r.sealed = None
        r.claimed_by, r.claimed_until = "", None
        details.pop("next_attempt", None)
    else:
        # The retry is scheduled with the outcome, whoever made the attempt (the
        # worker, a request, `erase --retry`): backed off, or needing attention
        # once the automatic attempts are spent. Clearing the claim without a
        # due time would make the receipt due again at once.
        attention.schedule(r, stamp)


def _record_outcome(r: ErasureReceipt, details: dict, results, *, failed: bool) -> None:
    """The receipt's named outcome (:mod:`memoryapp.rules.outcomes`): its weakest database's.

    ``details["outcome"]`` and, when a byte scan was not possible somewhere,
    ``details["scan_unavailable"]`` (the reason, per database when there are several).
    """
    multi = len(r.databases) > 1
    outcomes: list[Outcome] = []
    reasons: list[str] = []
    for alias in r.databases:
        check = results[(r.id, alias)][1]
        facts = check[2] if check is not None else {}
        outcome = Outcome(facts.get("outcome") or Outcome.NOT_VERIFIED)
        outcomes.append(outcome)
        reason = str(facts.get("scan_unavailable") or "")
        if outcome == Outcome.UNSCANNED and reason:
            reasons.append(f"{alias}: {reason}" if multi else reason)
    outcome = Outcome.NOT_VERIFIED if failed else worst(outcomes)
    details["outcome"] = outcome.value
    if outcome == Outcome.UNSCANNED:
        details["scan_unavailable"] = "; ".join(reasons) or "no byte scan ran"
    else:
        details.pop("scan_unavailable", None)  # a reason of an earlier attempt


def _verify(alias: str, r: ErasureReceipt, vendor, tables: list[str]) -> tuple[bool, str, dict]:
    """SQL check, structural check and byte scan of one receipt on one database."""
    connection = connections[alias]
    facts: dict = {}
    remaining = _remaining(alias, r)
    parts = [f"SQL: {remaining} erased row(s) remain"]
    # Measured before the scan: a file it leaves to the scan (SQLite's WAL, when
    # others wrote after the purge) must then be read at least this far.
    structure = vendor.structure(connection)
    read: dict[str, int] = {}
    scan_ok, scan_text, scan_facts = _byte_scan(alias, r, vendor, tables, read)
    structure_ok, structure_text = structure.verdict(read)
    if structure_text:
        parts.append(structure_text)
    parts.append(scan_text)
    facts.update(structure.details)
    if scan_facts:
        facts["scan"] = scan_facts
    ok = remaining == 0 and structure_ok and scan_ok
    facts["remaining"] = remaining  # rows still there: no stronger purge removes them
    outcome, reason = of_check(ok, scan_facts)
    facts["outcome"] = outcome.value
    if outcome == Outcome.UNSCANNED:
        facts["scan_unavailable"] = reason
    return ok, "; ".join(parts), facts


def _byte_scan(alias: str, r: ErasureReceipt, vendor, tables, read: dict[str, int]) -> tuple:
    """The byte scan for the receipt's probes: (ok, text, facts or None); fills ``read``."""
    pieces = probes.recall(r.id, alias)
    if pieces is None:  # erased by another process (it died, or the worker purges)
        opened = sealed.unseal(r.sealed)
        pieces = opened[1].get(alias) if opened else None
    # A scan that cannot run here is no failure of the erasure (nothing more can be done
    # automatically) but no proof either: its facts say why, and the receipt's outcome
    # is "rewritten, not scanned" (memoryapp.rules.outcomes), never "verified by byte scan".
    if pieces is None:
        why = "the fragments of the erased values are neither in this process's memory nor "
        why += "readable from the receipt"
        return True, f"byte scan: not performed ({why})", {"unavailable": why}
    if not pieces:
        why = f"no erased value of {probes.MIN_PROBE_BYTES}+ bytes to probe"
        return True, f"byte scan: {why}", {"unavailable": why}
    files = vendor.scan_files(connections[alias], tables)
    if not files.possible and files.transient:
        # Not a limit of this deployment but a moment: never taken as verified.
        text = f"byte scan: could not run now ({files.note}); checked again at the next attempt"
        return False, text, {"unavailable": files.note, "transient": True}
    if not files.possible:
        return _scan_through_sql(alias, vendor, tables, pieces, files.note)
    found, scanned = byte_scan.scan(files.paths, pieces, read=read)
    return _scan_result(alias, tables, pieces, found, len(files.paths), scanned, "")


def _scan_through_sql(alias: str, vendor, tables, pieces: list[bytes], local_note: str) -> tuple:
    """The byte scan through the server's SQL (``pg_read_binary_file``), where this process
    cannot read the files itself; "not possible" with both reasons when neither can run."""
    through = vendor.read_through_sql(connections[alias], tables, pieces)
    if through is None:
        return True, f"byte scan: not possible ({local_note})", {"unavailable": local_note}
    if through.transient:
        text = f"byte scan: could not run now ({through.note}); checked again at the next attempt"
        return False, text, {"unavailable": through.note, "transient": True}
    if not through.complete:
        why = f"{local_note}; through SQL: {through.note}"
        return True, f"byte scan: not possible ({why})", {"unavailable": why}
    return _scan_result(
        alias, tables, pieces, through.found, through.files, through.bytes, " through SQL"
    )


def _scan_result(alias, tables, pieces, found, files: int, scanned: int, how: str) -> tuple:
    """(ok, text, facts) of a byte scan that ran: the found fragments kept rows explain
    do not count against it."""
    kept = _in_kept_rows(alias, pieces, found, tables)
    unexplained = len(found) - len(kept)
    result = "none found" if not found else f"{unexplained} found"
    if kept:
        result += f" ({len(kept)} more occur in rows that were kept)"
    text = (
        f"byte scan{how}: {files} file(s), {scanned} bytes, "
        f"{len(pieces)} fragment(s) of erased values: {result}"
    )
    facts = {
        "files": files,
        "bytes": scanned,
        "fragments": len(pieces),
        "found": unexplained,
        "found_in_kept_rows": len(kept),
        "residue": escalation.fingerprint(sorted(found - kept)),
        "read": "sql" if how else "files",
    }
    return unexplained == 0, text, facts


def _remaining(alias: str, r: ErasureReceipt) -> int:
    info = (r.details or {}).get("aliases", {}).get(alias, {})
    before = info.get("everything_before")
    if before:
        stamp = parse_datetime(before)
        n = sum(
            model.objects.using(alias).filter(created_at__lte=stamp).count()
            for model in ROW_MODELS.values()
        )
        return n + MemoryEvent.objects.using(alias).filter(timestamp__lte=stamp).count()
    opened = sealed.unseal(r.sealed)
    n = 0
    for table, model in ROW_MODELS.items():
        # An erased id counts only in a row the erasure selected: another namespace's row
        # sharing the id (PostgreSQL keys on namespace and id) was never erased.
        selected = _selected_by(table, opened[0]) if opened else Q()
        for batch in batches((r.erased_ids or {}).get(table) or []):
            n += model.objects.using(alias).filter(selected, pk__in=list(batch)).count()
    return n


def _selected_by(table: str, targets: Sequence[Target]) -> Q:
    """The rows of ``table`` the erasure's ``targets`` select: by their filter, or (ids)
    by the exact (namespace, id) rows they were resolved to."""
    q = Q(pk__in=[])
    for t in targets:
        found = row_filter(table, t)
        if found is not None:
            q |= found
        for rows in id_rows(table, t):
            q |= rows
        if id_list(table, t):
            q |= id_restriction(t)
    return q


def _in_kept_rows(
    alias: str, pieces: list[bytes], found: set[int], scanned: Sequence[str] = ()
) -> set[int]:
    """The found fragments (indexes into ``pieces``) that a kept row holds too, in any
    column (:mod:`.kept`): indexed lookups, then one pass over the rows of the
    relations the scan read (``scanned``) — never a query per fragment."""
    if not found:
        return set()
    order = sorted(found)
    return {order[j] for j in explained_by_kept_rows(alias, [pieces[i] for i in order], scanned)}


def unfinished(using: str | None = None, *, automatic: bool = False):
    """The receipts an erasure has not completed: requested, deleted but not verified, or
    needing attention. ``automatic``: only those the worker retries by itself (not the
    ones needing attention, which wait for a person)."""
    qs = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS)
    states = RETRIED_STATES if automatic else UNFINISHED_STATES
    return qs.filter(state__in=states).exclude(target_kind="").order_by("created_at", "id")
