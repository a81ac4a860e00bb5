"""Query-string filters of the list endpoints (django-filter).

``namespace`` is an exact key; it is applied whenever the parameter is present,
so ``?namespace=`` selects the single-tenant namespace ``''``. Filters only
filter: the viewset scopes its queryset to the client's grants and checks a
requested namespace against the action's declared rule (a namespace the client
may not see answers 404, like every other route to another tenant).
"""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from memoryapp import subjects
from memoryapp.models import (
    EVENT_TYPES,
    Memory,
    MemoryEvent,
    MemoryType,
    ReviewItem,
    ReviewStatus,
    Scope,
    SessionSummary,
)
from memoryapp.querysets import MemoryQuerySet
from memoryapp.search import matches, sql_can_prefilter
from memoryapp.validation import MAX_KEY_CHARS, MAX_NAMESPACE_CHARS, MAX_QUERY_CHARS


def subject_filter(label: str) -> django_filters.CharFilter:
    """``?subject=``: the rows of one subject key, exact (:mod:`memoryapp.subjects`)."""
    return django_filters.CharFilter(
        method="filter_subject", strip=False, max_length=MAX_NAMESPACE_CHARS, label=label
    )


class NamespacedFilterSet(django_filters.FilterSet):
    """A filter set with an exact ``namespace`` filter (``''`` included)."""

    namespace = django_filters.CharFilter(
        method="filter_namespace",
        strip=False,
        max_length=255,
        label="Exact namespace ('' = the single-tenant namespace).",
    )

    def is_valid(self) -> bool:
        """Also refuse an empty choice (``?status=``): the schema's enum has no ``""``."""
        valid = super().is_valid()
        for name, f in self.filters.items():
            if isinstance(f, django_filters.ChoiceFilter) and self.data.get(name) == "":
                self.form.add_error(name, "Select a valid choice; an empty value is not one.")
                valid = False
        return valid

    def filter_namespace(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset  # applied in filter_queryset, where '' is not "empty"

    def filter_subject(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return subjects.matching(queryset, value)

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        if "namespace" in self.data:
            namespace = self.form.cleaned_data.get("namespace") or ""
            queryset = queryset.filter(namespace=namespace)
        return queryset


# Characters of the JSON text of the tag and keyword columns outside the values
# themselves. A stripped needle without any of them cannot match across two values,
# so the SQL ``LIKE`` is then exact, not a superset (docs/behaviour.md §3 semantics in SQL).
_JSON_SYNTAX = frozenset('"\\,[]')


def _sql_exact(needle: str, alias: str) -> bool:
    return sql_can_prefilter(needle, alias) and not _JSON_SYNTAX.intersection(needle)


class MemoryFilter(NamespacedFilterSet):
    """``GET /api/memories/``: namespace, scope, type, subject, tag and ``q``.

    ``tag`` (exact, case-insensitive) and ``q`` (literal, case-insensitive
    substring) run in SQL when that is exact; otherwise SQL narrows to a superset
    and :meth:`exact` keeps the true matches in Python, as the facade does.
    """

    scope = django_filters.ChoiceFilter(choices=Scope.choices)
    type = django_filters.ChoiceFilter(choices=MemoryType.choices)
    subject = subject_filter(
        "Exact subject key: memories written in that user's sessions, and the user-scope "
        "memories of that user namespace."
    )
    key_normalized = django_filters.CharFilter(
        strip=False, max_length=MAX_KEY_CHARS, label="Exact normalised key."
    )
    tag = django_filters.CharFilter(
        method="filter_tag", max_length=MAX_QUERY_CHARS, label="Exact tag, case-insensitive."
    )
    q = django_filters.CharFilter(
        method="filter_q",
        max_length=MAX_QUERY_CHARS,
        label="Literal, case-insensitive substring of title, content, key, tags or keywords.",
    )

    class Meta:
        model = Memory
        fields: list[str] = []

    def filter_tag(self, queryset: MemoryQuerySet, name: str, value: str) -> QuerySet:
        wanted = value.strip().lower()
        if _sql_exact(wanted, queryset.db):
            return queryset.tagged_prefilter(f'"{wanted}"')  # the whole JSON string
        if sql_can_prefilter(wanted, queryset.db):
            return queryset.tagged_prefilter(wanted)
        return queryset

    def filter_q(self, queryset: MemoryQuerySet, name: str, value: str) -> QuerySet:
        needle = value.strip().lower()
        if sql_can_prefilter(needle, queryset.db):
            return queryset.search_prefilter(needle)
        return queryset

    @staticmethod
    def exact(rows: QuerySet, params) -> QuerySet | list[Memory]:
        """``rows`` (already filtered) with only the exact ``q`` and ``tag`` matches.

        A queryset when SQL was exact (paginated in SQL), else a list.
        """
        needle = params.get("q", "").strip().lower()
        tag = params.get("tag", "").strip().lower()
        needle = "" if _sql_exact(needle, rows.db) else needle
        tag = "" if _sql_exact(tag, rows.db) else tag
        if not needle and not tag:
            return rows
        return [
            m
            for m in rows
            if (not needle or matches(m, needle))
            and (not tag or tag in {t.lower() for t in m.tags})
        ]


def _order_by(queryset: QuerySet, name: str, value: str) -> QuerySet:
    """The rows in the ``order`` asked for (:data:`ORDERS`); the id breaks ties."""
    return queryset.order_by(*ORDERS[value], "id")


# ``order`` values of the list filters (Agentao's store lists newest first, and its
# review queue by occurrences, then newest).
ORDERS = {
    "oldest": ("created_at",),
    "newest": ("-created_at",),
    "occurrences": ("-occurrences", "-created_at"),
}


class SessionSummaryFilter(NamespacedFilterSet):
    """``GET /api/session-summaries/``: oldest first unless ``order=newest``."""

    session_id = django_filters.CharFilter(strip=False, max_length=255)
    subject = subject_filter("Exact subject key: summaries written in that user's sessions.")
    order = django_filters.ChoiceFilter(
        choices=[("oldest", "oldest first"), ("newest", "newest first")],
        method=_order_by,
        label="Oldest (the default) or newest first.",
    )

    class Meta:
        model = SessionSummary
        fields: list[str] = []


class ReviewItemFilter(NamespacedFilterSet):
    """``GET /api/review-items/``: every status unless ``status`` is given."""

    status = django_filters.ChoiceFilter(choices=ReviewStatus.choices)
    subject = subject_filter("Exact subject key: items proposed from that user's messages.")
    order = django_filters.ChoiceFilter(
        choices=[("newest", "newest first"), ("occurrences", "most occurrences, then newest")],
        method=_order_by,
        label="Instead of the queue's order (most occurrences, last updated first).",
    )

    class Meta:
        model = ReviewItem
        fields: list[str] = []


class MemoryEventFilter(NamespacedFilterSet):
    """``GET /api/events/``: namespace, memory id, event type, subject."""

    memory_id = django_filters.CharFilter(strip=False, max_length=64)
    event_type = django_filters.ChoiceFilter(choices=[(t, t) for t in EVENT_TYPES])
    subject = subject_filter(
        "Exact subject key: the events of that subject's memories, review items and summaries."
    )

    class Meta:
        model = MemoryEvent
        fields: list[str] = []
