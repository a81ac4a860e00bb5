"""Which rows a subject key finds: the admin's search box and sidebar, the API's ``?subject=``.

A *subject* is the user key in whose session a row was written (docs/behaviour.md
§1). Finding by subject is exact and case-sensitive — keys are tenants'
identities, so ``acme/zed`` never finds ``acme/zedd``, ``Acme/zed`` or
``globex/acme/zed`` — and reads indexed columns only (``subject``, the namespace
index, the events' ``memory_id`` index), never a per-row function of a column.

- memories: ``subject`` is the key, or a user-scope memory lives in the key's user
  namespace (the same rule as an erasure of the subject, §9);
- review items and session summaries: ``subject`` is the key;
- audit events: the events of those rows, matched on the pair (namespace, id), so
  an id that another tenant's row happens to share is not found.
"""

from __future__ import annotations

from django.db.models import Exists, Model, OuterRef, Q, QuerySet

from .models import Memory, MemoryEvent, ReviewItem, Scope, SessionSummary

__all__ = ["matching", "subject_q"]

_OWNED = (Memory, ReviewItem, SessionSummary)


def subject_q(model: type[Model], subject: str) -> Q:
    """The condition on ``model``'s rows that belong to ``subject`` (see the module)."""
    if model is Memory:
        return Q(subject=subject) | Q(scope=Scope.USER, namespace=subject)
    if model in (ReviewItem, SessionSummary):
        return Q(subject=subject)
    if model is MemoryEvent:
        return _events_q(subject)
    raise TypeError(f"{model.__name__} rows have no subject")


def matching(queryset: QuerySet, subject: str) -> QuerySet:
    """``queryset`` narrowed to the rows of ``subject``."""
    return queryset.filter(subject_q(queryset.model, subject))


def _events_q(subject: str) -> Q:
    q = Q(pk__in=[])
    for model in _OWNED:
        rows = model._default_manager.filter(subject_q(model, subject))
        # The IN list of ids is an uncorrelated (hashed) subquery the planner runs
        # once; the EXISTS then checks the namespace of each candidate only.
        same_row = rows.filter(pk=OuterRef("memory_id"), namespace=OuterRef("namespace"))
        q |= Q(memory_id__in=rows.values("pk")) & Q(Exists(same_row))
    return q
