"""Replay after restore: re-apply every recorded erasure to a database restored from a backup.

A backup taken before an erasure brings the erased rows back when restored,
and with them a receipts table that may not know the erasure. The receipts
are read from the database *and* from the ledger file
(``MEMORYAPP_ERASURE_LEDGER`` or an explicit path); each is re-applied by its
recorded ids and by its target — the subject or namespace matched through the
keyed HMAC, limited to rows created no later than the original erasure (rows
written afterwards were never part of it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import transaction

from memoryapp import conf
from memoryapp.compliance import deletion, engine
from memoryapp.compliance.receipts import (
    append_ledger,
    as_dict,
    from_dict,
    keyed_hmac,
    known_keys,
    parse_stamp,
    read_ledger,
)
from memoryapp.compliance.selection import ROW_MODELS, Target
from memoryapp.models import ErasureReceipt, ErasureTarget, Memory, ReviewItem, SessionSummary
from memoryapp.rules.validation import check_actor


@dataclass
class ReplayReport:
    """What a replay found and removed."""

    receipt: ErasureReceipt | None
    replayed: list[dict] = field(default_factory=list)
    restored_receipts: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-friendly form."""
        return {
            "receipt": as_dict(self.receipt) if self.receipt is not None else None,
            "replayed": self.replayed,
            "restored_receipts": self.restored_receipts,
            "counts": self.counts,
            "notes": self.notes,
        }


def _load(alias: str, ledger: str | None, notes: list[str]) -> tuple[list[ErasureReceipt], list]:
    """Receipts of the database plus those only the ledger knows (not yet saved)."""
    in_db = {r.pk: r for r in ErasureReceipt.objects.using(alias).order_by("created_at", "id")}
    missing: list[ErasureReceipt] = []
    path = ledger or conf.erasure_ledger_path()
    if path:
        if os.path.exists(path):
            for data in read_ledger(path):
                if data["id"] not in in_db:
                    receipt = from_dict(data)
                    missing.append(receipt)
                    in_db[receipt.pk] = receipt
        elif ledger:
            raise FileNotFoundError(f"ledger file {ledger} not found")
        else:
            notes.append(f"ledger file {path} does not exist yet")
    else:
        notes.append(
            "no ledger file (MEMORYAPP_ERASURE_LEDGER): only receipts still in the "
            "database are replayed"
        )
    ordered = sorted(in_db.values(), key=lambda r: (r.created_at, r.pk))
    return [r for r in ordered if r.target_kind != ErasureTarget.REPLAY], missing


def _candidates(alias: str) -> set[str]:
    """Every subject and namespace value stored on ``alias`` (to match receipt HMACs)."""
    values: set[str | None] = set()
    for model in (Memory, SessionSummary, ReviewItem):
        manager = model.objects.using(alias)
        values.update(manager.order_by().values_list("subject", flat=True).distinct())
        values.update(manager.order_by().values_list("namespace", flat=True).distinct())
    return {v for v in values if v is not None}


class _Resolver:
    """Find the stored value whose keyed HMAC a receipt recorded."""

    def __init__(self, aliases: Sequence[str]) -> None:
        self.keys = known_keys()
        values: set[str] = set()
        for alias in aliases:
            values |= _candidates(alias)
        self.values = sorted(values)
        self._tables: dict[str, dict[str, str]] = {}

    def known(self, receipt: ErasureReceipt) -> bool:
        return receipt.key_id in self.keys

    def find(self, receipt: ErasureReceipt, digest: str | None) -> str | None:
        if not digest or receipt.key_id not in self.keys:
            return None
        table = self._tables.get(receipt.key_id)
        if table is None:
            key = self.keys[receipt.key_id]
            table = {keyed_hmac(v, key): v for v in self.values}
            self._tables[receipt.key_id] = table
        return table.get(digest)


def _target_of(r: ErasureReceipt, resolver: _Resolver, notes: list[str]) -> Target:
    """The target that re-applies receipt ``r`` to the rows present now."""
    extra = {t: tuple(ids) for t, ids in (r.erased_ids or {}).items() if t in ROW_MODELS}
    subject = resolver.find(r, r.subject_hmac)
    namespace = resolver.find(r, r.namespace_hmac)
    unmatched = (r.subject_hmac and subject is None) or (r.namespace_hmac and namespace is None)
    if not resolver.known(r) and (r.subject_hmac or r.namespace_hmac):
        notes.append(
            f"receipt {r.pk}: made with an unknown erasure key (key id {r.key_id}); "
            "replayed by its recorded ids only"
        )
    if r.target_kind in (ErasureTarget.EVERYTHING, ErasureTarget.RETENTION):
        return _unnamed_target(r, extra)
    if r.target_kind not in _NAMED_KINDS or unmatched:
        # Ids, or a subject or namespace with no rows here (or the key is unknown).
        return Target(ErasureTarget.IDS, extra_ids=extra)
    return _named_target(r, subject, namespace, extra)


