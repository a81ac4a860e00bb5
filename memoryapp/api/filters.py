"""Query-string filters of the list endpoints (django-filter).

``namespace`` is an exact key; it is applied whenever the parameter is present,
so ``?namespace=`` selects the single-tenant namespace ``''``. Filters only
filter: the viewset scopes its queryset to the client's grants and checks a
requested namespace against the action's declared rule (a namespace the client
may not see answers 404, like every other route to another tenant).
"""

from __future__ import annotations

import datetime as dt

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from memoryapp.models import (
    EVENT_TYPES,
    ErasureReceipt,
    ErasureTarget,
    Memory,
    MemoryEvent,
    MemoryType,
    ReceiptState,
    RequestStatus,
    ReviewItem,
    ReviewStatus,
    Scope,
    SessionSummary,
    SubjectRequest,
    SubjectRight,
)
from memoryapp.querysets import MemoryQuerySet
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import (
    MAX_KEY_CHARS,
    MAX_NAMESPACE_CHARS,
    MAX_QUERY_CHARS,
    check_namespace,
)
from memoryapp.services import search, subjects


def subject_filter(label: str) -> django_filters.CharFilter:
    """``?subject=``: the rows of one subject key, exact (:mod:`memoryapp.services.subjects`)."""
    return django_filters.CharFilter(
        method="filter_subject", strip=False, max_length=MAX_NAMESPACE_CHARS, label=label
    )


class StrictChoiceFilter(django_filters.ChoiceFilter):
    """A choice filter whose refusal names the accepted values, never the refused one.

    Django's message quotes the refused value ("Select a valid choice. <value> is not
    one of …"); a refusal never echoes one (docs/behaviour.md §13). Set when the
    filter is declared: a filter set's filters are copies of the declared ones, whose
    form field may already be built (the schema generator builds it), so a message set
    on the copies later would not reach the field.
    """

    def __init__(self, *args, **kwargs) -> None:
        choices = kwargs.get("choices", ())
        choices = choices() if callable(choices) else choices
        accepted = ", ".join(str(value) for value, _ in choices)
        message = f"The value is not a valid choice; expected one of: {accepted}."
        kwargs.setdefault("error_messages", {"invalid_choice": message})
        super().__init__(*args, **kwargs)


def namespace_rules(value: str) -> None:
    """The namespace rules of every write (:func:`~memoryapp.rules.validation.check_namespace`).

    A filter that no write could have stored (``acme//web``, a trailing space) is a 400
    naming the rule, not an empty list that reads as "nothing there".
    """
    try:
        check_namespace(value)
    except MemoryValidationError as exc:
        raise ValidationError(str(exc)) from None


class NamespacedFilterSet(django_filters.FilterSet):
    """A filter set with an exact ``namespace`` filter (``''`` included)."""

    namespace = django_filters.CharFilter(
        method="filter_namespace",
        strip=False,
        max_length=255,
        validators=[namespace_rules],
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


class MemoryFilter(NamespacedFilterSet):
    """``GET /api/memories/``: namespace, scope, type, subject, tag and ``q``.

    ``tag`` (exact, case-insensitive) and ``q`` (literal, case-insensitive
    substring) run in SQL for every value (:mod:`memoryapp.services.search`), so a list is
    paginated in SQL whatever is searched.
    """

    scope = StrictChoiceFilter(choices=Scope.choices)
    type = StrictChoiceFilter(choices=MemoryType.choices)
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
        return search.tagged(queryset, value.strip().lower())

    def filter_q(self, queryset: MemoryQuerySet, name: str, value: str) -> QuerySet:
        return search.matching(queryset, value.strip().lower())


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
    order = StrictChoiceFilter(
        choices=[("oldest", "oldest first"), ("newest", "newest first")],
        method=_order_by,
        label="Oldest (the default) or newest first.",
    )

    class Meta:
        model = SessionSummary
        fields: list[str] = []


class ReviewItemFilter(NamespacedFilterSet):
    """``GET /api/review-items/``: every status unless ``status`` is given."""

    status = StrictChoiceFilter(choices=ReviewStatus.choices)
    subject = subject_filter("Exact subject key: items proposed from that user's messages.")
    subjects_uncertain = StrictChoiceFilter(
        choices=[("true", "true"), ("false", "false")],
        method="filter_subjects_uncertain",
        label="true: the items folded from several people's messages before the fold was per "
        "subject (migration 0013), whose subject a reviewer should check; false: the others.",
    )
    order = StrictChoiceFilter(
        choices=[("newest", "newest first"), ("occurrences", "most occurrences, then newest")],
        method=_order_by,
        label="Instead of the queue's order (most occurrences, last updated first).",
    )

    class Meta:
        model = ReviewItem
        fields: list[str] = []

    def filter_subjects_uncertain(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(subjects_uncertain=value == "true")


class MemoryEventFilter(NamespacedFilterSet):
    """``GET /api/events/``: namespace, memory id, event type, subject."""

    memory_id = django_filters.CharFilter(strip=False, max_length=64)
    event_type = StrictChoiceFilter(choices=[(t, t) for t in EVENT_TYPES])
    subject = subject_filter(
        "Exact subject key: the events of that subject's memories, review items and summaries."
    )

    class Meta:
        model = MemoryEvent
        fields: list[str] = []


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 bound, compared in UTC.

    Python takes offsets up to ±23:59, PostgreSQL up to ±15:59: the bound goes to the
    database in UTC. A bound that leaves the calendar in UTC (year 1 at a negative
    offset, year 9999 at a positive one) is the calendar's own end.
    """

    def filter(self, qs, value):
        if value is not None:
            try:
                value = value.astimezone(dt.UTC)
            except OverflowError:
                end = dt.datetime.min if value.year < 5000 else dt.datetime.max
                value = end.replace(tzinfo=dt.UTC)
        return super().filter(qs, value)


class ReceiptFilter(django_filters.FilterSet):
    """``GET /api/erasures/``: by state and creation time (inclusive bounds, ISO 8601)."""

    state = StrictChoiceFilter(choices=ReceiptState.choices)
    target_kind = StrictChoiceFilter(choices=ErasureTarget.choices)
    created_after = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created at or after (ISO 8601)."
    )
    created_before = UtcDateTimeFilter(
        field_name="created_at", lookup_expr="lte", label="Created at or before (ISO 8601)."
    )

    class Meta:
        model = ErasureReceipt
        fields = ("state", "target_kind", "created_after", "created_before")

    def is_valid(self) -> bool:
        """Also refuse an empty value (``?state=``, ``?created_before=``): django-filter
        would ignore it, and the schema's enum and date-time format do not take ``""``."""
        valid = super().is_valid()
        for name in self.base_filters:
            if self.data.get(name) == "":
                self.form.add_error(name, "An empty value is not one this filter takes.")
                valid = False
        return valid


class RequestFilter(django_filters.FilterSet):
    """``GET /api/subject-requests/``: by status and right."""

    status = StrictChoiceFilter(choices=RequestStatus.choices)
    right = StrictChoiceFilter(choices=SubjectRight.choices)

    class Meta:
        model = SubjectRequest
        fields = ("status", "right")
