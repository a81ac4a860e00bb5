"""The erasure engine: select and hard-delete in one transaction per database, write the receipt.

After the commit :mod:`memoryapp.compliance.purging` runs the vendor purge and
verifies; inside a caller's transaction that waits for ``on_commit``. :func:`retry`
completes unfinished receipts (delete again, then purge): here rather than in
``purging``, which this module calls, so the two do not import each other.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction

from memoryapp import conf
from memoryapp.compliance import attention, merging, phases, probes, sealed
from memoryapp.compliance.deletion import Work, apply
from memoryapp.compliance.desk_scope import tenant_of_targets
from memoryapp.compliance.leases import ReceiptInProgress, drop_lease, take_lease, worker_name
from memoryapp.compliance.purging import caveats, finish, finish_after_commit, unfinished
from memoryapp.compliance.receipts import append_ledger, key_id, keyed_hmac, safe_actor
from memoryapp.compliance.selection import (
    ADMIN_LOG,
    CONTENT_TABLES,
    Target,
    purge_all_tables,
)
from memoryapp.db import locks
from memoryapp.db.purge.common import first_line
from memoryapp.db.purge.vendors import for_connection
from memoryapp.db.vendor import of as vendor_of
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
    ErasureTarget,
    ReceiptState,
)

logger = logging.getLogger(__name__)


PENDING_COMMIT = "pending: runs after the surrounding transaction commits"
DEFERRED = (
    "not purged: deferred to the erasure worker ('manage.py memory worker', "
    "or 'manage.py memory erase --retry')"
)


class ReceiptTaken(Exception):
    """A receipt of the id an erasure was asked to record under exists already: another
    process ran this request (an ``Idempotency-Key`` retry racing a slow first try)."""


def aliases_for(using: str | Sequence[str] | None) -> list[str]:
    """The databases an erasure covers: ``using``, else the default and the user database."""
    if using is None:
        aliases = [DEFAULT_DB_ALIAS]
        user_db = conf.user_database()
        if user_db and user_db not in aliases:
            aliases.append(user_db)
        return aliases
    if isinstance(using, str):
        return [using]
    return list(dict.fromkeys(using))


# ------------------------------------------------------------------ execute
def execute(
    kind: str,
    targets: Sequence[Target],
    *,
    aliases: Sequence[str],
    actor: str = "",
    subject: str | None = None,
    namespace: str | None = None,
    include_authored: bool = False,
    criteria: dict | None = None,
    purge: bool = True,
    truncate: bool = False,
    receipt_id: str | None = None,
) -> tuple[ErasureReceipt, list[dict[str, int]]]:
    """Run an erasure: record it, delete, then purge and verify (after commit).

    The receipt is saved first, in state ``requested`` (committed on its own
    unless the caller holds a transaction), so that a process killed before the
    deletion commits still leaves the request for :func:`resume` to complete. It is
    leased to this process in the same insert: the worker does not take it while
    this process lives and the lease holds (renewed as the deletion goes on), so
    it never deletes a second time beside this deletion. With ``purge=False`` the
    lease is handed to the worker once the deletion has committed.
    ``purge=False`` stops after the deletion: the worker (``memory worker``) or
    ``memory erase --retry`` purges later, one vendor purge for many receipts.
    ``receipt_id`` records the receipt under an id the caller chose beforehand (the
    API binds an ``Idempotency-Key`` to it): a receipt of that id already recorded
    raises :class:`ReceiptTaken` before anything is deleted.

    Returns the receipt and, per target, the counts it removed.
    """
    primary = aliases[0]
    stamp = now()
    holder = worker_name()
    receipt = ErasureReceipt(
        **({"id": receipt_id} if receipt_id else {}),
        actor=safe_actor(actor, subject),
        target_kind=kind,
        subject_hmac=keyed_hmac(subject) if subject is not None else None,
        namespace_hmac=keyed_hmac(namespace) if namespace is not None else None,
        key_id=key_id(),
        include_authored=include_authored,
        criteria=criteria or {},
        tenant=tenant_of_targets(targets),
        databases=list(aliases),
        state=ReceiptState.REQUESTED,
        sealed=sealed.seal(list(targets)),
        details={
            "aliases": {},
            "phases": {"requested": stamp.isoformat()},
            **({"truncate": True} if truncate else {}),
        },
        created_at=stamp,
        updated_at=stamp,
        # Leased from the moment it exists: no worker takes it while this process lives.
        claimed_by=holder,
        claimed_until=stamp + dt.timedelta(seconds=conf.erasure_worker_lease()),
    )
    vendors = {a: for_connection(connections[a]) for a in aliases}
    receipt.purge_method = "; ".join(dict.fromkeys(v.method for v in vendors.values()))
    receipt.caveats = caveats(aliases, vendors)
    try:
        with transaction.atomic(using=primary):
            receipt.save(using=primary, force_insert=True)
    except IntegrityError:
        if receipt_id and ErasureReceipt.objects.using(primary).filter(pk=receipt_id).exists():
            raise ReceiptTaken(receipt_id) from None
        raise
    phases.report("deleting")
    try:
        per_target = delete(receipt, targets)
    except BaseException:
        # The deletion failed (recorded on the receipt): the worker takes it at once.
        drop_lease([receipt], using=primary, holder=holder)
        raise
    receipt = after_delete(receipt, purge=purge, holder=holder)
    if not purge:
        hand_off(receipt, holder)
    return receipt, per_target


def hand_off(receipt: ErasureReceipt, holder: str) -> None:
    """Give the receipt (deleted, its purge deferred) to the worker: ``holder`` drops its
    lease in one update, so the worker may claim it from then on — never before (both
    would own it), and never left leased to a process that will not finish it."""
    drop_lease([receipt], using=receipt.databases[0], holder=holder)
    if receipt.claimed_by == holder:
        receipt.claimed_by, receipt.claimed_until = "", None


def resume(receipt: ErasureReceipt, *, purge: bool = True) -> ErasureReceipt:
    """Complete the deletion of a ``requested`` receipt (its process died), then purge.

    The request is read back from the receipt's sealed part; databases whose
    deletion had committed are not deleted from again.
    """
    opened = sealed.unseal(receipt.sealed)
    if opened is None:
        receipt.purge_status = (
            "not purged: the request cannot be read back (the erasure key that sealed "
            "it is neither MEMORYAPP_ERASURE_KEY nor one of its fallbacks)"
        )
        receipt.attempts += 1
        receipt.updated_at = now()
        receipt.save(using=receipt.databases[0])
        append_ledger(receipt)
        return receipt
    holder = receipt.claimed_by  # the lease this process took to resume it
    delete(receipt, opened[0])
    return after_delete(receipt, purge=purge, holder=holder)


def retry(
    receipt: ErasureReceipt | str | None = None,
    *,
    using: str | None = None,
    held_by: str | None = None,
    busy: list[ReceiptInProgress] | None = None,
):
    """Complete one receipt, or every unfinished one — those needing attention too (a
    person asks): delete (if a crash left it ``requested``), then purge and verify —
    one vendor purge per database for all.

    Each receipt is leased to this process first (:func:`take_lease`, the worker's
    conditional update), so the worker or a request never runs it at the same time,
    and released after; ``held_by`` names the lease the caller holds already. One
    leased to another live process is not retried: one receipt asked for raises
    :class:`ReceiptInProgress`; of all, it is skipped and added to ``busy``.
    """
    alias = using or DEFAULT_DB_ALIAS
    pending = _pending(receipt, alias)
    me = held_by or worker_name()
    leased: list[ErasureReceipt] = []
    try:
        if held_by is not None:
            leased = pending
        else:
            _lease_each(pending, leased, alias=alias, holder=me, one=receipt is not None, busy=busy)
        for r in leased:
            attention.reopen(r)
            if r.state == ReceiptState.REQUESTED:
                _resume_requested(r, alias)
        finished = {id(r) for r in finish(leased, using=alias)}
    finally:
        if held_by is None:
            drop_lease(leased, using=alias, holder=me)
    # Those purged now, and those still unfinished (with why); complete ones are skipped.
    return [r for r in leased if id(r) in finished or r.state != ReceiptState.COMPLETE]


def _pending(receipt: ErasureReceipt | str | None, alias: str) -> list[ErasureReceipt]:
    """The receipt asked for, or every unfinished one; only those naming what to erase."""
    if receipt is None:
        pending = list(unfinished(alias))
    else:
        rid = receipt.pk if isinstance(receipt, ErasureReceipt) else str(receipt)
        pending = [ErasureReceipt.objects.using(alias).get(pk=rid)]
    return [r for r in pending if r.target_kind and r.databases]


def _lease_each(
    pending: list[ErasureReceipt],
    leased: list[ErasureReceipt],
    *,
    alias: str,
    holder: str,
    one: bool,
    busy: list[ReceiptInProgress] | None,
) -> None:
    """Lease each of ``pending`` into ``leased`` (filled as it goes, so that a refusal
    midway still leaves the caller the leases to drop). Asked for ``one``, a receipt
    another live process holds raises; of all, it is skipped and added to ``busy``."""
    for r in pending:
        try:
            leased.append(take_lease(r, using=alias, holder=holder))
        except ReceiptInProgress as held:
            if one:
                raise
            if busy is not None:
                busy.append(held)


def _resume_requested(r: ErasureReceipt, alias: str) -> None:
    """Delete what a receipt left ``requested`` (its process died); the purge comes after."""
    resume(r, purge=False)
    if r.state == ReceiptState.REQUESTED:  # the request could not be read back
        attention.schedule(r, now())
        r.save(using=alias)


def delete(receipt: ErasureReceipt, targets: Sequence[Target]) -> list[dict[str, int]]:
    """The deletion phase: one transaction per database, the receipt updated in each.

    Moves the receipt to ``deleted`` once every database's deletion has
    committed, with the byte-scan fragments sealed into it. Each database's
    removals are added to the receipt as stored (:mod:`.merging`), never written
    over it: a database another process deleted from meanwhile is skipped. The
    holder's lease is renewed before each database. Returns the counts removed
    per target by this call.
    """
    run = _Deletion.of(receipt, targets)
    for alias in run.aliases:
        if merging.done(receipt, alias):
            continue  # committed before the process that erased died
        merging.renew(receipt, run.holder)
        try:
            with transaction.atomic(using=alias):
                _delete_on(run, alias)
        except Exception as exc:
            _record_failure(run, alias, exc)
            raise
    opened = sealed.unseal(receipt.sealed)
    probes.remember(receipt.id, opened[1] if opened else {})
    return [dict(c) for c in run.per_target]


@dataclass
class _Deletion:
    """One receipt's deletion across its databases, by the process holding its lease."""

    receipt: ErasureReceipt
    targets: Sequence[Target]
    aliases: list[str]
    truncate: bool
    vendors: dict
    per_target: list[Counter[str]]
    holder: str

    @property
    def primary(self) -> str:
        """The database that holds the receipt."""
        return self.aliases[0]

    @classmethod
    def of(cls, receipt: ErasureReceipt, targets: Sequence[Target]) -> _Deletion:
        """The deletion of ``receipt``, resumed from what it recorded (after a crash)."""
        aliases = list(receipt.databases)
        return cls(
            receipt=receipt,
            targets=targets,
            aliases=aliases,
            truncate=bool((receipt.details or {}).get("truncate")),
            vendors={a: for_connection(connections[a]) for a in aliases},
            per_target=[Counter() for _ in targets],
            holder=receipt.claimed_by or "",
        )


