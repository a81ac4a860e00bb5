"""The desk's data-subject requests in the admin: by due date, urgency shown, history read-only.

A request is opened here from the subject key (typed into a POST form, never a
URL) through :func:`memoryapp.compliance.requests.open_request`; later steps are
the actions of its change page (:mod:`memoryapp.admin.desk`), through the same
service as the API (``/api/subject-requests/``), so each one lands in the
request's history with its actor. Fields are read-only and the page has no Save
button for that reason.
"""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from memoryapp import permissions as perms
from memoryapp.admin import desk as actions
from memoryapp.admin.base import StyledAdmin
from memoryapp.compliance import requests as desk
from memoryapp.compliance.request_input import (
    RequestError,
    check_namespaces,
    check_subject,
    clean_text,
)
from memoryapp.models import OPEN_STATUSES, SubjectRequest, SubjectRequestEvent

URGENCY_STYLE = {
    "overdue": "background:#ba2121;color:#fff;padding:1px 6px;border-radius:3px",
    "due_soon": "background:#e07b39;color:#fff;padding:1px 6px;border-radius:3px",
}
URGENCY_TEXT = {"overdue": "overdue", "due_soon": "due this week"}


class OpenRequestForm(forms.ModelForm):
    """Intake: the subject key (kept encrypted while open), the right, the date, namespaces."""

    subject = forms.CharField(
        max_length=255,
        strip=False,
        # Not remembered by the browser's form history (the lookup's field says the same).
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        help_text="The person's user key, exactly as stored. Held encrypted until the "
        "request is closed; never shown again.",
    )
    namespaces = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One namespace a line; empty: every namespace.",
    )

    class Meta:
        model = SubjectRequest
        fields = ("right", "received_on", "notes")

    def clean_subject(self) -> str:
        """A non-blank key that export and erasure can take."""
        return _checked(check_subject, self.cleaned_data["subject"])

    def clean_namespaces(self) -> list[str]:
        """One namespace a line (blank lines and surrounding blanks dropped), each one
        export and erasure can name, at most 50: checked here, not only when an
        action would fail on them."""
        lines = self.cleaned_data.get("namespaces", "").splitlines()
        return list(_checked(check_namespaces, [n.strip() for n in lines if n.strip()]))

    def clean_received_on(self):
        """Not in the future (the deadline runs from receipt)."""
        value = self.cleaned_data["received_on"]
        if value and value > desk.today():
            raise forms.ValidationError("The received date is in the future.")
        return value

    def clean_notes(self) -> str:
        """Refused when too long or when they look like they hold a secret (the guard's
        patterns); the service replaces the key in them."""
        value = self.cleaned_data.get("notes", "")
        _checked(clean_text, value, None, "The notes")
        return value


def _checked(check, *args):
    """``check(*args)``, its refusal as the form's error."""
    try:
        return check(*args)
    except RequestError as e:
        raise forms.ValidationError(str(e)) from None


def deadlines_line(user) -> dict | None:
    """The overview's line "N open requests, K overdue, J due this week", with the list's links.

    None for a user who may not see requests. Shown with no open request too ("0
    open requests"): it is also the officer's way from the front page to the desk.
    """
    if not user.has_perm(perms.VIEW_SUBJECTREQUEST):
        return None
    counts = desk.deadlines()
    url = reverse("admin:memoryapp_subjectrequest_changelist")
    return {
        **counts,
        "open_url": f"{url}?urgency=open",
        "overdue_url": f"{url}?urgency=overdue",
        "due_soon_url": f"{url}?urgency=due_soon",
    }


class UrgencyFilter(admin.SimpleListFilter):
    """Open requests by how soon they are due: overdue, due this week, later."""

    title = "urgency"
    parameter_name = "urgency"

    def lookups(self, request, model_admin):
        return (
            ("open", "all open"),
            ("overdue", "overdue"),
            ("due_soon", "due this week"),
            ("later", "later"),
        )

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        at = desk.today()
        soon = at + dt.timedelta(days=desk.DUE_SOON_DAYS)
        pending = queryset.filter(status__in=OPEN_STATUSES)
        if value == "overdue":
            return pending.filter(due_on__lt=at)
        if value == "due_soon":
            return pending.filter(due_on__gte=at, due_on__lte=soon)
        if value == "later":
            return pending.filter(due_on__gt=soon)
        return pending  # "open", or a value from an old link: every open request


