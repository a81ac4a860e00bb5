"""What one database's deletion adds to its receipt: merged into the receipt as stored.

Two deletion passes of one receipt can meet: the process that recorded the request
and a later one resuming it (the worker, ``erase --retry``, an ``Idempotency-Key``
retry), each holding a copy read before the other committed. A second pass of a
database whose rows the first removed finds nothing to delete; if it saved its copy,
the receipt would say nothing was erased — no counts, no erased ids (which replay
after a restore needs), no partitions (so the purge would rewrite nothing that held
the rows) and no fragments (so the byte scan would look for nothing), and the
receipt would end verified while the erased text is still in the database files.

So a pass never saves its copy: it re-reads the receipt under a row lock and adds what
it removed (:func:`add`) — counts summed, ids, partitions, tables and fragments united,
the first deletion's time and the newest purge token kept. A pass that removed
nothing leaves the record as it was.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from memoryapp import conf
from memoryapp.compliance import sealed
from memoryapp.compliance.selection import ADMIN_LOG, CONTENT_TABLES, ROW_MODELS, Target
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, ErasureTarget, ReceiptState

MAX_RECORDED_IDS = 100_000  # per table; beyond it replay relies on the target's filters

# The fields a deletion pass records; copied back into the caller's receipt object.
RECORDED = (
    "counts",
    "erased_ids",
    "authored",
    "details",
    "sealed",
    "state",
    "updated_at",
    "attempts",
    "purge_status",
    "claimed_by",
    "claimed_until",
)


@dataclass
class Removed:
    """What one pass removed from one database (its additions to the receipt)."""

    counts: Counter[str] = field(default_factory=Counter)
    ids: dict[str, list[str]] = field(default_factory=dict)
    authored: list[str] = field(default_factory=list)
    pieces: list[bytes] = field(default_factory=list)
    info: dict = field(default_factory=dict)


def stored(receipt: ErasureReceipt, *, lock: bool) -> ErasureReceipt:
    """The receipt as committed now (``lock``: its row locked until the transaction ends)."""
    rows = ErasureReceipt.objects.using(receipt.databases[0])
    if lock:
        rows = rows.select_for_update()
    return rows.get(pk=receipt.pk)


def adopt(receipt: ErasureReceipt, source: ErasureReceipt) -> None:
    """Make the caller's ``receipt`` object say what ``source`` (as stored) says."""
    for name in RECORDED:
        setattr(receipt, name, getattr(source, name))


def done(receipt: ErasureReceipt, alias: str) -> bool:
    """Whether ``alias``'s deletion of ``receipt`` has committed."""
    return bool(((receipt.details or {}).get("aliases") or {}).get(alias, {}).get("deleted_at"))


def renew(receipt: ErasureReceipt, holder: str) -> bool:
    """Extend ``holder``'s lease on ``receipt`` (a long deletion outlasting it); False when
    ``holder`` no longer holds it (it ran out and another process took it over)."""
    if not holder:
        return False
    until = now() + dt.timedelta(seconds=conf.erasure_worker_lease())
    rows = ErasureReceipt.objects.using(receipt.databases[0])
    if not rows.filter(pk=receipt.pk, claimed_by=holder).update(claimed_until=until):
        return False
    receipt.claimed_by, receipt.claimed_until = holder, until
    return True


def add(
    receipt: ErasureReceipt,
    alias: str,
    removed: Removed,
    *,
    targets: Sequence[Target],
    holder: str,
) -> ErasureReceipt:
    """Add ``removed`` (``alias``'s committed deletion) to ``receipt`` as stored, and save.

    Runs under the receipt's row lock (inside ``alias``'s transaction when the receipt
    lives there), so two passes add one after the other, never one over the other.
    ``receipt`` (the caller's object) then says what is stored. Returns it.
    """
    with transaction.atomic(using=receipt.databases[0]):
        current = stored(receipt, lock=True)
        details = current.details if isinstance(current.details, dict) else {}
        current.details = details
        _add_rows(current, removed)
        opened = sealed.unseal(current.sealed)
        pieces = dict(opened[1]) if opened else {}
        pieces[alias] = _united(pieces.get(alias, []), removed.pieces)
        aliases = details.setdefault("aliases", {})
        aliases[alias] = _merged_info(aliases.get(alias), removed.info)
        aliases[alias]["probe_fragments"] = len(pieces[alias])
        if current.state == ReceiptState.REQUESTED and all(
            done(current, a) for a in current.databases
        ):
            current.state = ReceiptState.DELETED
            details.setdefault("phases", {}).setdefault("deleted", now().isoformat())
        current.sealed = sealed.seal(list(targets), pieces)
        current.updated_at = now()
        if holder and current.claimed_by == holder:
            current.claimed_until = now() + dt.timedelta(seconds=conf.erasure_worker_lease())
        current.save(using=receipt.databases[0])
    adopt(receipt, current)
    return receipt


def _add_rows(current: ErasureReceipt, removed: Removed) -> None:
    """Counts summed; erased and authored ids united (capped, the cap recorded)."""
    totals: Counter[str] = Counter(dict.fromkeys(CONTENT_TABLES, 0))
    totals.update(current.counts or {})
    totals.update(removed.counts)
    current.counts = {t: int(n) for t, n in totals.items()}
    erased = {
        t: _united((current.erased_ids or {}).get(t, []), removed.ids.get(t, ()))
        for t in ROW_MODELS
    }
    details = current.details
    truncated = [t for t, ids in erased.items() if len(ids) > MAX_RECORDED_IDS]
    current.erased_ids = {t: ids[:MAX_RECORDED_IDS] for t, ids in erased.items() if ids}
    if truncated:
        details["ids_truncated"] = sorted({*details.get("ids_truncated", ()), *truncated})
    if current.target_kind != ErasureTarget.SUBJECT:
        return
    if current.include_authored:
        current.authored = {"project_memories": "erased (include_authored)"}
        return
    kept = _united((current.authored or {}).get("ids", []), removed.authored)
    current.authored = {"project_memories_kept": len(kept), "ids": kept[:MAX_RECORDED_IDS]}


def _united(first: Iterable, then: Iterable) -> list:
    """``first`` then the items of ``then`` not in it, in order, each once."""
    return list(dict.fromkeys([*first, *then]))


def _merged_info(before: dict | None, new: dict) -> dict:
    """One database's record after a further pass: the first deletion's time, the newest
    purge token, every table and partition either pass touched."""
    if not before or not before.get("deleted_at"):
        return dict(new)
    merged = {**new, **before}
    order = (*CONTENT_TABLES, ADMIN_LOG)
    tables = {*before.get("tables", ()), *new.get("tables", ())}
    merged["tables"] = [t for t in order if t in tables]
    if "partitions" in before or "partitions" in new:
        # One side without partitions means every partition (see purging._partitions).
        if "partitions" in before and "partitions" in new:
            merged["partitions"] = sorted({*before["partitions"], *new["partitions"]})
        else:
            merged.pop("partitions", None)
    xids = [int(t["xid"]) for t in (before.get("token"), new.get("token")) if t and t.get("xid")]
    if xids:
        merged["token"] = {**(new.get("token") or {}), "xid": str(max(xids))}
    return merged
