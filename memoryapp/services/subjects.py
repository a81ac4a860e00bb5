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
  an id that another tenant's row happens to share is not found (the namespaces
  holding the subject's rows are read when the condition is built).
"""

from __future__ import annotations

from django.db.models import Model, Q, QuerySet

from memoryapp.models import Memory, MemoryEvent, ReviewItem, Scope, SessionSummary

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
    """The events of ``subject``'s rows, as one literal namespace per branch.

    The namespaces holding the subject's rows are read first (a few indexed
    lookups); each branch then names its namespace, so PostgreSQL reads one
    partition of the events and of the owning table instead of joining every
    partition with every other (a correlated form took seconds on 60,000 events).
    """
    q = Q(pk__in=[])
    for model in _OWNED:
        rows = model._default_manager.filter(subject_q(model, subject))
        for namespace in rows.order_by().values_list("namespace", flat=True).distinct():
            ids = rows.filter(namespace=namespace).values("pk")
            q |= Q(namespace=namespace, memory_id__in=ids)
    return q
