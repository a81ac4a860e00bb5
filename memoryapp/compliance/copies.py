"""Every copy of the data: each configured server's check of an erasure, recorded per server.

After the primary's purge and verification (:func:`.purging.finish`), :func:`record` writes
one :class:`~memoryapp.models.CopyCheck` per server: the primary's from its verification,
and one ``not checked`` per replica alias, holding the erased fragments sealed under the
erasure key and the primary's WAL position. Each replica is then checked at once (bounded
by ``MEMORYAPP_REPLICA_REPLAY_WAIT``) and, if it could not be yet, by the worker's later
rounds (:func:`check_pending`) or by ``manage.py memory verifier`` beside it
(:func:`verify_here`). The receipt's ``details["copies"]`` lists every server's result
(:class:`memoryapp.rules.outcomes.CopyResult`) and ``details["outcome"]`` is the weakest:
a receipt is *verified on every copy* only when each configured server reported clean.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from memoryapp import conf
from memoryapp.compliance import copy_scan, probes, sealed
from memoryapp.fields import now
from memoryapp.models import CopyCheck, ErasureReceipt
from memoryapp.rules.copy_text import NO_REPORT, weakest
from memoryapp.rules.outcomes import CopyResult, Outcome, plain_reason

PENDING = (Outcome.NOT_CHECKED,)


def replica_aliases() -> list[str]:
    """The replica aliases configured (``MEMORYAPP_REPLICA_DATABASES``, filled from
    ``DATABASE_REPLICA_URLS``): each a streaming copy of the default database."""
    return conf.replica_databases()


def fragments(receipts: Sequence[ErasureReceipt]) -> dict[str, dict[str, list[bytes]]]:
    """Each receipt's byte-scan fragments per database, read before the receipt drops
    them (a verified receipt empties ``sealed``): the copies are scanned for the same."""
    out: dict[str, dict[str, list[bytes]]] = {}
    for r in receipts:
        opened = sealed.unseal(r.sealed)
        held = dict(opened[1]) if opened else {}
        for alias in r.databases:
            pieces = probes.recall(r.id, alias)
            if pieces is not None:
                held[alias] = pieces
        out[r.id] = held
    return out


def record(
    receipts: Sequence[ErasureReceipt], held: dict[str, dict[str, list[bytes]]], *, using: str
) -> None:
    """The primary's result per database, the replicas' checks requested and tried now."""
    for r in receipts:
        if not r.purged:
            continue  # no copy is checked before the purge completed
        pieces = held.get(r.id, {})
        erased = {
            alias: _record_primary(r, alias, pieces.get(alias), using) for alias in r.databases
        }
        if (
            r.verified
            and erased.get(DEFAULT_DB_ALIAS, Outcome.NOTHING_ERASED) != Outcome.NOTHING_ERASED
        ):
            lsn = copy_scan.position(DEFAULT_DB_ALIAS)
            for replica in replica_aliases():
                _request(r, replica, pieces.get(DEFAULT_DB_ALIAS), lsn, using)
            check_pending(using=using, receipt=r, wait=conf.replica_replay_wait())
        summarize(r, using=using)


def _record_primary(r: ErasureReceipt, alias: str, pieces, using: str) -> Outcome:
    """The primary's own verification (:mod:`.purging`) as its copy's result."""
    info = (r.details or {}).get("aliases", {}).get(alias, {})
    facts = info.get("verification") or {}
    ident, role = copy_scan.identify(alias)
    scan = facts.get("scan") or {}
    outcome = Outcome(facts.get("outcome") or Outcome.NOT_VERIFIED)
    if not r.verified:
        outcome = Outcome.NOT_VERIFIED
    fields: dict = {
        "system_identifier": ident,
        "role": role,
        "sealed": None,
        "checked_at": now(),
        "outcome": outcome,
        "reason": "",
        "method": scan.get("read", "") if "files" in scan else "",
        "facts": {k: v for k, v in scan.items() if k in ("files", "bytes", "found")},
    }
    if outcome == Outcome.NOT_VERIFIED:
        fields["reason"] = "its check did not pass (see the verification)"
    elif outcome == Outcome.UNSCANNED and alias in conf.copy_verifiers() and pieces:
        # Its verifier reads the files beside it: not checked until it reports.
        fields.update(outcome=Outcome.NOT_CHECKED, checked_at=None, facts=_what(r, alias))
        fields["sealed"] = sealed.seal([], {alias: pieces})
    elif outcome == Outcome.UNSCANNED:
        fields["reason"] = plain_reason(str(facts.get("scan_unavailable") or "no byte scan ran"))
    CopyCheck.objects.using(using).update_or_create(receipt=r, server=alias, defaults=fields)
    return outcome


def _what(r: ErasureReceipt, alias: str) -> dict:
    """What a later check of a copy needs besides the fragments: the relations scanned."""
    info = (r.details or {}).get("aliases", {}).get(alias, {})
    return {"tables": list((info.get("purge") or {}).get("tables") or [])}


def _request(r: ErasureReceipt, replica: str, pieces, lsn: str, using: str) -> None:
    """A replica's check, ``not checked`` until it reports (kept if already there)."""
    CopyCheck.objects.using(using).get_or_create(
        receipt=r,
        server=replica,
        defaults={
            "role": "replica",
            "outcome": Outcome.NOT_CHECKED,
            "lsn": lsn,
            "facts": _what(r, DEFAULT_DB_ALIAS),
            "sealed": sealed.seal([], {replica: list(pieces or [])}),
        },
    )