class HistoryInline(admin.TabularInline):
    """Every action on the request, with its actor (read-only)."""

    model = SubjectRequestEvent
    verbose_name_plural = "history"
    fields = ("at", "action", "actor", "detail")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_view_permission(self, request, obj=None) -> bool:
        # Whoever may see the request sees its history (the events have no permission
        # of their own in the compliance role: they are part of the request).
        return request.user.has_perm(perms.VIEW_SUBJECTREQUEST)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SubjectRequest)
class SubjectRequestAdmin(StyledAdmin):
    """Requests soonest due first; overdue and due-this-week flagged."""

    list_display = ("short_id", "right", "status", "received_on", "due", "assignee")
    list_filter = (UrgencyFilter, "status", "right")
    ordering = ("due_on", "created_at")
    change_form_template = "admin/memoryapp/subjectrequest/change_form.html"
    inlines = [HistoryInline]
    readonly_fields = (
        "right",
        "status",
        "received_on",
        "due_on",
        "extension_months",
        "extension_reason",
        "outcome",
        "assignee",
        "notes",
        "covers",
        "linked_exports",
        "linked_receipts",
        "created_by",
        "created_at",
        "closed_at",
    )

    def get_urls(self):
        return actions.urls(self) + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The record, its history and the desk's actions; it is never saved from here."""
        if request.method == "POST":
            if not self.has_view_or_change_permission(request):
                raise PermissionDenied  # 403 as on every other desk URL, before saying 405
            return HttpResponseNotAllowed(["GET"])  # every change is an action (admin/desk.py)
        made = self.get_object(request, object_id)
        extra = {**(actions.panel(request, made) if made else {}), **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra)

    def get_changeform_initial_data(self, request):
        """Intake starts from today's date (most requests are entered the day they arrive)."""
        return {"received_on": desk.today(), **super().get_changeform_initial_data(request)}

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = OpenRequestForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("subject", "right", "received_on", "namespaces", "notes")
        return self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else ()

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def save_model(self, request, obj, form, change) -> None:
        if change:  # every later step goes through the service, which writes the history
            return
        data = form.cleaned_data
        try:
            made = desk.open_request(
                subject=data["subject"],
                right=data["right"],
                received_on=data["received_on"],
                namespaces=data["namespaces"],
                notes=data.get("notes", ""),
                actor=request.user.get_username(),
            )
        except desk.RequestError as e:
            raise forms.ValidationError(str(e)) from e
        obj.pk = made.pk
        obj.__dict__.update(made.__dict__)
        sealed = desk.Sealed(data["subject"], tuple(data["namespaces"]))
        if not actions.holds_anything(sealed):
            # Recorded all the same (a request for data we do not hold is still answered),
            # but a mistyped key is the likeliest cause: say so while the key is at hand.
            self.message_user(
                request,
                "Nothing is held for this key"
                + (" in these namespaces" if sealed.namespaces else "")
                + ": check it was typed exactly as stored (case, spaces, the namespace). "
                "The request is recorded; if the key was wrong, refuse this one and open "
                "a new request.",
                messages.WARNING,
            )

    def save_related(self, request, form, formsets, change) -> None:
        """Nothing: the service wrote the request and its history."""

    @admin.display(description="id")
    def short_id(self, obj: SubjectRequest) -> str:
        return obj.id[:8]

    @admin.display(description="due", ordering="due_on")
    def due(self, obj: SubjectRequest):
        flag = desk.urgency(obj)
        if not flag:
            return obj.due_on
        return format_html(
            '{} <span style="{}">{}</span>', obj.due_on, URGENCY_STYLE[flag], URGENCY_TEXT[flag]
        )

    @admin.display(description="namespaces")
    def covers(self, obj: SubjectRequest) -> str:
        # The namespaces are sealed with the key; their number is what may be shown.
        n = obj.namespace_count
        return "every namespace" if not n else f"{n} namespace{'s' if n != 1 else ''}"

    @admin.display(description="exports")
    def linked_exports(self, obj: SubjectRequest) -> str:
        return _links(obj.exports.values_list("id", flat=True), "exportrecord") or "-"

    @admin.display(description="erasure receipts")
    def linked_receipts(self, obj: SubjectRequest) -> str:
        return _links(obj.receipts.values_list("id", flat=True), "erasurereceipt") or "-"

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a request is part of the proof


def _links(ids, model: str) -> str:
    """Links to the change pages of the records with ``ids`` (exports or receipts)."""
    return format_html_join(
        ", ",
        '<a href="{}">{}</a>',
        ((reverse(f"admin:memoryapp_{model}_change", args=[pk]), pk) for pk in ids),
    )
