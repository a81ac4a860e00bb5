"""Which rows an erasure (or an export) targets: one ``Target`` → a filter per table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, cast

from django.apps import apps
from django.db import connections, router
from django.db.models import Exists, OuterRef, Q

from memoryapp.db.lookups import covering_q
from memoryapp.models import (
    ErasureTarget,
    Memory,
    MemoryEvent,
    RecallSnapshot,
    ReviewItem,
    ReviewStatus,
    Scope,
    SessionSummary,
    SliceChange,
)
from memoryapp.rules.batching import batches

MEMORIES = Memory._meta.db_table
SUMMARIES = SessionSummary._meta.db_table
REVIEW = ReviewItem._meta.db_table
EVENTS = MemoryEvent._meta.db_table
ADMIN_LOG = "django_admin_log"

RowModel: TypeAlias = type[Memory] | type[SessionSummary] | type[ReviewItem]

ROW_MODELS: dict[str, RowModel] = {
    MEMORIES: Memory,
    SUMMARIES: SessionSummary,
    REVIEW: ReviewItem,
}
"""The tables whose rows carry content, by table name."""

CONTENT_TABLES = (MEMORIES, SUMMARIES, REVIEW, EVENTS)
"""Every table an erasure may delete from (events carry ids only, but describe the rows)."""

SLICES = SliceChange._meta.db_table
SNAPSHOTS = RecallSnapshot._meta.db_table
"""Persisted recall indexes (tokens of memory text): a trigger deletes a slice's snapshot
with any row of the slice, so every purge of ``memories`` purges this table too."""


def rows_removed(counts: Mapping[str, object] | None) -> int:
    """How many rows an erasure removed: the one total the admin, the CLI and the API show.

    Every table of the receipt's ``counts`` but the admin history: its entries
    are kept with their titles replaced by "[erased]", so they are reported
    beside the total, never in it. Non-integer values (none are written) are
    ignored rather than trusted.
    """
    return sum(
        n
        for table, n in (counts or {}).items()
        if table != ADMIN_LOG and isinstance(n, int) and not isinstance(n, bool)
    )


def purged_with(tables) -> list[str]:
    """``tables`` plus those an erasure of memories changes beside them.

    The recall snapshots (deleted by trigger) and the slice counters (a subject's
    user namespace is its key: the erasure deletes the rows of emptied slices)
    hold personal data too, so their old row versions are purged with ``memories``.
    """
    tables = list(tables)
    if MEMORIES in tables:
        at = tables.index(MEMORIES) + 1
        for extra in (SLICES, SNAPSHOTS):
            if extra not in tables:
                tables.insert(at, extra)
    return tables


PSEUDONYM_PREFIX = "erased:"


def subject_pseudonym(subject: str, key: bytes | None = None) -> str:
    """What a kept row's ``subject`` becomes when its subject is erased: a keyed HMAC.

    The row stays (a project memory the subject authored, kept without
    ``include_authored``), but the user key is personal data; the pseudonym still
    lets a later erasure of the same subject, with ``include_authored``, find it.
    """
    from memoryapp.compliance.receipts import keyed_hmac

    return PSEUDONYM_PREFIX + keyed_hmac(subject, key)[:48]


def subject_names(subject: str) -> list[str]:
    """The subject key and its pseudonyms under the current and fallback erasure keys."""
    from memoryapp.compliance.receipts import known_keys

    return [subject, *dict.fromkeys(subject_pseudonym(subject, k) for k in known_keys().values())]


TEXT_FIELDS = {
    MEMORIES: ("title", "content", "key_normalized"),
    SUMMARIES: ("summary_text",),
    REVIEW: ("title", "content", "evidence", "key_normalized"),
}
"""The columns whose values are probed by the byte scan (held in memory only)."""

DECIDED = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


def admin_log_available(alias: str) -> bool:
    """Whether the Django admin history table exists on ``alias`` (erased titles live there)."""
    if not apps.is_installed("django.contrib.admin"):
        return False
    from django.contrib.admin.models import LogEntry

    if not router.allow_migrate_model(alias, LogEntry):
        return False
    return LogEntry._meta.db_table in connections[alias].introspection.table_names()


@dataclass(frozen=True)
class Target:
    """What to select. ``kind`` is an :class:`~memoryapp.models.ErasureTarget` value.

    ``namespace`` is the namespace of a ``namespace`` target, and a restriction
    for ``ids``, ``subject`` and ``review_items`` targets. ``within`` (when not
    None) keeps only rows of those namespaces: a client's erasure or export of a
    subject by ids. ``grants`` (when not None) keeps only rows of the namespaces
    those ``(namespace, is_prefix)`` pairs cover: an API client's subject erasure
    or export, limited by its grants themselves, evaluated when the rows are
    selected (under the erasure locks), so a namespace first written after the
    request was authorised is covered too. ``before`` keeps only rows created at
    or before that moment (replay after restore).

    An ``ids`` target deletes exactly ``rows`` (table → ``(namespace, id)``
    pairs), resolved and authorised once before the target is built
    (:func:`memoryapp.compliance.service.resolve`): never "any row anywhere with
    that id" (ids are not unique across tables, nor across namespaces on
    PostgreSQL). ``ids`` keeps the ids as requested, for the receipt's count.
    ``extra_ids`` (table → ids; recorded ids on replay) are selected as well,
    whatever the filters say.
    """

    kind: str
    subject: str | None = None
    namespace: str | None = None
    ids: tuple[str, ...] = ()
    include_authored: bool = False
    statuses: tuple[str, ...] | None = None
    cutoffs: dict[str, dt.datetime] = field(default_factory=dict)
    before: dt.datetime | None = None
    extra_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rows: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    within: tuple[str, ...] | None = None
    grants: tuple[tuple[str, bool], ...] | None = None

    @property
    def subject_key(self) -> str:
        """``subject``, typed as set: read only for targets that name a subject."""
        return cast(str, self.subject)

    @property
    def restricted(self) -> bool:
        """True when ``namespace`` narrows a non-namespace target."""
        return self.namespace is not None and self.kind != ErasureTarget.NAMESPACE

    def covers(self, namespace: str) -> bool:
        """Whether ``within`` and ``grants`` let this target act in ``namespace``."""
        if self.within is not None and namespace not in self.within:
            return False
        return self.grants is None or grants_cover(self.grants, namespace)


def grants_cover(grants: Iterable[tuple[str, bool]], namespace: str) -> bool:
    """Whether one of ``(namespace, is_prefix)`` ``grants`` covers ``namespace``
    (as :func:`memoryapp.db.lookups.covering_q` selects it)."""
    return any(namespace.startswith(ns) if prefix else namespace == ns for ns, prefix in grants)


def _limits(t: Target) -> Q:
    """The namespaces ``within`` and ``grants`` leave to ``t`` (``Q()``: no limit)."""
    q = Q()
    if t.within is not None:
        q &= Q(namespace__in=list(t.within))
    if t.grants is not None:
        q &= covering_q("namespace", t.grants)
    return q


def _restrict(q: Q | None, t: Target, created: str = "created_at") -> Q | None:
    if q is None:
        return None
    if t.restricted:
        q &= Q(namespace=t.namespace)
    q &= _limits(t)
    if t.before is not None:
        q &= Q(**{f"{created}__lte": t.before})
    return q


def row_filter(table: str, t: Target) -> Q | None:
    """The filter selecting ``t``'s rows of a content table (None: the table is not touched).

    ``ids`` targets select by primary key in batches (see :func:`id_list`), so
    they yield None here.
    """
    kind = t.kind
    q: Q | None = None
    if kind == ErasureTarget.EVERYTHING:
        q = Q()
    elif kind == ErasureTarget.NAMESPACE:
        q = Q(namespace=t.namespace)
    elif kind == ErasureTarget.SUBJECT:
        q = _subject_filter(table, t)
    elif kind == ErasureTarget.REVIEW_ITEMS and table == REVIEW:
        q = _review_filter(t)
    elif kind == ErasureTarget.RETENTION:
        q = _retention_filter(table, t)
    return _restrict(q, t)


def _subject_filter(table: str, t: Target) -> Q:
    """A subject's rows of ``table``."""
    if table != MEMORIES:
        return Q(subject=t.subject)
    # The subject's user-scope rows: written for that user key, or kept in
    # its user namespace (namespace == user key).
    q = Q(scope=Scope.USER) & (Q(subject=t.subject) | Q(namespace=t.subject))
    if t.include_authored:
        q |= Q(scope=Scope.PROJECT, subject__in=subject_names(t.subject_key))
        # A shared project memory (no single owner) goes once nothing but this
        # subject's approved items supports it: the other contributors were erased.
        q |= Q(scope=Scope.PROJECT, subject__isnull=True) & _contributed(t) & ~_supported(t)
    return q


