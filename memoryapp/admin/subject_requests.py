"""The desk's data-subject requests in the admin: by due date, urgency shown, history read-only.

A request is opened here from the subject key (typed into a POST form, never a
URL) through :func:`memoryapp.compliance.desk.open_request`; later steps are
the actions of its change page (:mod:`memoryapp.admin.desk_actions`), through the same
service as the API (``/api/subject-requests/``), so each one lands in the
request's history with its actor. Fields are read-only and the page has no Save
button for that reason.
"""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpResponseNotAllowed
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from memoryapp import permissions as perms
from memoryapp.admin import desk_actions as actions
from memoryapp.admin.base import StyledAdmin
from memoryapp.admin.responses import forbidden
from memoryapp.compliance import desk
from memoryapp.compliance.desk_scope import may_handle_tenant, tenant_of, visible_requests
from memoryapp.compliance.request_input import (
    RequestError,
    check_namespaces,
    check_subject,
    clean_text,
)
from memoryapp.models import OPEN_STATUSES, DeskGrant, SubjectRequest, SubjectRequestEvent
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import check_namespace

URGENCY_STYLE = {
    "overdue": "background:#ba2121;color:#fff;padding:1px 6px;border-radius:3px",
    "due_soon": "background:#e07b39;color:#fff;padding:1px 6px;border-radius:3px",
}
TENANT_REFUSED = desk.TENANT_REFUSED
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
        fields = ("reference", "right", "received_on", "notes")
        help_texts = {
            "reference": "Your own label to tell requests apart without the key: a ticket "
            "number, the person's name. Shown in the list and searchable; the key is "
            "replaced in it.",
        }

    desk_user = None  # the officer recording it (set by the admin's get_form)

    def clean_subject(self) -> str:
        """A key a writer could have stored, of a tenant the officer's desk handles."""
        subject = _checked(check_subject, self.cleaned_data["subject"])
        if self.desk_user is not None and not may_handle_tenant(self.desk_user, tenant_of(subject)):
            raise forms.ValidationError(TENANT_REFUSED)
        return subject

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

    def clean_reference(self) -> str:
        """Refused when it looks like it holds a secret (the service replaces the key)."""
        value = self.cleaned_data.get("reference", "")
        _checked(clean_text, value, None, "The reference", desk.REFERENCE_CHARS)
        return value

    def clean_notes(self) -> str:
        """Refused when too long or when they look like they hold a secret (the guard's
        patterns); the service replaces the key in them."""
        value = self.cleaned_data.get("notes", "")
        _checked(clean_text, value, None, "The notes")
        return value


class DeskGrantForm(forms.ModelForm):
    """A tenant as a request derives it: a namespace the shared key rules accept, with
    a trailing ``/`` for a prefix (``acme/``), or empty for keys without a tenant."""

    class Meta:
        model = DeskGrant
        fields = ("user", "namespace")

    def clean_namespace(self) -> str:
        value = self.cleaned_data.get("namespace") or ""
        try:
            check_namespace(value.removesuffix("/"), "The tenant")
        except MemoryValidationError as e:
            raise forms.ValidationError(f"{e}.") from None
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
    counts = desk.deadlines(user=user)
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

    list_display = ("short_id", "reference", "right", "status", "received_on", "due", "assignee")
    list_display_links = ("short_id", "reference")
    list_filter = (UrgencyFilter, "status", "right")
    search_fields = ("reference", "tenant")
    search_help_text = "Search by reference or tenant (never by key: use Look up a user key)."
    ordering = ("due_on", "created_at")
    change_form_template = "admin/memoryapp/subjectrequest/change_form.html"
    inlines = [HistoryInline]
    readonly_fields = (
        "reference",
        "tenant",
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

    def get_queryset(self, request):
        """The requests of the tenants the user's desk grants cover (no grant: all)."""
        return visible_requests(request.user, super().get_queryset(request))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The record, its history and the desk's actions; it is never saved from here."""
        if not self.has_view_or_change_permission(request):
            # 403 as on every other desk URL, before saying 404 or 405.
            return forbidden(self, request, perms.VIEW_SUBJECTREQUEST, "Subject requests")
        if request.method == "POST":
            return HttpResponseNotAllowed(
                ["GET"]
            )  # every change is an action (admin/desk_actions.py)
        subject_request = self.get_object(request, object_id)
        if subject_request is None:
            # Unknown, or another tenant's: "not found" either way (the admin's default,
            # a redirect saying the id does not exist, would confirm nothing but differs
            # from the actions' and the API's 404).
            raise Http404("No such request.")
        extra = {
            **actions.panel(request, subject_request),
            # The record cannot be changed here: not "Change subject request".
            "title": f"Subject request {subject_request.pk[:8]}",
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    def changelist_view(self, request, extra_context=None):
        """Titled "Subject requests": a request is opened here, never changed."""
        extra = {"title": "Subject requests", **(extra_context or {})}
        return super().changelist_view(request, extra)

    def history_view(self, request, object_id, extra_context=None):
        """Django's History page; another tenant's request (or an unknown id) is a 404 here
        too, rather than the admin's redirect saying it does not exist."""
        if self.has_view_or_change_permission(request) and (
            actions.find_request(object_id, request.user) is None
        ):
            raise Http404("No such request.")
        return super().history_view(request, object_id, extra_context)

    def get_changeform_initial_data(self, request):
        """Intake starts from today's date (most requests are entered the day they arrive)."""
        return {"received_on": desk.today(), **super().get_changeform_initial_data(request)}

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = type(
                "OpenRequestForm", (OpenRequestForm,), {"desk_user": request.user}
            )
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("subject", "reference", "right", "received_on", "namespaces", "notes")
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
            subject_request = desk.open_request(
                subject=data["subject"],
                right=data["right"],
                received_on=data["received_on"],
                namespaces=data["namespaces"],
                notes=data.get("notes", ""),
                reference=data.get("reference", ""),
                actor=request.user.get_username(),
                user=request.user,
            )
        except desk.RequestError as e:
            raise forms.ValidationError(str(e)) from e
        obj.pk = subject_request.pk
        obj.__dict__.update(subject_request.__dict__)
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


@admin.register(DeskGrant)
class DeskGrantAdmin(StyledAdmin):
    """Which tenants' requests a staff user handles (none listed: every tenant's).

    Managed by whoever holds the model's permissions (an administrator): an officer
    cannot widen their own desk.
    """

    form = DeskGrantForm
    list_display = ("user", "namespace", "created_at")
    search_fields = ("namespace", "user__username")
    fields = ("user", "namespace")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user":  # the desk is staff's; API clients have their own grants
            kwargs["queryset"] = get_user_model().objects.filter(is_staff=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
