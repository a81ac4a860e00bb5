"""Shared pieces of the admin: the acting user, confirmation pages, list filters, labels."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import (  # type: ignore[attr-defined]
    ALL_VAR,
    IS_FACETS_VAR,  # Django 5.0's, not in django-stubs 6.1.2
    ORDER_VAR,
    PAGE_VAR,
    SEARCH_VAR,
)
from django.db import router
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from memoryapp.rules.validation import MAX_NAMESPACE_CHARS
from memoryapp.rules.wording import plural
from memoryapp.services import subjects

# The tables an erasure reports counts for (receipts and previews are keyed by table name).
MEMORIES = Memory._meta.db_table
SUMMARIES = SessionSummary._meta.db_table
REVIEW = ReviewItem._meta.db_table
EVENTS = MemoryEvent._meta.db_table
ADMIN_LOG = "django_admin_log"

TABLE_LABELS = {
    MEMORIES: "Memories (live and soft-deleted)",
    SUMMARIES: "Session summaries",
    REVIEW: "Review items",
    EVENTS: "Audit events (memory_events)",
    ADMIN_LOG: "Admin history entries (titles replaced by “[erased]”)",
}
"""How each table an erasure touches is named on the pages (table name shown beside it)."""

SHOWN_OBJECTS = 100  # a confirmation page lists at most this many rows by name
SHOWN_REFUSALS = 20  # per-row error messages after an action; the rest are counted

SELECT_ACROSS = "select_across"  # the field of Django's action form: "Select all N" was chosen
SELECTION = "_selection"  # "<count>:<digest>" of the rows a select-across confirmation showed


def actor(request) -> str:
    """Who is acting, as recorded in events and receipts."""
    return request.user.get_username()


def db_for(model) -> str:
    """The database alias the admin writes ``model`` to."""
    return router.db_for_write(model)


def namespace_label(namespace: str | None) -> str:
    """A namespace as shown to people: the empty (single-tenant) namespace has a name."""
    return "(default namespace)" if namespace == "" else str(namespace)


def admin_time(value) -> str:
    """A timestamp as every admin page shows one: ``DATETIME_FORMAT``, current time zone.

    Django formats its own date columns, read-only fields and History pages
    with ``DATETIME_FORMAT``; the app's columns, tooltips and templates
    (``|date:"DATETIME_FORMAT"``) use it too, so one project setting (the
    project's is ``2025-12-03 14:32:05``, see ``project/formats``) sets them all.
    """
    if value is None:
        return "—"
    return date_format(timezone.localtime(value), "DATETIME_FORMAT")


def chips(values, css: str = "mem-chip") -> str:
    """Tags or keywords as small labels."""
    return format_html_join(" ", '<span class="{}">{}</span>', ((css, v) for v in values))


def two_lines(first: str, second: str) -> str:
    """A list cell with a main value and a quieter second line."""
    return format_html('{}<span class="mem-excerpt">{}</span>', first, second)


TITLE_CHARS = 60  # a list shows this much of a title; its tooltip holds all of it


def title_cell(title: str, excerpt: str) -> str:
    """A list's first cell: the title cut to :data:`TITLE_CHARS` over a quieter excerpt.

    One long unbroken title (a URL, a key without spaces) widened the column
    until the state, namespace, type, source and date columns left the
    screen. The title is cut here, kept whole in its ``title`` tooltip, and
    the stylesheet ends either line with an ellipsis where the column is
    narrower still (``.mem-title``, ``.mem-excerpt`` in ``#result_list``).
    """
    return format_html(
        '<span class="mem-title" title="{}">{}</span><span class="mem-excerpt">{}</span>',
        title,
        Truncator(title).chars(TITLE_CHARS),
        excerpt,
    )


def namespace_cell(namespace: str | None) -> str:
    """A namespace in a list: named as :func:`namespace_label` does, whole in its tooltip."""
    label = namespace_label(namespace)
    return format_html('<span class="mem-ns" title="{}">{}</span>', label, label)


def format_detail(detail: str | None) -> str:
    """An event's JSON detail as ``key=value, …`` (it holds ids, labels and counts only)."""
    if not detail:
        return ""
    try:
        data = json.loads(detail)
    except ValueError:
        return detail
    if not isinstance(data, dict):
        return detail
    return ", ".join(f"{k}={v}" for k, v in sorted(data.items()))


def event_rows(events) -> list[dict]:
    """Events as the history tables show them."""
    return [
        {
            "timestamp": e.timestamp,
            "event_type": e.event_type,
            "actor": e.actor,
            "detail": format_detail(e.detail),
        }
        for e in events
    ]


def count_rows(counts: Mapping[str, int], tables: Iterable[str] = ()) -> list[dict]:
    """``[{table, label, count}]`` for a counts-per-table dict, every content table included."""
    order = [MEMORIES, SUMMARIES, REVIEW, EVENTS, ADMIN_LOG, *tables]
    rows = []
    for table in dict.fromkeys(order):
        if table not in counts and table == ADMIN_LOG:
            continue
        rows.append(
            {
                "table": table,
                "label": TABLE_LABELS.get(table, table),
                "count": int(counts.get(table, 0) or 0),
            }
        )
    return rows


def confirmation(
    modeladmin,
    request,
    queryset,
    *,
    action: str,
    title: str,
    intro: Sequence[str],
    submit: str | tuple[str, str],
    danger: bool = False,
    warning: str = "",
    counts: list[dict] | None = None,
    notes: Sequence[str] = (),
    extra_fields: Mapping[str, str] | None = None,
) -> TemplateResponse:
    """A confirmation page in the style of Django's ``delete_selected``.

    It names the selected rows, says what will happen, and re-posts the
    selection with ``post=yes`` to the same action when confirmed: the rows'
    ids when they were ticked one by one, the changelist's filter when the
    operator chose "Select all" (see :func:`selecting_across`). ``submit`` is
    the button's label, or ``(one, many)``: "Yes, soft-delete it" for one row.
    """
    opts = modeladmin.model._meta
    rows = list(queryset[: SHOWN_OBJECTS + 1])
    pks = list(queryset.values_list("pk", flat=True))
    if not isinstance(submit, str):
        submit = submit[0] if len(pks) == 1 else submit[1]
    across = selecting_across(request)
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "subtitle": None,
        "opts": opts,
        "app_label": opts.app_label,
        "action_name": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "objects": [(obj, _change_url(modeladmin, obj)) for obj in rows[:SHOWN_OBJECTS]],
        "more": max(len(pks) - SHOWN_OBJECTS, 0),
        "total": len(pks),
        "total_label": plural(len(pks), opts.verbose_name, opts.verbose_name_plural),
        "pks": _ticked(request) if across else pks,
        "select_across": across,
        "selection": selection_token(pks) if across else "",
        "filters": filter_description(request) if across else [],
        # The changelist URL with its query string (search, list filters, the
        # "deleted" view): the confirmation posts back to the same selection.
        "form_action": request.get_full_path(),
        "intro": intro,
        "warning": warning,
        "notes": notes,
        "counts": counts,
        "submit": submit,
        "danger": danger,
        "extra_fields": dict(extra_fields or {}),
        "media": modeladmin.media,
    }
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        [
            f"admin/{opts.app_label}/{opts.model_name}/action_confirmation.html",
            f"admin/{opts.app_label}/action_confirmation.html",
        ],
        context,
    )