_NAMED_KINDS = (ErasureTarget.SUBJECT, ErasureTarget.NAMESPACE, ErasureTarget.REVIEW_ITEMS)


def _unnamed_target(r: ErasureReceipt, extra: dict) -> Target:
    """Everything before the receipt, or retention's cutoffs: no subject or namespace."""
    if r.target_kind == ErasureTarget.EVERYTHING:
        return Target(r.target_kind, before=parse_stamp(r.created_at), extra_ids=extra)
    # A cutoff that does not parse selects nothing, as a missing one does.
    stamps = ((r.criteria or {}).get("cutoffs") or {}).items()
    cutoffs = {t: s for t, c in stamps if (s := parse_stamp(c)) is not None}
    return Target(r.target_kind, cutoffs=cutoffs, extra_ids=extra)


def _named_target(r: ErasureReceipt, subject, namespace, extra: dict) -> Target:
    """A subject, namespace or review-queue erasure, by the keys the resolver found."""
    before = parse_stamp(r.created_at)
    if r.target_kind == ErasureTarget.SUBJECT:
        return Target(
            r.target_kind,
            subject=subject,
            namespace=namespace,
            include_authored=r.include_authored,
            before=before,
            extra_ids=extra,
        )
    if r.target_kind == ErasureTarget.NAMESPACE:
        return Target(r.target_kind, namespace=namespace, before=before, extra_ids=extra)
    statuses = (r.criteria or {}).get("statuses")
    return Target(
        r.target_kind,
        subject=subject,
        namespace=namespace,
        statuses=tuple(statuses) if statuses is not None else None,
        before=before,
        extra_ids=extra,
    )


def replay(
    *,
    ledger: str | None = None,
    actor: str = "",
    using: str | Sequence[str] | None = None,
    dry_run: bool = False,
    purge: bool = True,
) -> ReplayReport:
    """Re-apply every recorded erasure (docs/behaviour.md §9; ``manage.py memory erase --replay``).

    Receipts found only in the ledger are saved back into the database (the
    restored receipts table did not have them). One replay receipt records
    what this run removed, followed by one vendor purge.

    Args:
        ledger: a ledger file to read besides the database's receipts
            (default ``MEMORYAPP_ERASURE_LEDGER``).
        actor: who runs the replay.
        using: the databases (as for :func:`~memoryapp.compliance.erase`).
        dry_run: report what would be removed; change nothing.
        purge: False leaves the purge to ``memory erase --retry``.
    """
    actor = check_actor(actor)  # refused before anything runs: MemoryValidationError
    aliases = engine.aliases_for(using)
    primary = aliases[0]
    notes: list[str] = []
    receipts, missing = _load(primary, ledger, notes)
    resolver = _Resolver(aliases)
    targets = [_target_of(r, resolver, notes) for r in receipts]
    report = ReplayReport(receipt=None, notes=notes)
    if dry_run:
        for r, target in zip(receipts, targets, strict=True):
            counts: dict[str, int] = {}
            for alias in aliases:
                for t, n in deletion.apply(alias, target, delete=False).counts.items():
                    counts[t] = counts.get(t, 0) + n
            report.replayed.append(_line(r, counts))
            for t, n in counts.items():
                report.counts[t] = report.counts.get(t, 0) + n
        report.restored_receipts = len(missing)
        return report
    with transaction.atomic(using=primary):
        for receipt in missing:
            receipt.save(using=primary, force_insert=True)
    report.restored_receipts = len(missing)
    if not receipts:
        notes.append("no erasure receipts to replay")
        return report
    receipt, per_target = engine.execute(
        ErasureTarget.REPLAY,
        targets,
        aliases=aliases,
        actor=actor,
        criteria={"replayed": [r.pk for r in receipts], "restored_receipts": len(missing)},
        purge=purge,
    )
    report.receipt = receipt
    report.counts = dict(receipt.counts)
    report.replayed = [_line(r, c) for r, c in zip(receipts, per_target, strict=True)]
    receipt.criteria["per_receipt"] = {line["id"]: line["removed"] for line in report.replayed}
    receipt.save(using=primary, update_fields=["criteria"])
    append_ledger(receipt)
    return report


def _line(r: ErasureReceipt, counts: dict[str, int]) -> dict:
    created = parse_stamp(r.created_at)
    return {
        "id": r.pk,
        "kind": r.target_kind,
        "created_at": created.isoformat() if created else None,
        "removed": {t: int(n) for t, n in counts.items() if n},
    }


__all__ = ["ReplayReport", "replay"]
