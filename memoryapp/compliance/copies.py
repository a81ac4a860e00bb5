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

A checker claims a pending row (:func:`claim`, one conditional UPDATE) before scanning its
server, for ``MEMORYAPP_COPY_CLAIM_SECONDS``: two workers never scan the same (receipt,
server) at once, and a checker killed mid-scan leaves a claim that expires, after which
the next one takes the row over. A scan renews its claim as it goes (:func:`keeper`), so
a scan longer than the claim's term keeps it, and stops once another checker took it over.
A result is written only under the claim it was scanned with (:func:`save`): a scan that
lost its claim changes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.models import F, Q

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
        # A new result or request: a scanner still holding the old one's claim must not
        # save what it read for the old fragments over it (save() checks the claim).
        "claimed_by": "",
        "claimed_until": None,
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
    checker = checker_name()
    for row in rows.select_related("receipt"):
        if not claim(row, checker, using=using):
            continue  # another checker scans this server for this erasure now
        try:
            result = copy_scan.check(
                row.server,
                primary=DEFAULT_DB_ALIAS,
                erased_ids=row.receipt.erased_ids or {},
                tables=row.facts.get("tables", []),
                pieces=_pieces(row),
                lsn=row.lsn,
                wait=wait,
                heartbeat=keeper(row, checker, using=using),
            )
        except ClaimLost:
            continue  # taken over meanwhile: the new holder's result counts
        except (DatabaseError, OSError) as exc:  # the server is away: checked at a later round
            connections[row.server].close_if_unusable_or_obsolete()
            why = f"its server could not be reached ({type(exc).__name__})"
            result = copy_scan.Check(Outcome.NOT_CHECKED, why)
        except BaseException:
            release(row, checker, using=using)  # not held for the claim's whole term
            raise
        if result.outcome == Outcome.UNSCANNED and row.server in conf.copy_verifiers():
            # Its verifier reads the files: the worker's "cannot read" is no result.
            result = dataclasses.replace(result, outcome=Outcome.NOT_CHECKED, reason=NO_REPORT)
        settled += save(row, result, using=using, checker=checker)
        if receipt is None:
            summarize(row.receipt, using=using)
    return settled


def verify_here(server: str, data_directory: str, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """``memory verifier``: check ``server``'s pending rows reading its files under
    ``data_directory`` (this process runs beside it); results written on the primary."""
    rows = CopyCheck.objects.using(using).filter(outcome__in=PENDING, server=server)
    settled = 0
    checker = checker_name()
    for row in rows.select_related("receipt"):
        if not claim(row, checker, using=using):
            continue  # another checker scans it now
        try:
            result = copy_scan.check(
                server,
                primary=using,
                erased_ids=row.receipt.erased_ids or {},
                tables=row.facts.get("tables", []),
                pieces=_pieces(row),
                lsn=row.lsn,
                wait=conf.replica_replay_wait(),
                data_directory=data_directory,
                heartbeat=keeper(row, checker, using=using),
            )
        except ClaimLost:
            continue  # taken over meanwhile: the new holder's result counts
        except BaseException:
            release(row, checker, using=using)  # the next round (or checker) tries again
            raise
        settled += save(row, result, using=using, checker=checker)
        summarize(row.receipt, using=using)
    return settled


def checker_name() -> str:
    """Who claims copy checks in this round: host, process and a token of its own."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim(
    row: CopyCheck, checker: str, *, using: str = DEFAULT_DB_ALIAS, at: dt.datetime | None = None
) -> bool:
    """Take ``row`` for ``checker`` until ``MEMORYAPP_COPY_CLAIM_SECONDS`` from now.

    One conditional UPDATE: it takes a row still pending whose claim is absent or has
    expired, and nothing else. Two checkers racing for the same row both run it; the
    database lets one through (PostgreSQL re-reads the row the other committed and
    finds it claimed; SQLite runs one writer at a time). True when this call took it.
    """
    at = at or now()
    until = at + dt.timedelta(seconds=conf.copy_claim_seconds())
    taken = (
        CopyCheck.objects.using(using)
        .filter(pk=row.pk, outcome__in=PENDING)
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=at))
        .update(claimed_by=checker, claimed_until=until)
    )
    if taken:
        row.claimed_by, row.claimed_until = checker, until
    return bool(taken)


class ClaimLost(Exception):
    """A checker's claim on a copy check was taken over while it scanned (:func:`keeper`)."""


def keeper(row: CopyCheck, checker: str, *, using: str = DEFAULT_DB_ALIAS) -> Callable[[], None]:
    """The heartbeat of ``checker``'s scan of ``row``, called between files, chunks and polls.

    Once a third of the claim's term has passed since the claim (or the last renewal),
    it extends ``claimed_until`` by a full term, by one conditional UPDATE that holds
    only while ``checker`` still owns the row: a scan longer than
    ``MEMORYAPP_COPY_CLAIM_SECONDS`` keeps its row. When the row was taken over (the
    claim expired while this process stalled), or the renewal itself failed on the
    primary, it raises :class:`ClaimLost` and the scan stops, instead of reading on for
    a result :func:`save` would not write.
    """
    term = conf.copy_claim_seconds()
    renewed = time.monotonic()

    def beat() -> None:
        nonlocal renewed
        if time.monotonic() - renewed < term / 3:
            return
        try:
            until = now() + dt.timedelta(seconds=term)
            held = (
                CopyCheck.objects.using(using)
                .filter(pk=row.pk, claimed_by=checker, outcome__in=PENDING)
                .update(claimed_until=until)
            )
        except DatabaseError as exc:
            # The primary failed, not the server scanned: not a result for its copy (the
            # scan's own DatabaseError handling would blame that server). The claim expires
            # and a later round scans it again.
            raise ClaimLost(f"copy check {row.pk}: its claim could not be renewed") from exc
        if not held:
            raise ClaimLost(f"copy check {row.pk} was taken over from {checker}")
        row.claimed_until = until
        renewed = time.monotonic()

    return beat


def release(row: CopyCheck, checker: str, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Give ``row`` back unchecked (its scan failed here), if ``checker`` still holds it."""
    CopyCheck.objects.using(using).filter(pk=row.pk, claimed_by=checker).update(
        claimed_by="", claimed_until=None
    )


def save(row: CopyCheck, result: copy_scan.Check, *, using: str, checker: str | None = None) -> int:
    """Write a check's result on its row and release the claim; 1 when it settled (no
    longer ``not checked``).

    ``checker``: the claim the scan ran under. The result is written only while the
    row is still claimed by it; when the claim expired and another checker took the row
    over, nothing is written and 0 is returned (that checker's result counts).
    """
    settled = result.outcome != Outcome.NOT_CHECKED
    fields: dict = {
        "attempts": F("attempts") + 1,
        "outcome": result.outcome,
        "reason": result.reason,
        "method": result.method or row.method,
        "system_identifier": result.system_identifier or row.system_identifier,
        "role": result.role or row.role,
        "facts": {**row.facts, **result.facts},
        "claimed_by": "",
        "claimed_until": None,
    }
    if settled:
        fields["checked_at"] = now()
    if result.outcome in (Outcome.VERIFIED_BY_SCAN, Outcome.UNSCANNED):
        fields["sealed"] = None  # nothing is left to scan for on this copy
    rows = CopyCheck.objects.using(using).filter(pk=row.pk)
    if checker is not None:
        rows = rows.filter(claimed_by=checker)
    if not rows.update(**fields):
        return 0  # the claim was lost: another checker owns the row now
    row.refresh_from_db(using=using)
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
