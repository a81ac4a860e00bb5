"""The erasure engine: select and hard-delete in one transaction per database, write the receipt.

After the commit :mod:`memoryapp.compliance.purging` runs the vendor purge and
verifies; inside a caller's transaction that waits for ``on_commit``. :func:`retry`
completes unfinished receipts (delete again, then purge): here rather than in
``purging``, which this module calls, so the two do not import each other.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.models import Q, QuerySet

from memoryapp import conf
from memoryapp.compliance import attention, phases, probes, sealed
from memoryapp.compliance.purging import caveats, finish, finish_after_commit, unfinished
from memoryapp.compliance.receipts import append_ledger, key_id, keyed_hmac, safe_actor
from memoryapp.compliance.selection import (
    ADMIN_LOG,
    CONTENT_TABLES,
    EVENTS,
    MEMORIES,
    ROW_MODELS,
    Target,
    admin_log_available,
    authored_filter,
    batches,
    events_filter,
    id_list,
    id_restriction,
    id_rows,
    purge_all_tables,
    row_filter,
    subject_pseudonym,
)
from memoryapp.db import locks, partitioning
from memoryapp.db import purge as vendor_purge
from memoryapp.db.vendor import of as vendor_of
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
    ErasureTarget,
    Memory,
    MemoryEvent,
    ReceiptState,
    SliceChange,
)

logger = logging.getLogger(__name__)

MAX_RECORDED_IDS = 100_000  # per table; beyond it replay relies on the target's filters
ERASED_REPR = "[erased]"

PENDING_COMMIT = "pending: runs after the surrounding transaction commits"
DEFERRED = (
    "not purged: deferred to the erasure worker ('manage.py memory worker', "
    "or 'manage.py memory erase --retry')"
)


class ReceiptTaken(Exception):
    """A receipt of the id an erasure was asked to record under exists already: another
    process ran this request (an ``Idempotency-Key`` retry racing a slow first try)."""


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts it (clock ticks since boot:
    field 22 of ``/proc/<pid>/stat``); None where that cannot be read (not Linux, gone).

    With the pid it tells a process apart from a later one reusing its pid — as a
    restarted container does, where the host name and the pid repeat.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # Field 2 (the command) is in parentheses and may hold spaces or ")": count after it.
    fields = data[data.rfind(b")") + 1 :].split()
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return fields[19].decode()  # fields[0] is field 3, so field 22 is fields[19]


def worker_name() -> str:
    """This process as a claim on a receipt names it: ``host:pid@started`` (its start
    time, :func:`process_started`), or ``host:pid`` where the start time is unknown."""
    pid = os.getpid()
    started = process_started(pid)
    return f"{socket.gethostname()}:{pid}" + (f"@{started}" if started else "")


def holder_gone(claimed_by: str) -> bool:
    """True when the claim was made by a process of this host that no longer runs.

    ``claimed_by`` is a :func:`worker_name`: ``host:pid@started``, or
    ``host:pid`` as written before the start time was recorded. A process running
    under that pid but started at another time is not the holder: it reuses the pid
    (a restarted container repeats both the host name and the pid), so the holder is
    gone. Without a start time (the old form, or one that cannot be read here) a
    running pid counts as the holder, alive.
    """
    host, _, rest = claimed_by.rpartition(":")
    pid_text, _, started = rest.partition("@")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            pass
    if not started:
        return False
    running = process_started(pid)
    return running is not None and running != started


class ReceiptInProgress(Exception):
    """A receipt retried by hand is leased to another live process (the worker, a
    request, another retry): it is not retried now. ``str()`` says by whom and when
    to try again; ``receipt_id``, ``holder`` and ``seconds`` say it to a program."""

    def __init__(self, receipt_id: str, holder: str, seconds: int) -> None:
        self.receipt_id, self.holder, self.seconds = receipt_id, holder, seconds
        super().__init__(
            f"erasure receipt {receipt_id} is in progress (held by {holder or 'another process'}), "
            f"try again in {seconds} s"
        )


def take_lease(r: ErasureReceipt, *, using: str, holder: str) -> ErasureReceipt:
    """Lease ``r`` to ``holder`` as the worker's claim does, and return it as now stored.

    One conditional update: it succeeds only when no live process holds ``r`` — never
    claimed, the lease (or a backoff's due time) over, no holder named, or the holder
    is a process of this host that is gone. Otherwise :class:`ReceiptInProgress`.
    """
    at = now()
    free = Q(claimed_by="") | Q(claimed_until__isnull=True) | Q(claimed_until__lte=at)
    if r.claimed_by and holder_gone(r.claimed_by):
        free |= Q(claimed_by=r.claimed_by)
    until = at + dt.timedelta(seconds=conf.erasure_worker_lease())
    rows = ErasureReceipt.objects.using(using)
    if rows.filter(free, pk=r.pk).update(claimed_by=holder, claimed_until=until):
        return rows.get(pk=r.pk)
    current = rows.filter(pk=r.pk).values_list("claimed_by", "claimed_until").first()
    holder_now, ends = current if current is not None else ("", None)
    seconds = math.ceil((ends - at).total_seconds()) if ends is not None else 0
    raise ReceiptInProgress(r.pk, holder_now or "", max(seconds, 1))


def drop_lease(receipts: Sequence[ErasureReceipt], *, using: str, holder: str) -> None:
    """Release what ``holder`` still holds of ``receipts`` (an outcome recorded already
    dropped it, or scheduled the next attempt: that is left as it is)."""
    ErasureReceipt.objects.using(using).filter(
        pk__in=[r.pk for r in receipts], claimed_by=holder
    ).update(claimed_by="", claimed_until=None)


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


# ------------------------------------------------------------------ selection
@dataclass
class Work:
    """What one target selected (and, unless previewing, deleted) on one database."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CONTENT_TABLES, 0))
    ids: dict[str, list[str]] = field(default_factory=dict)
    authored: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per table (and ``"authored"``), each selected row's namespace: the deletes name
    it, so that PostgreSQL reads only the partition of each row, not all 64."""
    partitions: set[int] = field(default_factory=set)
    """Hash partitions that held the deleted (or pseudonymised) rows, where the
    tables are partitioned by namespace: the ones the purge must rewrite."""


def apply(alias: str, target: Target, *, delete: bool, truncate: bool = False) -> Work:
    """Select ``target``'s rows on ``alias``; delete them (and their events) when ``delete``.

    Must run inside a transaction when deleting. ``truncate`` (a whole-database
    erasure) empties the tables instead of deleting by id.
    """
    work = Work()
    if truncate:
        return _truncate(alias, work)
    for table, model in ROW_MODELS.items():
        manager = model.objects.using(alias)
        found: dict[str, str] = {}  # pk -> namespace, in the order found
        q = row_filter(table, target)
        if q is not None:
            found.update(manager.filter(q).order_by().values_list("pk", "namespace"))
        for rows in id_rows(table, target):  # exactly the (namespace, id) rows resolved
            found.update(manager.filter(rows).order_by().values_list("pk", "namespace"))
        explicit = id_list(table, target)
        if explicit:
            restriction = id_restriction(target)
            for batch in batches(explicit):
                for pk, namespace in (
                    manager.filter(restriction, pk__in=list(batch))
                    .order_by()
                    .values_list("pk", "namespace")
                ):
                    found.setdefault(pk, namespace)
        work.ids[table] = list(found)
        work.namespaces[table] = found
        work.counts[table] = len(found)
    authored_q = authored_filter(target)
    if authored_q is not None:
        authored = Memory.objects.using(alias).filter(authored_q).order_by()
        work.namespaces["authored"] = dict(authored.values_list("pk", "namespace"))
        work.authored = list(work.namespaces["authored"])
    if delete:
        work.values = probes.sample_values(alias, work.ids)
        if target.kind == ErasureTarget.SUBJECT:
            work.values.append(target.subject_key)  # the key itself is personal data
    touched = _slices_of(alias, work.namespaces[MEMORIES]) if delete else set()
    # The events of the selected rows: by (namespace, id), as the rows themselves, so
    # that an event of another namespace's row with the same id is never touched.
    row_events = [
        q for table in ROW_MODELS for q in _by_namespace(work.namespaces[table], "memory_id")
    ]
    events = MemoryEvent.objects.using(alias)
    extra_events = events_filter(target)
    n_events = 0
    if delete:
        work.partitions = _partitions_of(alias, work, extra_events)
        # Events and the other tables first: the first write to ``memories`` locks
        # the database-wide change counter that every other tenant's write needs,
        # until the commit, so its window holds only the memories' own statements.
        for rows in row_events:
            n_events += events.filter(rows).delete()[0]
        if extra_events is not None:
            n_events += events.filter(extra_events).delete()[0]
        for table, model in reversed(ROW_MODELS.items()):
            for rows in _by_namespace(work.namespaces[table]):
                model.objects.using(alias).filter(rows).delete()
        if work.authored:  # kept, but no longer named after the erased subject
            pseudonym = subject_pseudonym(target.subject_key)
            for rows in _by_namespace(work.namespaces["authored"]):
                Memory.objects.using(alias).filter(rows).update(subject=pseudonym)
        if target.kind == ErasureTarget.SUBJECT:
            touched |= {(target.subject_key, "user"), (target.subject_key, "project")}
        _forget_empty_slices(alias, touched)
        scrubbed = _scrub_admin_log(alias, work.ids)
        if scrubbed:
            work.counts[ADMIN_LOG] = scrubbed
    else:
        for rows in row_events:
            qs = events.filter(rows)
            n_events += (qs.exclude(extra_events) if extra_events is not None else qs).count()
        if extra_events is not None:
            n_events += events.filter(extra_events).count()
    work.counts[EVENTS] = n_events
    return work


def _by_namespace(rows: dict[str, str], field: str = "pk"):
    """``Q`` filters of at most one batch of ids each, every one within one namespace.

    ``field`` names the id column: ``pk`` for the rows, ``memory_id`` for their events.
    """
    grouped: dict[str, list[str]] = {}
    for pk, namespace in rows.items():
        grouped.setdefault(namespace, []).append(pk)
    for namespace, pks in grouped.items():
        for batch in batches(pks):
            yield Q(namespace=namespace, **{f"{field}__in": list(batch)})


def _partitions_of(alias: str, work: Work, extra_events) -> set[int]:
    """The hash partitions holding the rows about to go (read before they do).

    The pseudonymised authored rows count too: their old versions, with the
    subject's key, stay in their partition until it is rewritten.
    """
    if not vendor_of(alias).partitions_by_namespace:
        return set()
    querysets: list[QuerySet] = [
        model.objects.using(alias).filter(rows)
        for table, model in ROW_MODELS.items()
        for rows in _by_namespace(work.namespaces[table])
    ]
    events = MemoryEvent.objects.using(alias)
    querysets += [
        events.filter(rows)
        for table in ROW_MODELS
        for rows in _by_namespace(work.namespaces[table], "memory_id")
    ]
    if extra_events is not None:
        querysets.append(events.filter(extra_events))
    memories = Memory.objects.using(alias)
    querysets += [
        memories.filter(rows) for rows in _by_namespace(work.namespaces.get("authored", {}))
    ]
    return partitioning.holding_remainders(querysets)


def _slices_of(alias: str, memories: dict[str, str]) -> set[tuple[str, str]]:
    """The (namespace, scope) slices holding these memories (id -> namespace; read before
    they go)."""
    found: set[tuple[str, str]] = set()
    for rows in _by_namespace(memories):
        selected = Memory.objects.using(alias).filter(rows)
        found.update(selected.values_list("namespace", "scope").distinct().order_by())
    return found


def _forget_empty_slices(alias: str, slices: set[tuple[str, str]]) -> None:
    """Delete the change-counter rows of slices the erasure left empty.

    A user namespace is the user's key: its counter row would keep the erased
    subject's identifier. A slice without a row reads as counter 0, and the next
    write creates a fresh random version, so no cache can mistake the new rows.
    """
    rows = Memory.objects.using(alias)
    for namespace, scope in sorted(slices):
        if not rows.filter(namespace=namespace, scope=scope).exists():
            SliceChange.objects.using(alias).filter(namespace=namespace, scope=scope).delete()


def _truncate(alias: str, work: Work) -> Work:
    for table, model in ROW_MODELS.items():
        work.counts[table] = model.objects.using(alias).count()
    work.counts[EVENTS] = MemoryEvent.objects.using(alias).count()
    sample: dict[str, list[str]] = {}
    for table, model in ROW_MODELS.items():
        pks = model.objects.using(alias).order_by("?").values_list("pk", flat=True)
        sample[table] = list(pks[: probes.PROBE_ROWS])
    work.values = probes.sample_values(alias, sample)
    connection = connections[alias]
    vendor_purge.for_connection(connection).truncate(connection, CONTENT_TABLES)
    # Every slice is empty now; their counter rows name namespaces (user keys among them).
    SliceChange.objects.using(alias).all().delete()
    scrubbed = _scrub_admin_log(alias, None)
    if scrubbed:
        work.counts[ADMIN_LOG] = scrubbed
    return work


def _scrub_admin_log(alias: str, ids: dict[str, list[str]] | None) -> int:
    """Replace the admin history's copy of erased rows' titles (``object_repr``).

    The admin log keeps who changed what and when; only the text goes.
    """
    if not admin_log_available(alias):
        return 0
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    types = ContentType.objects.db_manager(alias).get_for_models(*ROW_MODELS.values())
    scrubbed = 0
    for table, model in ROW_MODELS.items():
        base = (
            LogEntry.objects.using(alias)
            .filter(content_type_id=types[model].pk)
            .exclude(object_repr=ERASED_REPR)
        )
        if ids is None:
            scrubbed += base.update(object_repr=ERASED_REPR)
            continue
        for batch in batches(ids.get(table) or []):
            scrubbed += base.filter(object_id__in=list(batch)).update(object_repr=ERASED_REPR)
    return scrubbed


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
    deletion commits still leaves the request for :func:`resume` to complete.
    ``purge=False`` stops after the deletion: the worker (``memory worker``) or
    ``memory erase --retry`` purges later, one vendor purge for many receipts.
    ``receipt_id`` records the receipt under an id the caller chose beforehand (the
    API binds an ``Idempotency-Key`` to it): a receipt of that id already recorded
    raises :class:`ReceiptTaken` before anything is deleted.

    Returns the receipt and, per target, the counts it removed.
    """
    primary = aliases[0]
    stamp = now()
    receipt = ErasureReceipt(
        **({"id": receipt_id} if receipt_id else {}),
        actor=safe_actor(actor, subject),
        target_kind=kind,
        subject_hmac=keyed_hmac(subject) if subject is not None else None,
        namespace_hmac=keyed_hmac(namespace) if namespace is not None else None,
        key_id=key_id(),
        include_authored=include_authored,
        criteria=criteria or {},
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
    )
    vendors = {a: vendor_purge.for_connection(connections[a]) for a in aliases}
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
    per_target = delete(receipt, targets)
    return after_delete(receipt, purge=purge), per_target


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
    delete(receipt, opened[0])
    return after_delete(receipt, purge=purge)


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
    if receipt is None:
        pending = list(unfinished(alias))
    else:
        rid = receipt.pk if isinstance(receipt, ErasureReceipt) else str(receipt)
        pending = [ErasureReceipt.objects.using(alias).get(pk=rid)]
    pending = [r for r in pending if r.target_kind and r.databases]
    me = held_by or worker_name()
    leased: list[ErasureReceipt] = []
    try:
        if held_by is not None:
            leased = pending
        else:
            for r in pending:
                try:
                    leased.append(take_lease(r, using=alias, holder=me))
                except ReceiptInProgress as held:
                    if receipt is not None:
                        raise
                    if busy is not None:
                        busy.append(held)
        for r in leased:
            attention.reopen(r)
            if r.state == ReceiptState.REQUESTED:
                resume(r, purge=False)
                if r.state == ReceiptState.REQUESTED:  # the request could not be read back
                    attention.schedule(r, now())
                    r.save(using=alias)
        finished = {id(r) for r in finish(leased, using=alias)}
    finally:
        if held_by is None:
            drop_lease(leased, using=alias, holder=me)
    # Those purged now, and those still unfinished (with why); complete ones are skipped.
    return [r for r in leased if id(r) in finished or r.state != ReceiptState.COMPLETE]


def delete(receipt: ErasureReceipt, targets: Sequence[Target]) -> list[dict[str, int]]:
    """The deletion phase: one transaction per database, the receipt updated in each.

    Moves the receipt to ``deleted`` once every database's deletion has
    committed, with the byte-scan fragments sealed into it. Returns the counts
    removed per target.
    """
    aliases = list(receipt.databases)
    primary = aliases[0]
    truncate = bool((receipt.details or {}).get("truncate"))
    details = receipt.details
    done = details.setdefault("aliases", {})
    vendors = {a: vendor_purge.for_connection(connections[a]) for a in aliases}
    totals: Counter[str] = Counter(dict.fromkeys(CONTENT_TABLES, 0))
    totals.update(receipt.counts or {})
    per_target: list[Counter[str]] = [Counter() for _ in targets]
    erased: dict[str, list[str]] = {
        t: list((receipt.erased_ids or {}).get(t, [])) for t in ROW_MODELS
    }
    authored: list[str] = list((receipt.authored or {}).get("ids", []))
    opened = sealed.unseal(receipt.sealed)
    pieces: dict[str, list[bytes]] = dict(opened[1]) if opened else {}
    for alias in aliases:
        if done.get(alias, {}).get("deleted_at"):
            continue  # committed before the process that erased died
        connection = connections[alias]
        try:
            with transaction.atomic(using=alias):
                # Before selecting: a write of these namespaces or subjects commits
                # wholly before this erasure or waits for it (docs/behaviour.md §9).
                _lock_targets(alias, targets, truncate=truncate)
                vendors[alias].prepare(connection)
                with vendors[alias].by_index(connection):
                    works = [apply(alias, t, delete=True, truncate=truncate) for t in targets]
                token = vendors[alias].delete_token(connection)
                alias_counts: Counter[str] = Counter()
                for i, work in enumerate(works):
                    per_target[i].update(work.counts)
                    alias_counts.update(work.counts)
                    for table, ids in work.ids.items():
                        erased[table].extend(ids)
                    authored.extend(work.authored)
                totals.update(alias_counts)
                tables = [
                    t
                    for t in (*CONTENT_TABLES, ADMIN_LOG)
                    if alias_counts.get(t)
                    or (purge_all_tables(receipt.target_kind) and t != ADMIN_LOG)
                ]
                info: dict[str, object] = {
                    "token": token,
                    "tables": tables,
                    "deleted_at": now().isoformat(),
                }
                if truncate:
                    info["everything_before"] = receipt.created_at.isoformat()
                elif vendor_of(alias).partitions_by_namespace:
                    # Hash remainders only: which partitions, never which namespaces.
                    info["partitions"] = sorted(set().union(*(w.partitions for w in works)))
                done[alias] = info
                pieces[alias] = probes.pieces_of(v for w in works for v in w.values)
                info["probe_fragments"] = len(pieces[alias])
                _fill(receipt, totals, erased, authored, details, receipt.include_authored)
                if all(done.get(a, {}).get("deleted_at") for a in aliases):
                    receipt.state = ReceiptState.DELETED
                    details.setdefault("phases", {})["deleted"] = now().isoformat()
                receipt.sealed = sealed.seal(list(targets), pieces)
                receipt.updated_at = now()
                if alias == primary:
                    receipt.save(using=primary)
        except Exception as exc:
            done.pop(alias, None)
            receipt.purge_status = (
                f"not purged: erasure on database {alias!r} failed: "
                f"{vendor_purge._first_line(exc)}"[:255]
            )
            receipt.attempts += 1
            receipt.state = ReceiptState.REQUESTED
            receipt.save(using=primary)
            append_ledger(receipt)
            raise
        if alias != primary:
            receipt.save(using=primary)  # this database's part is committed: say so
    probes.remember(receipt.id, pieces)
    return [dict(c) for c in per_target]


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


def after_delete(receipt: ErasureReceipt, *, purge: bool) -> ErasureReceipt:
    """Purge and verify now, after the caller's commit, or leave it to the worker."""
    primary = receipt.databases[0]
    if not purge:
        receipt.purge_status = DEFERRED
        receipt.save(using=primary, update_fields=["purge_status"])
        append_ledger(receipt)
        return receipt
    # This process purges it: a worker polling meanwhile must not purge it too (two
    # purges at once would race to record their outcome). The lease is dropped when
    # the outcome is recorded, or runs out if this process dies first.
    receipt.claimed_by = worker_name()
    receipt.claimed_until = now() + dt.timedelta(seconds=conf.erasure_worker_lease())
    receipt.save(using=primary, update_fields=["claimed_by", "claimed_until"])
    if any(connections[a].in_atomic_block for a in receipt.databases):
        receipt.purge_status = PENDING_COMMIT
        receipt.save(using=primary, update_fields=["purge_status"])
        rid = receipt.id
        transaction.on_commit(lambda: finish_after_commit(rid, primary), using=primary)
        return receipt
    finish([receipt], using=primary)
    return receipt


def _fill(receipt, totals, erased, authored, details, include_authored) -> None:
    receipt.counts = {t: int(n) for t, n in totals.items()}
    truncated = [t for t, ids in erased.items() if len(ids) > MAX_RECORDED_IDS]
    receipt.erased_ids = {t: ids[:MAX_RECORDED_IDS] for t, ids in erased.items() if ids}
    if truncated:
        details["ids_truncated"] = truncated
    if receipt.target_kind == ErasureTarget.SUBJECT:
        receipt.authored = (
            {"project_memories": "erased (include_authored)"}
            if include_authored
            else {"project_memories_kept": len(authored), "ids": authored[:MAX_RECORDED_IDS]}
        )
    receipt.details = details