def _pieces(row: CopyCheck) -> list[bytes]:
    opened = sealed.unseal(row.sealed)
    return opened[1].get(row.server, []) if opened else []


def check_pending(
    *, using: str = DEFAULT_DB_ALIAS, receipt: ErasureReceipt | None = None, wait: float = 0.0
) -> int:
    """Check each replica still ``not checked`` that this process can reach (the worker's
    rounds, and once right after an erasure); the rows settled."""
    rows = CopyCheck.objects.using(using).filter(outcome__in=PENDING, server__in=replica_aliases())
    if receipt is not None:
        rows = rows.filter(receipt=receipt)
    settled = 0
    for row in rows.select_related("receipt"):
        try:
            result = copy_scan.check(
                row.server,
                primary=DEFAULT_DB_ALIAS,
                erased_ids=row.receipt.erased_ids or {},
                tables=row.facts.get("tables", []),
                pieces=_pieces(row),
                lsn=row.lsn,
                wait=wait,
            )
        except (DatabaseError, OSError) as exc:  # the server is away: checked at a later round
            connections[row.server].close_if_unusable_or_obsolete()
            why = f"its server could not be reached ({type(exc).__name__})"
            result = copy_scan.Check(Outcome.NOT_CHECKED, why)
        if result.outcome == Outcome.UNSCANNED and row.server in conf.copy_verifiers():
            # Its verifier reads the files: the worker's "cannot read" is no result.
            result = dataclasses.replace(result, outcome=Outcome.NOT_CHECKED, reason=NO_REPORT)
        settled += save(row, result, using=using)
        if receipt is None:
            summarize(row.receipt, using=using)
    return settled


def verify_here(server: str, data_directory: str, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """``memory verifier``: check ``server``'s pending rows reading its files under
    ``data_directory`` (this process runs beside it); results written on the primary."""
    rows = CopyCheck.objects.using(using).filter(outcome__in=PENDING, server=server)
    settled = 0
    for row in rows.select_related("receipt"):
        result = copy_scan.check(
            server,
            primary=using,
            erased_ids=row.receipt.erased_ids or {},
            tables=row.facts.get("tables", []),
            pieces=_pieces(row),
            lsn=row.lsn,
            wait=conf.replica_replay_wait(),
            data_directory=data_directory,
        )
        settled += save(row, result, using=using)
        summarize(row.receipt, using=using)
    return settled


def save(row: CopyCheck, result: copy_scan.Check, *, using: str) -> int:
    """Write a check's result on its row; 1 when it settled (no longer ``not checked``)."""
    row.attempts += 1
    row.outcome = result.outcome
    row.reason = result.reason
    row.method = result.method or row.method
    row.system_identifier = result.system_identifier or row.system_identifier
    row.role = result.role or row.role
    row.facts = {**row.facts, **result.facts}
    settled = result.outcome != Outcome.NOT_CHECKED
    if settled:
        row.checked_at = now()
    if result.outcome in (Outcome.VERIFIED_BY_SCAN, Outcome.UNSCANNED):
        row.sealed = None  # nothing is left to scan for on this copy
    row.save(using=using)
    return int(settled)


def results(r: ErasureReceipt, *, using: str = DEFAULT_DB_ALIAS) -> list[CopyResult]:
    """Every server's result for ``r``, the primary first."""
    out = []
    for row in CopyCheck.objects.using(using).filter(receipt=r).order_by("id"):
        out.append(
            CopyResult(
                server="primary" if row.server == DEFAULT_DB_ALIAS else row.server,
                role=row.role,
                system_identifier=row.system_identifier,
                outcome=Outcome(row.outcome),
                reason=row.reason,
                at=row.checked_at.isoformat() if row.checked_at else "",
            )
        )
    return out


def summarize(r: ErasureReceipt, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Put the copies' results on the receipt (``details["copies"]``, ``["outcome"]``)."""
    copies = [{**dataclasses.asdict(c), "outcome": str(c.outcome)} for c in results(r, using=using)]
    with transaction.atomic(using=using):
        fresh = ErasureReceipt.objects.using(using).select_for_update().get(pk=r.pk)
        details = fresh.details or {}
        details["copies"] = copies
        details["outcome"] = str(weakest(copies))
        fresh.details = details
        fresh.save(using=using, update_fields=["details"])
    r.details = details


def late(*, using: str = DEFAULT_DB_ALIAS, at: dt.datetime | None = None) -> list[CopyCheck]:
    """The copies still ``not checked`` longer than ``MEMORYAPP_COPY_REPORT_AFTER``."""
    cutoff = (at or now()) - dt.timedelta(seconds=conf.copy_report_after())
    return list(
        CopyCheck.objects.using(using)
        .filter(outcome__in=PENDING, requested_at__lte=cutoff)
        .order_by("requested_at")
    )


def late_by_server(*, using: str = DEFAULT_DB_ALIAS) -> dict[str, int]:
    """How many erasures each server has not reported on past ``MEMORYAPP_COPY_REPORT_AFTER``
    (``/healthz``, ``/metrics``, the admin overview)."""
    counts: dict[str, int] = {}
    for row in late(using=using):
        name = "primary" if row.server == DEFAULT_DB_ALIAS else row.server
        counts[name] = counts.get(name, 0) + 1
    return counts