def forbidden(modeladmin, request, perm: str, page: str) -> TemplateResponse:
    """The admin's own 403 for one of the app's pages: what is missing, in words, and a way back.

    Raising ``PermissionDenied`` gave Django's bare "403 Forbidden", without the
    admin's header or a reason, to a staff user who followed a link to a page
    their account may not open. ``perm`` is ``"app_label.codename"``; ``page``
    names the page as its links do.
    """
    from django.contrib.auth.models import Permission

    app_label, _, codename = perm.partition(".")
    name = (
        Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        .values_list("name", flat=True)
        .first()
    )
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        "memoryapp/admin/forbidden.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Permission needed",
            "page": page,
            "permission": perm,
            "permission_name": name or perm,
        },
        status=403,
    )


def confirmed(request) -> bool:
    """True on the confirmation page's re-post."""
    return request.POST.get("post") == "yes"


# ------------------------------------------------------------ select across
# "Select all N" (Django's ``select_across``) must work for 100,000 rows. A
# confirmation page that re-posted one hidden ``_selected_action`` per id ran
# into DATA_UPLOAD_MAX_NUMBER_FIELDS (HTTP 400, TooManyFieldsSent) above about
# 1,000 rows. So when the operator chose "Select all", the page carries the
# filter instead of the ids: its form posts back to the changelist URL with the
# changelist's query string (search ``q``, list filters, the "deleted" view)
# and ``select_across=1``. On confirm, Django's ``changelist_view`` rebuilds
# the queryset from that query string through ``get_changelist_instance``
# (``get_queryset`` and its restrictions included) and, because of
# ``select_across``, hands all of it to the action, which computes the ids
# server-side.


def selecting_across(request) -> bool:
    """Whether the action was posted with "Select all N" (``select_across``) chosen.

    Read the way Django's action form reads it (a hidden boolean: "0" and
    "False" are false), so the action sees the same choice Django acted on.
    """
    return forms.BooleanField(required=False).to_python(request.POST.get(SELECT_ACROSS))


def _ticked(request) -> list[str]:
    """The ids ticked on the changelist page, re-posted by a select-across confirmation.

    Django's ``changelist_view`` runs an action only when at least one
    ``_selected_action`` is posted, and ignores them under ``select_across``.
    The changelist posted at most one page of them, so re-posting those stays
    far below the field limit whatever the size of the selection.
    """
    return request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)


