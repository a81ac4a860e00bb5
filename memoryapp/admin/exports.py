"""Export a subject or namespace as one JSON document, and the export records (read-only)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.text import slugify

from memoryapp.admin.base import ReadOnlyAdmin, actor
from memoryapp.admin.compliance import (
    EXPORT_PERM,
    can_see_exports,
    known_namespaces,
    links,
    page,
    requires,
)
from memoryapp.admin.confirm import confirmed
from memoryapp.admin.forms import ExportForm
from memoryapp.admin.responses import json_download
from memoryapp.compliance import ErasureRequestError, authored_count, desk_scope, export, preview
from memoryapp.compliance.lookup import lookup
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, ExportRecord, ExportVia


@requires(EXPORT_PERM, "Export a subject or namespace")
def export_view(modeladmin, request):
    """Download everything stored about a subject or namespace as one JSON document.

    A target that holds nothing (a mistyped key, most often) is a warning page
    first, as on the erase page; downloading it anyway is one more click. Every
    download writes an export record (``export(via="admin")``). A tenant-scoped
    officer's target outside their desk grants is refused on the form.
    """
    form = ExportForm(request.POST if request.method == "POST" else None)
    title = "Export a subject or namespace"
    if request.method == "POST" and form.is_valid():
        subject, namespace = form.cleaned_data["subject"], form.cleaned_data["namespace"]
        if not desk_scope.may_handle_keys(request.user, subject, namespace):
            field = "subject" if subject is not None else "namespace"
            form.add_error(field, desk_scope.outside_desk(request.user, field))
        elif not confirmed(request) and not _holds_anything(subject, namespace):
            return page(
                modeladmin,
                request,
                "memoryapp/admin/export.html",
                title=title,
                form=form,
                step="empty",
                subject=subject,
                namespace=namespace,
                earlier_receipts=_earlier_receipts(request.user, subject),
            )
        else:
            try:
                document = export(
                    subject=subject, namespace=namespace, actor=actor(request), via=ExportVia.ADMIN
                )
            except ErasureRequestError as exc:
                form.add_error(None, str(exc))
            else:
                label = slugify(subject or namespace or "default") or "default"
                return json_download(document, f"export-{label}-{now():%Y%m%d-%H%M%S}.json")
    return page(
        modeladmin,
        request,
        "memoryapp/admin/export.html",
        title=title,
        form=form,
        step="form",
        namespaces=known_namespaces(request.user),
    )


def _earlier_receipts(user, subject: str | None) -> int:
    """How many erasure receipts ``user`` may see name ``subject`` (the empty page says so)."""
    if subject is None:
        return 0
    mine = desk_scope.visible_records(user, ErasureReceipt.objects.all())
    return lookup(subject, receipts=mine).receipts.count()


def _holds_anything(subject: str | None, namespace: str | None) -> bool:
    """True when an export of this target would list at least one stored row."""
    found = preview(subject=subject, namespace=namespace)
    if any(n for n in found["counts"].values() if isinstance(n, int)):
        return True
    return subject is not None and authored_count(subject, namespace=namespace) > 0


@admin.register(ExportRecord)
class ExportRecordAdmin(ReadOnlyAdmin):
    """Who exported whose data, when, through which interface (read-only).

    The record names the subject and namespace by keyed HMAC only: to find a
    person's exports, use "Look up a user key".
    """

    list_display = ("created_at", "id_short", "target_kind", "via", "actor", "total_rows")
    list_filter = ("via", "target_kind", "limited_to_grants")
    search_fields = ("=id", "actor")
    search_help_text = "An exact record id, or part of an actor's name."
    ordering = ("-created_at", "id")
    change_list_template = "admin/memoryapp/exportrecord/change_list.html"
    fields = (
        "id",
        "created_at",
        "actor",
        "via",
        "target_kind",
        "limited_to_grants",
        "counts",
        "request_id",
        "subject_hmac",
        "namespace_hmac",
        "key_id",
    )

    def has_view_permission(self, request, obj=None):
        return can_see_exports(request.user)

    def get_queryset(self, request):
        # A tenant-scoped officer lists (and opens) the records of their tenants only.
        return desk_scope.visible_records(request.user, super().get_queryset(request))

    def changelist_view(self, request, extra_context=None):
        extra = {**links(request.user), **(extra_context or {})}
        return super().changelist_view(request, extra)

    @admin.display(description="id", ordering="id")
    def id_short(self, obj):
        return format_html('<code title="{}">{}</code>', obj.pk, obj.pk[:12])

    @admin.display(description="rows exported")
    def total_rows(self, obj):
        return f"{obj.total:,}"