def _approved_for_key():
    """Approved project-scope items of the outer memory's namespace and key."""
    return ReviewItem.objects.filter(
        namespace=OuterRef("namespace"),
        scope=Scope.PROJECT,
        key_normalized=OuterRef("key_normalized"),
        status=ReviewStatus.APPROVED,
    )


def _contributed(t: Target) -> Q:
    """Memories with an approved project-scope item of ``t``'s subject for their key."""
    return Q(Exists(_approved_for_key().filter(subject=t.subject)))


def _supported(t: Target) -> Q:
    """Memories with an approved project-scope item of another subject (or of none)."""
    return Q(Exists(_approved_for_key().exclude(subject=t.subject)))


def contributed_filter(t: Target) -> Q | None:
    """Project memories the subject contributed to (an approved item of its key) and does
    not own: listed by an export (``project_memories_contributed``), kept by an erasure
    while another contributor's approved item supports them."""
    if t.kind != ErasureTarget.SUBJECT:
        return None
    q = Q(scope=Scope.PROJECT) & _contributed(t) & ~Q(subject__in=subject_names(t.subject_key))
    return _restrict(q, t)


def _links_shared_memory() -> Q:
    """Approved project items whose key's memory has no single owner: they are what links
    each contributor to it (export, erasure), so retention keeps them while it is stored."""
    shared = Memory.objects.filter(
        namespace=OuterRef("namespace"),
        scope=Scope.PROJECT,
        key_normalized=OuterRef("key_normalized"),
        subject__isnull=True,
    )
    return Q(status=ReviewStatus.APPROVED, scope=Scope.PROJECT) & Q(Exists(shared))


