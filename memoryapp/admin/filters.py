"""The admin's list filters (namespace, free text, subject) and the subject-key search."""

from __future__ import annotations

from django.contrib import admin

from memoryapp.admin.labels import namespace_label
from memoryapp.rules.validation import MAX_NAMESPACE_CHARS
from memoryapp.services import subjects


class NamespaceFilter(admin.SimpleListFilter):
    """Filter by namespace; a drop-down when there are many (the empty namespace is named)."""

    title = "namespace"
    parameter_name = "namespace"
    template = "memoryapp/admin/choice_filter.html"
    limit = 200

    def lookups(self, request, model_admin):
        values = (
            model_admin.model.objects.order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()[: self.limit]
        )
        return [(ns, namespace_label(ns)) for ns in values]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset if value is None else queryset.filter(namespace=value)


class InputFilter(admin.SimpleListFilter):
    """A free-text filter (exact match) rendered as a small search box in the sidebar."""

    template = "memoryapp/admin/input_filter.html"
    field: str = ""

    def lookups(self, request, model_admin):
        return [("", "")]  # the filter is shown only when it has a lookup

    def queryset(self, request, queryset):
        value = self.value()
        if value in (None, ""):
            return queryset
        return queryset.filter(**{self.field: value.strip()})

    def choices(self, changelist):
        yield {
            "selected": self.value() in (None, ""),
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "All",
            "value": self.value() or "",
            "parameter_name": self.parameter_name,
            "query_parts": [
                (k, v) for k, v in changelist.params.items() if k != self.parameter_name
            ],
        }


class SubjectFilter(InputFilter):
    """The rows of one subject key, sidebar input (:mod:`memoryapp.services.subjects`)."""

    title = "subject"
    parameter_name = "subject"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        if not value or len(value) > MAX_NAMESPACE_CHARS:
            return queryset
        return subjects.matching(queryset, value)


class SubjectSearch:
    """Mixin of a model admin: the search box also finds the rows of an exact subject key.

    The whole search term is tried as a key (``acme/zed``), ORed with the admin's
    own text search; exact and case-sensitive, so another tenant's key that only
    contains it (``globex/acme/zed``) is never found.
    """

    def get_search_results(self, request, queryset, search_term):
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term and len(term) <= MAX_NAMESPACE_CHARS:
            results = results | subjects.matching(queryset, term)
        return results, may_have_duplicates
