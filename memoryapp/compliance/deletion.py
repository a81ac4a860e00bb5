"""One target's rows on one database: select them, and (inside the erasure's transaction)
delete them with their events, pseudonymise what is kept, forget emptied slices."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connections
from django.db.models import Q, QuerySet

from memoryapp.compliance import probes
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
    row_filter,
    subject_pseudonym,
)
from memoryapp.db import partitioning
from memoryapp.db.purge.vendors import for_connection
from memoryapp.db.vendor import of as vendor_of
from memoryapp.models import (
    ErasureTarget,
    Memory,
    MemoryEvent,
    SliceChange,
)

ERASED_REPR = "[erased]"
"""What an erased row's admin log entries show instead of its text."""


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
        found = _select_rows(model.objects.using(alias), table, target)
        work.ids[table] = list(found)
        work.namespaces[table] = found
        work.counts[table] = len(found)
    authored_q = authored_filter(target)
    if authored_q is not None:
        authored = Memory.objects.using(alias).filter(authored_q).order_by()
        work.namespaces["authored"] = dict(authored.values_list("pk", "namespace"))
        work.authored = list(work.namespaces["authored"])
    # The events of the selected rows: by (namespace, id), as the rows themselves, so
    # that an event of another namespace's row with the same id is never touched.
    row_events = [
        q for table in ROW_MODELS for q in _by_namespace(work.namespaces[table], "memory_id")
    ]
    if delete:
        work.counts[EVENTS] = _delete_selected(alias, target, work, row_events)
    else:
        work.counts[EVENTS] = _count_events(alias, target, row_events)
    return work


def _select_rows(manager, table: str, target: Target) -> dict[str, str]:
    """``pk -> namespace`` of ``table``'s rows ``target`` names, in the order found."""
    found: dict[str, str] = {}
    q = row_filter(table, target)
    if q is not None:
        found.update(manager.filter(q).order_by().values_list("pk", "namespace"))
    for rows in id_rows(table, target):  # exactly the (namespace, id) rows resolved
        found.update(manager.filter(rows).order_by().values_list("pk", "namespace"))
    explicit = id_list(table, target)
    if explicit:
        restriction = id_restriction(target)
        for batch in batches(explicit):
            chosen = manager.filter(restriction, pk__in=list(batch)).order_by()
            for pk, namespace in chosen.values_list("pk", "namespace"):
                found.setdefault(pk, namespace)
    return found


def _delete_selected(alias: str, target: Target, work: Work, row_events: list[Q]) -> int:
    """Delete the selected rows and their events; returns the number of events deleted."""
    work.values = probes.sample_values(alias, work.ids)
    if target.kind == ErasureTarget.SUBJECT:
        work.values.append(target.subject_key)  # the key itself is personal data
    touched = _slices_of(alias, work.namespaces[MEMORIES])
    events = MemoryEvent.objects.using(alias)
    extra_events = events_filter(target)
    work.partitions = _partitions_of(alias, work, extra_events)
    # Events and the other tables first: the first write to ``memories`` locks
    # the database-wide change counter that every other tenant's write needs,
    # until the commit, so its window holds only the memories' own statements.
    n_events = sum(events.filter(rows).delete()[0] for rows in row_events)
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
    return n_events


def _count_events(alias: str, target: Target, row_events: list[Q]) -> int:
    """The number of events a deletion of the selected rows would remove (a preview)."""
    events = MemoryEvent.objects.using(alias)
    extra_events = events_filter(target)
    n_events = 0
    for rows in row_events:
        qs = events.filter(rows)
        n_events += (qs.exclude(extra_events) if extra_events is not None else qs).count()
    if extra_events is not None:
        n_events += events.filter(extra_events).count()
    return n_events


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
    for_connection(connection).truncate(connection, CONTENT_TABLES)
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