def _delete_on(run: _Deletion, alias: str) -> None:
    """One database's deletion, inside its transaction; added to the receipt as stored."""
    receipt, vendor, connection = run.receipt, run.vendors[alias], connections[alias]
    # Before selecting: a write of these namespaces or subjects commits
    # wholly before this erasure or waits for it (docs/behaviour.md §9).
    _lock_targets(alias, run.targets, truncate=run.truncate)
    # Another pass of this receipt (its creator, or one that resumed it) deleting here
    # held these locks until it committed: if it did, there is nothing left to do.
    # On the receipt's own database its row is locked too, after the targets (the
    # order every pass takes them in), until this deletion commits.
    current = merging.stored(receipt, lock=alias == run.primary)
    if merging.done(current, alias):
        merging.adopt(receipt, current)
        return
    vendor.prepare(connection)
    with vendor.by_index(connection):
        works = [apply(alias, t, delete=True, truncate=run.truncate) for t in run.targets]
    removed = _removed(run, alias, works, vendor.delete_token(connection))
    merging.add(receipt, alias, removed, targets=run.targets, holder=run.holder)


def _removed(run: _Deletion, alias: str, works: list[Work], token: dict) -> merging.Removed:
    """What this pass removed from ``alias`` (its works), as the receipt records it."""
    removed = merging.Removed()
    for i, work in enumerate(works):
        run.per_target[i].update(work.counts)
        removed.counts.update(work.counts)
        for table, ids in work.ids.items():
            removed.ids.setdefault(table, []).extend(ids)
        removed.authored.extend(work.authored)
    removed.pieces = probes.pieces_of(v for w in works for v in w.values)
    removed.info = _alias_info(run, alias, works, token, removed.counts)
    return removed