def _review_filter(t: Target) -> Q:
    """The review items a purge of the queue names (by status and subject, if given)."""
    q = Q()
    if t.statuses is not None:
        q &= Q(status__in=list(t.statuses))
    if t.subject is not None:
        q &= Q(subject=t.subject)
    return q


def _retention_filter(table: str, t: Target) -> Q | None:
    """The rows of ``table`` past its retention cutoff (None: no cutoff for it)."""
    cutoff = t.cutoffs.get(table)
    if cutoff is None:
        return None
    if table == MEMORIES:
        return Q(deleted_at__isnull=False, deleted_at__lte=cutoff)
    if table == REVIEW:
        return Q(status__in=list(DECIDED), updated_at__lte=cutoff) & ~_links_shared_memory()
    if table == SUMMARIES:
        return Q(created_at__lte=cutoff)
    return None


def id_list(table: str, t: Target) -> tuple[str, ...]:
    """Primary keys selected in any namespace: the recorded ids of a replay only."""
    return tuple(dict.fromkeys(t.extra_ids.get(table, ())))


def id_rows(table: str, t: Target) -> Iterable[Q]:
    """Filters selecting exactly an ``ids`` target's rows of ``table``, one namespace each."""
    if t.kind != ErasureTarget.IDS:
        return
    restriction = id_restriction(t)
    grouped: dict[str, list[str]] = {}
    for namespace, pk in t.rows.get(table, ()):
        grouped.setdefault(namespace, []).append(pk)
    for namespace, pks in grouped.items():
        for batch in batches(list(dict.fromkeys(pks))):
            yield restriction & Q(namespace=namespace, pk__in=batch)


def id_restriction(t: Target) -> Q:
    """The filter explicit ids must also pass (a namespace restriction of an ``ids`` target)."""
    q = Q()
    if t.kind == ErasureTarget.IDS and t.namespace is not None:
        q &= Q(namespace=t.namespace)
    return q & _limits(t)


def events_filter(t: Target) -> Q | None:
    """Events selected beyond those of the erased rows' ids (a namespace's, or all)."""
    if t.kind == ErasureTarget.EVERYTHING:
        q = Q()
    elif t.kind == ErasureTarget.NAMESPACE:
        q = Q(namespace=t.namespace)
    else:
        return None
    if t.before is not None:
        q &= Q(timestamp__lte=t.before)
    return q


def authored_filter(t: Target) -> Q | None:
    """Project-scope memories the subject authored and that are kept (listed, not erased)."""
    if t.kind != ErasureTarget.SUBJECT or t.include_authored:
        return None
    return _restrict(Q(scope=Scope.PROJECT, subject__in=subject_names(t.subject_key)), t)


def purge_all_tables(kind: str) -> bool:
    """Whether the purge rewrites every content table, not only those rows left.

    Subject, namespace and whole-database erasures also purge what earlier
    non-erasure deletes (a wipe's summaries, an upsert's old versions on
    PostgreSQL) may have left behind.
    """
    return kind in (ErasureTarget.SUBJECT, ErasureTarget.NAMESPACE, ErasureTarget.EVERYTHING)