def selection_token(pks: Iterable) -> str:
    """``"<count>:<digest>"`` naming a set of rows (order-independent).

    The confirmation page posts it back; comparing it with the token of what
    the filter selects at confirm time tells whether the set changed, even
    when the count did not (one row left the filter and another entered it).
    """
    values = sorted(str(pk) for pk in pks)
    digest = hashlib.sha256("\n".join(values).encode()).hexdigest()[:32]
    return f"{len(values)}:{digest}"


def selection_changed(modeladmin, request, pks: Sequence) -> bool:
    """On a confirmed "Select all": True, with an error message, if the rows are not those shown.

    The confirmation page showed a count (and, for an erasure, the rows per
    table) for what the filter selected then. Rows added, removed or changed
    since would make the action act on a set nobody reviewed, so it is refused
    and the operator reviews the selection again; a back office that erases
    personal data must do no more, and no less, than it said. The caller
    passes the ids it is about to act on, so nothing can slip in between this
    check and the action. Rows ticked one by one post their ids, which cannot
    grow: that path is left as it was (it acts on those still eligible).
    """
    if not selecting_across(request):
        return False
    now_selected = selection_token(pks)
    shown = request.POST.get(SELECTION, "")
    if shown == now_selected:
        return False
    opts = modeladmin.model._meta
    before = shown.partition(":")[0]
    if not before.isdigit():
        text = "the confirmation did not say which rows it showed"
    elif int(before) != len(pks):
        text = (
            f"the selection changed from {int(before):,} to {len(pks):,} "
            f"{opts.verbose_name_plural} since the confirmation page"
        )
    else:
        rows = plural(len(pks), opts.verbose_name, opts.verbose_name_plural)
        text = (
            "the selection changed since the confirmation page: the filter still "
            f"selects {rows}, but not the same ones"
        )
    modeladmin.message_user(
        request, f"Nothing was changed: {text}. Review the selection again.", messages.ERROR
    )
    return True


def filter_description(request) -> list[str]:
    """The changelist's search and filters as ``name = value`` lines, for the confirmation page."""
    shown = []
    for name, values in request.GET.lists():
        if name in (ORDER_VAR, PAGE_VAR, ALL_VAR, IS_FACETS_VAR):
            continue  # how the list is shown, not which rows it selects
        for value in values:
            if name == SEARCH_VAR:
                shown.append(f"search “{value}”")
            else:
                shown.append(f"{name} = {namespace_label(value) if name == 'namespace' else value}")
    return shown


def refusals(modeladmin, request, failed: Sequence[tuple], verb: str) -> None:
    """One error message per row an action refused, at most :data:`SHOWN_REFUSALS` of them.

    A selection of 100,000 rows may fail thousands of times (every restored key
    already taken); the first ones say why, the rest are counted, so the
    message store stays small.
    """
    for obj, reason in failed[:SHOWN_REFUSALS]:
        modeladmin.message_user(request, f"“{obj}” was not {verb}: {reason}", messages.ERROR)
    rest = len(failed) - SHOWN_REFUSALS
    if rest > 0:
        opts = modeladmin.model._meta
        noun = opts.verbose_name if rest == 1 else opts.verbose_name_plural
        modeladmin.message_user(
            request,
            f"… and {rest:,} more {noun} {'was' if rest == 1 else 'were'} not {verb}.",
            messages.ERROR,
        )


def _change_url(modeladmin, obj) -> str | None:
    from django.urls import NoReverseMatch, reverse

    opts = modeladmin.model._meta
    try:
        return reverse(
            f"{modeladmin.admin_site.name}:{opts.app_label}_{opts.model_name}_change",
            args=[obj.pk],
        )
    except NoReverseMatch:
        return None


# ------------------------------------------------------------------ filters
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


class StyledAdmin(admin.ModelAdmin):
    """A model admin with the app's stylesheet (badges, chips, confirmation pages)."""

    class Media:
        css = {"all": ("memoryapp/admin.css",)}
        js = ("memoryapp/admin.js",)


class ReadOnlyAdmin(StyledAdmin):
    """Nobody adds, changes or deletes rows of an audit table through the admin."""

    actions: Sequence[str] | None = None  # a subclass may name its own

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# ------------------------------------------------------------ downloads
def json_download(document: dict, filename: str) -> HttpResponse:
    """A JSON document as a file download (never cached)."""
    body = json.dumps(document, ensure_ascii=False, indent=2, default=str)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def worker_note(receipt) -> str:
    """What to add to an erasure's message when the erasure worker finishes it."""
    from memoryapp.compliance import purge_now
    from memoryapp.models import ReceiptState

    if purge_now() or receipt.state == ReceiptState.COMPLETE:
        return ""
    return " The rows are deleted; the erasure worker purges the files and verifies."