def _alias_info(run: _Deletion, alias: str, works, token: dict, alias_counts) -> dict:
    """What the purge of ``alias`` needs later: its token, the tables, where the rows were."""
    whole = purge_all_tables(run.receipt.target_kind)
    tables = [
        t for t in (*CONTENT_TABLES, ADMIN_LOG) if alias_counts.get(t) or (whole and t != ADMIN_LOG)
    ]
    info: dict[str, object] = {"token": token, "tables": tables, "deleted_at": now().isoformat()}
    if run.truncate:
        info["everything_before"] = run.receipt.created_at.isoformat()
    elif vendor_of(alias).partitions_by_namespace:
        # Hash remainders only: which partitions, never which namespaces.
        info["partitions"] = sorted(set().union(*(w.partitions for w in works)))
    return info


def _record_failure(run: _Deletion, alias: str, exc: Exception) -> None:
    """A database's deletion failed (rolled back): the receipt says so and stays requested.

    Recorded on the receipt as stored, never by saving this process's copy over it.
    """
    receipt = run.receipt
    current = merging.stored(receipt, lock=False)
    current.purge_status = f"not purged: erasure on database {alias!r} failed: {first_line(exc)}"[
        :255
    ]
    current.attempts += 1
    current.save(using=run.primary, update_fields=["purge_status", "attempts"])
    merging.adopt(receipt, current)
    append_ledger(receipt)


