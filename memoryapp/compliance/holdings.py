"""What we hold about a person: the rows an erasure of their key would remove, counted,
and apart from them the project memories it keeps.

Shown before anything is done (the desk's erase page, ``lookup/`` in the API, the
CLI's warnings). Counted by the erasure's own selection
(:func:`memoryapp.compliance.deletion.apply` without deleting), audit events
included, so the total shown before an erasure is the total its receipt reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import Count

from memoryapp.compliance import deletion, desk_scope, engine
from memoryapp.compliance.selection import (
    EVENTS,
    ROW_MODELS,
    authored_filter,
    batches,
    contributed_filter,
    row_filter,
)
from memoryapp.compliance.targets import build_target
from memoryapp.models import Memory, MemoryEvent


def holdings(
    subject: str, namespaces: Iterable[str] = (), using: str | Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """What we hold about ``subject``: ``table -> {namespace: rows}``, reading only.

    The rows an erasure of the subject would select (live and soft-deleted) and the
    audit events describing them, in ``namespaces`` if given; tables holding nothing
    are left out.
    """
    found: dict[str, dict[str, int]] = {}
    spaces: list[str | None] = list(namespaces) or [None]
    for ns in spaces:
        target = build_target(subject=subject, namespace=ns)
        for alias in engine.aliases_for(using):
            work = deletion.apply(alias, target, delete=False)
            for table in ROW_MODELS:
                for namespace in work.namespaces[table].values():
                    _add(found, table, namespace, 1)
            for namespace, n in _events(alias, work.namespaces).items():
                _add(found, EVENTS, namespace, n)
    # Tables in one order whatever namespace held what first (memories, summaries, …).
    return {table: found[table] for table in (*ROW_MODELS, EVENTS) if table in found}


def _add(found: dict[str, dict[str, int]], table: str, namespace: str, n: int) -> None:
    if n:
        per = found.setdefault(table, {})
        per[namespace] = per.get(namespace, 0) + n


def _events(alias: str, selected: dict[str, dict[str, str]]) -> dict[str, int]:
    """Events per namespace of the selected rows (``table -> {pk: namespace}``), matched
    by namespace and id as the erasure deletes them."""
    by_namespace: dict[str, list[str]] = {}
    for table in ROW_MODELS:
        for pk, namespace in selected.get(table, {}).items():
            by_namespace.setdefault(namespace, []).append(pk)
    events = MemoryEvent.objects.using(alias)
    counts: dict[str, int] = {}
    for namespace, pks in by_namespace.items():
        for batch in batches(pks):
            n = events.filter(namespace=namespace, memory_id__in=batch).count()
            counts[namespace] = counts.get(namespace, 0) + n
    return counts


# What an erasure keeps on purpose: project memories, named as the export names them.
KEPT_AUTHORED = "project_memories_authored"
KEPT_CONTRIBUTED = "project_memories_contributed"


def kept(
    subject: str, namespaces: Iterable[str] = (), using: str | Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """Project memories held about ``subject`` that an erasure keeps: ``kind -> {namespace: rows}``.

    Those it wrote (erased only when asked to include them) and those it contributed to
    through an approved review item while another contributor still supports them. An
    export lists both; "what do we hold" must too, though :func:`holdings` (what the
    erasure removes) does not count them.
    """
    found: dict[str, dict[str, int]] = {}
    spaces: list[str | None] = list(namespaces) or [None]
    for ns in spaces:
        target = build_target(subject=subject, namespace=ns)
        parts = (
            (KEPT_AUTHORED, authored_filter(target)),
            (KEPT_CONTRIBUTED, contributed_filter(target)),
        )
        for alias in engine.aliases_for(using):
            for kind, q in parts:
                if q is None:
                    continue
                rows = Memory.objects.using(alias).filter(q).order_by()
                for row in rows.values("namespace").annotate(n=Count("pk")):
                    _add(found, kind, row["namespace"], row["n"])
    return found


def holds_any(
    subject: str, namespaces: Iterable[str] = (), using: str | Sequence[str] | None = None
) -> bool:
    """Whether anything at all is held about ``subject`` (in ``namespaces`` if given):
    a row :func:`holdings` or :func:`kept` would count, found with ``exists()``.

    For the warnings before work starts (intake of a key nobody holds data for, an
    export that would be empty): the first row found answers, nothing is counted.
    """
    spaces: list[str | None] = list(namespaces) or [None]
    for ns in spaces:
        target = build_target(subject=subject, namespace=ns)
        wanted = [(model, row_filter(table, target)) for table, model in ROW_MODELS.items()]
        wanted += [(Memory, authored_filter(target)), (Memory, contributed_filter(target))]
        for alias in engine.aliases_for(using):
            for model, q in wanted:
                if q is not None and model.objects.using(alias).filter(q).exists():
                    return True
    return False


OWN_NAMESPACE = "(the person's own namespace)"
"""How a user-scope namespace is named where it is shown: it is the user key itself."""


def without_key(found: dict[str, dict[str, int]], subject: str) -> dict[str, dict[str, int]]:
    """:func:`holdings` as it may be shown: the namespace that is the key itself named
    :data:`OWN_NAMESPACE`, so an answer never carries the key it was asked about."""
    shown: dict[str, dict[str, int]] = {}
    for table, per in found.items():
        for namespace, n in per.items():
            _add(shown, table, OWN_NAMESPACE if namespace == subject else namespace, n)
    return shown


def desk_reach(user, subject: str) -> tuple[tuple[str, bool], ...] | None:
    """The namespaces a tenant-scoped officer's erase or export of ``subject`` acts in.

    A person's key names one tenant, but their rows may lie in other tenants'
    namespaces too (a project memory they wrote elsewhere): a scoped officer's
    erasure or export must reach only the namespaces of the tenants their desk
    grants cover. The answer is those namespaces that hold the subject's data now, as
    exact ``(namespace, False)`` grants for ``grants=`` (empty: nothing within reach);
    None for an unscoped officer (every namespace), as ``grants=None`` means.
    """
    if desk_scope.grants_of(user) is None:
        return None
    found = {**holdings(subject), **kept(subject)}  # table or kind -> {namespace: rows}
    spaces = {ns for per in within_reach(found, user).values() for ns in per}
    return tuple(sorted((ns, False) for ns in spaces))


def within_reach(found: dict[str, dict[str, int]], user) -> dict[str, dict[str, int]]:
    """``found`` (table -> {namespace: rows}) narrowed to the namespaces of the tenants
    ``user``'s desk grants cover (unchanged for an unscoped officer)."""
    grants = desk_scope.grants_of(user)
    if grants is None:
        return found
    narrowed = {
        table: {
            ns: n for ns, n in per.items() if desk_scope.covers(grants, desk_scope.tenant_of(ns))
        }
        for table, per in found.items()
    }
    return {table: per for table, per in narrowed.items() if per}
