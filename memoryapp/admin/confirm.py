"""Confirmation pages for admin actions, "Select all N" selections, and refused rows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from django import forms
from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import (  # type: ignore[attr-defined]
    ALL_VAR,
    IS_FACETS_VAR,  # Django 5.0's, not in django-stubs 6.1.2
    ORDER_VAR,
    PAGE_VAR,
    SEARCH_VAR,
)
from django.template.response import TemplateResponse

from memoryapp.admin.labels import namespace_label
from memoryapp.rules.wording import plural

SHOWN_OBJECTS = 100  # a confirmation page lists at most this many rows by name
SHOWN_REFUSALS = 20  # per-row error messages after an action; the rest are counted

SELECT_ACROSS = "select_across"  # the field of Django's action form: "Select all N" was chosen
SELECTION = "_selection"  # "<count>:<digest>" of the rows a select-across confirmation showed


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