def _lock_targets(alias: str, targets: Sequence[Target], *, truncate: bool) -> None:
    """Hold the erasure locks of what ``targets`` erase on ``alias`` (:mod:`..db.locks`).

    A subject's lock covers its rows anywhere, and its user namespace (its key) too;
    an id's, the namespace it was resolved in. Retention and a review purge of every namespace
    take none: they erase old or decided rows, which no write in flight brings back.
    """
    namespaces: set[str] = set()
    subjects: set[str] = set()
    everything = truncate
    for t in targets:
        if t.kind == ErasureTarget.EVERYTHING:
            everything = True
        elif t.kind == ErasureTarget.SUBJECT:
            subjects.add(t.subject_key)
            namespaces.add(t.subject_key)
        elif t.kind == ErasureTarget.REVIEW_ITEMS:
            if t.namespace is not None:
                namespaces.add(t.namespace)
            if t.subject is not None:
                subjects.add(t.subject)
        elif t.kind in (ErasureTarget.NAMESPACE, ErasureTarget.IDS) and t.namespace is not None:
            namespaces.add(t.namespace)
        if t.kind == ErasureTarget.IDS:  # its exact (namespace, id) rows
            namespaces.update(ns for pairs in t.rows.values() for ns, _ in pairs)
    locks.for_erasure(alias, namespaces=namespaces, subjects=subjects, everything=everything)


def after_delete(receipt: ErasureReceipt, *, purge: bool, holder: str) -> ErasureReceipt:
    """Purge and verify now, after the caller's commit, or leave it to the worker.

    Purging now needs the lease of whoever ran the deletion (``holder``): renewed
    here, it keeps a polling worker off while this process purges (two purges at once
    would race to record their outcome), and is dropped when the
    outcome is recorded. Lost meanwhile (it ran out and another process took the
    receipt over), the purge is left to that process.
    """
    primary = receipt.databases[0]
    if not purge:
        receipt.purge_status = DEFERRED
        receipt.save(using=primary, update_fields=["purge_status"])
        append_ledger(receipt)
        return receipt
    if not merging.renew(receipt, holder):
        merging.adopt(receipt, merging.stored(receipt, lock=False))
        return receipt
    if any(connections[a].in_atomic_block for a in receipt.databases):
        receipt.purge_status = PENDING_COMMIT
        receipt.save(using=primary, update_fields=["purge_status"])
        rid = receipt.id
        transaction.on_commit(lambda: finish_after_commit(rid, primary), using=primary)
        return receipt
    try:
        finish([receipt], using=primary)
    except BaseException:
        # Nothing recorded: the worker takes it over at once rather than when the lease ends.
        drop_lease([receipt], using=primary, holder=holder)
        raise
    return receipt
