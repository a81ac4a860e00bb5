"""The memories admin: list, search, guarded editing, soft delete, restore, erase and export."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import Truncator

from memoryapp import permissions as perms
from memoryapp.admin.base import StyledAdmin, actor, db_for
from memoryapp.admin.confirm import confirmation, confirmed, refusals, selection_changed
from memoryapp.admin.filters import NamespaceFilter, SubjectFilter, SubjectSearch
from memoryapp.admin.forms import MemoryForm
from memoryapp.admin.labels import (
    admin_time,
    chips,
    count_rows,
    event_rows,
    namespace_cell,
    title_cell,
    two_lines,
)
from memoryapp.admin.responses import json_download, worker_note
from memoryapp.compliance import ErasureRequestError, erase, preview, purge_now
from memoryapp.compliance.export import export_memories
from memoryapp.fields import now
from memoryapp.models import Memory, MemoryEvent, Scope
from memoryapp.rules import validation
from memoryapp.rules.batching import batches
from memoryapp.rules.wording import plural
from memoryapp.services import memories

HISTORY_ROWS = 50  # events shown on a memory's page (the full list is one click away)
# The add form's namespace is the owner: for a user-scope memory, the user key. Left
# empty, the memory is the user-scope memory of the default namespace — the API and
# the agents of a multi-tenant project (which pass a user key) never recall it — and
# the namespace cannot be changed afterwards, so the operator is told at once.
USER_SCOPE_WITHOUT_USER = (
    "This memory is in the user scope, but no user key was given: the namespace is empty, "
    "so it belongs to the default (single-tenant) namespace. Only an agent whose user key "
    "is empty recalls it; the API and agents with a user key never do. To give it to a "
    "user, add it again with their user key as the namespace and soft-delete this one."
)
SOFT_DELETED = "Soft-deleted."  # the History page's "Action" column, as "Changed content."
RESTORED = "Restored."


# ------------------------------------------------------------------ filters
class StateFilter(admin.SimpleListFilter):
    """Live memories by default; soft-deleted ones only when asked for."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("deleted", "Deleted (soft-deleted)")]

    def queryset(self, request, queryset):
        return queryset.deleted() if self.value() == "deleted" else queryset.live()

    def choices(self, changelist):
        yield {
            "selected": self.value() != "deleted",
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "Live",
        }
        yield {
            "selected": self.value() == "deleted",
            "query_string": changelist.get_query_string({self.parameter_name: "deleted"}),
            "display": "Deleted (soft-deleted)",
        }


def showing_deleted(request) -> bool:
    """Whether the changelist (or an action posted to it) is on the "deleted" view."""
    return request.GET.get(StateFilter.parameter_name) == "deleted"


# -------------------------------------------------------------- the admin
@admin.register(Memory)
class MemoryAdmin(SubjectSearch, StyledAdmin):
    """Operators inspect, correct, soft-delete, restore, erase and export memories."""

    form = MemoryForm
    list_display = (
        "memory",
        "state",
        "namespace_display",
        "kind",
        "origin",
        "updated",
    )
    list_filter = (
        StateFilter,
        NamespaceFilter,
        SubjectFilter,
        "scope",
        "type",
        "source",
        "confidence",
    )
    search_fields = ("title", "key_normalized", "content", "tags_json", "=id")
    search_help_text = (
        "Searches the title, key, content and tags, or an exact id or subject key "
        "(a user-scope memory is its user namespace's)."
    )
    ordering = ("-updated_at", "id")
    list_per_page = 50
    actions = ("soft_delete_selected", "restore_selected", "erase_selected", "export_selected")
    change_form_template = "admin/memoryapp/memory/change_form.html"
    change_list_template = "admin/memoryapp/memory/change_list.html"

    # ---------------------------------------------------------- permissions
    def has_delete_permission(self, request, obj=None):
        # No hard delete through Django's generic views: deleting is a soft
        # delete, removing for good is "Erase permanently" (with a receipt).
        return False

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.deleted_at is not None:
            return False  # a soft-deleted memory is read-only until restored
        return super().has_change_permission(request, obj)

    def has_soft_delete_permission(self, request):
        return request.user.has_perm(perms.DELETE_MEMORY)

    def has_restore_permission(self, request):
        return request.user.has_perm(perms.CHANGE_MEMORY)

    def has_erase_permission(self, request):
        return request.user.has_perm(perms.ERASE_MEMORY)

    def has_export_permission(self, request):
        return request.user.has_perm(perms.EXPORT_MEMORY)

    def get_actions(self, request):
        actions = super().get_actions(request)
        # On the "deleted" view only restoring makes sense, elsewhere only deleting.
        actions.pop(
            "soft_delete_selected" if showing_deleted(request) else "restore_selected", None
        )
        return actions

    # ---------------------------------------------------------------- lists
    @admin.display(description="namespace", ordering="namespace")
    def namespace_display(self, obj):
        return namespace_cell(obj.namespace)

    @admin.display(description="title", ordering="title")
    def memory(self, obj):
        return title_cell(obj.title, Truncator(obj.content).chars(90))

    @admin.display(description="type", ordering="type")
    def kind(self, obj):
        return two_lines(obj.get_type_display(), f"{obj.scope} scope")

    @admin.display(description="source", ordering="source")
    def origin(self, obj):
        return two_lines(obj.get_source_display(), obj.get_confidence_display())

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj):
        return admin_time(obj.updated_at)

    @admin.display(description="state")
    def state(self, obj):
        if obj.deleted_at is None:
            return mark_safe('<span class="mem-badge mem-live">live</span>')
        return format_html(
            '<span class="mem-badge mem-deleted" title="soft-deleted {}">deleted</span>',
            admin_time(obj.deleted_at),
        )

    @admin.display(description="tags")
    def tags_display(self, obj):
        return chips(obj.tags) or "—"

    @admin.display(description="keywords")
    def keywords_display(self, obj):
        return chips(obj.keywords, css="mem-chip mem-chip-quiet") or "—"

    @admin.display(description="subject (provenance)")
    def subject_display(self, obj):
        return obj.subject or "— (none recorded)"

    def changelist_view(self, request, extra_context=None):
        extra = {"showing_deleted": showing_deleted(request), **(extra_context or {})}
        return super().changelist_view(request, extra)

    # --------------------------------------------------------------- forms
    def get_fieldsets(self, request, obj=None):
        where = (
            "Where it lives",
            {
                "fields": (
                    "state",
                    "namespace_display",
                    "scope",
                    "key_normalized",
                    "subject_display",
                )
            },
        )
        provenance = (
            "Provenance",
            {
                "fields": (
                    "source",
                    "confidence",
                    "sensitivity",
                    "keywords_display",
                    "created_at",
                    "updated_at",
                    "deleted_at",
                    "id",
                )
            },
        )
        if obj is None:
            return [
                (None, {"fields": ("namespace", "scope", "subject")}),
                ("The memory", {"fields": ("key", "content", "tags", "type")}),
            ]
        if self.has_change_permission(request, obj):
            return [(None, {"fields": ("key", "content", "tags", "type")}), where, provenance]
        return [
            (None, {"fields": ("title", "content", "tags_display", "type")}),
            where,
            provenance,
        ]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return (
            "state",
            "namespace_display",
            "scope",
            "key_normalized",
            "subject_display",
            "source",
            "confidence",
            "sensitivity",
            "tags_display",
            "keywords_display",
            "created_at",
            "updated_at",
            "deleted_at",
            "id",
            "title",
        )

    def save_model(self, request, obj, form, change):
        """Write through the services (change window, index update) with the acting user.

        An edit may rename: :func:`memoryapp.services.memories.edit` moves the row to
        its new key and updates it in place. An addition is an upsert into the
        namespace and scope the form names.
        """
        using = db_for(Memory)
        who = actor(request)
        if change:
            try:
                result = memories.edit(
                    memory_id=obj.pk, prepared=form.prepared, using=using, actor=who
                )
            except Memory.DoesNotExist:  # erased while the form was open
                raise Http404("This memory no longer exists (it was erased).") from None
        else:
            result = memories.write(
                prepared=form.prepared,
                using=using,
                namespace=form.cleaned_data["namespace"],
                subject=(form.cleaned_data.get("subject") or "").strip() or None,
                actor=who,
            )
        if validation.key_is_cut(form.cleaned_data["key"]):
            self.message_user(request, validation.KEY_CUT_WARNING, messages.WARNING)
        if not change and result.memory.scope == Scope.USER and result.memory.namespace == "":
            self.message_user(request, USER_SCOPE_WITHOUT_USER, messages.WARNING)
        for f in Memory._meta.concrete_fields:
            setattr(obj, f.attname, getattr(result.memory, f.attname))
        obj._state.adding = False
        obj._state.db = using

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        obj = self.get_object(request, object_id)
        if obj is not None:
            events = MemoryEvent.objects.using(db_for(MemoryEvent)).filter(memory_id=obj.pk)
            extra.update(
                memory_events=event_rows(events.order_by("-id")[:HISTORY_ROWS]),
                memory_events_total=events.count(),
                events_url=reverse("admin:memoryapp_memoryevent_changelist")
                + f"?memory_id={obj.pk}",
                is_deleted=obj.deleted_at is not None,
                can_soft_delete=obj.deleted_at is None and self.has_soft_delete_permission(request),
                can_restore=obj.deleted_at is not None and self.has_restore_permission(request),
                can_erase=self.has_erase_permission(request),
                can_export=self.has_export_permission(request),
            )
        return super().change_view(request, object_id, form_url, extra)

    # -------------------------------------------------------------- actions
    def log_history(self, request, ids, message: str) -> None:
        """One entry per memory in Django's History (``django_admin_log``), as edits have.

        The store records its audit events (``memory_events``), but the
        object's History page reads the admin log: without these entries it
        showed the edits of a memory and not that it was soft-deleted or
        restored. ``log_actions`` writes each batch in one ``bulk_create``;
        batches of 500 ids keep under SQLite's bound-variable limit on a
        "Select all" of 100,000 rows. Only the ids and titles are read (a title
        is what Django records; an erasure later replaces it with "[erased]").
        """
        memories = Memory.objects.using(db_for(Memory)).only("id", "title")
        for batch in batches(ids):
            LogEntry.objects.log_actions(
                request.user.pk, memories.filter(pk__in=batch), CHANGE, message
            )

    @admin.action(description="Soft-delete selected memories", permissions=["soft_delete"])
    def soft_delete_selected(self, request, queryset):
        live = queryset.live()
        if not confirmed(request):
            return confirmation(
                self,
                request,
                live,
                action="soft_delete_selected",
                title="Soft-delete memories",
                intro=[
                    "These memories will be hidden from agents: recall, the prompt blocks and "
                    "the API stop seeing them.",
                    "Soft delete is not erasure: each row and its content stay in the "
                    "database and can be restored from the “Deleted” filter. To remove the "
                    "text for good, use “Erase permanently”.",
                ],
                submit=("Yes, soft-delete it", "Yes, soft-delete them"),
            )
        ids = list(live.values_list("pk", flat=True))
        if selection_changed(self, request, ids):
            return None
        ids = memories.soft_delete_selection(using=db_for(Memory), ids=ids, actor=actor(request))
        self.log_history(request, ids, SOFT_DELETED)
        self.message_user(
            request,
            f"Soft-deleted {plural(len(ids), 'memory', 'memories')}. "
            "Find them under the “Deleted” filter to restore them.",
            messages.SUCCESS,
        )
        return None

    @admin.action(description="Restore selected memories", permissions=["restore"])
    def restore_selected(self, request, queryset):
        deleted = queryset.deleted()
        if not confirmed(request):
            return confirmation(
                self,
                request,
                deleted,
                action="restore_selected",
                title="Restore memories",
                intro=[
                    "These soft-deleted memories will be live again: agents recall them and "
                    "they appear in the prompt blocks.",
                    "A memory whose key is now held by another live memory of the same "
                    "namespace and scope cannot be restored; it is reported and left deleted.",
                ],
                submit=("Yes, restore it", "Yes, restore them"),
            )
        ids = list(deleted.values_list("pk", flat=True))
        if selection_changed(self, request, ids):
            return None
        restored, refused = memories.restore_selection(
            using=db_for(Memory), ids=ids, actor=actor(request)
        )
        self.log_history(request, restored, RESTORED)
        if restored:
            self.message_user(
                request,
                f"Restored {plural(len(restored), 'memory', 'memories')}.",
                messages.SUCCESS,
            )
        refusals(self, request, [(title, why) for _, title, why in refused], "restored")
        return None

    @admin.action(description="Erase selected memories permanently…", permissions=["erase"])
    def erase_selected(self, request, queryset):
        pairs = list(queryset.values_list("namespace", "pk"))
        ids = [pk for _, pk in pairs]
        # Exactly the selected rows: never another table's (or namespace's) row that
        # happens to share an id.
        rows = {Memory._meta.db_table: pairs}
        if confirmed(request) and selection_changed(self, request, ids):
            return None  # before "nothing to erase": an emptied selection is a change too
        if not ids:
            return None
        if not confirmed(request):
            found = preview(rows=rows)
            return confirmation(
                self,
                request,
                queryset,
                action="erase_selected",
                title="Erase memories permanently",
                intro=[
                    "The selected memories and every audit event that describes them will be "
                    "deleted from the database, and their bytes purged from the database files "
                    "by the configured purge method, so that their text cannot be recovered. A "
                    "receipt records who asked, when, and how many rows went from each table — "
                    "never the erased text.",
                ],
                warning="This cannot be undone.",
                counts=count_rows(found["counts"]),
                submit=("Yes, erase it permanently", "Yes, erase them permanently"),
                danger=True,
            )
        try:
            receipt = erase(rows=rows, actor=actor(request), purge=purge_now())
        except ErasureRequestError as exc:
            self.message_user(request, f"Nothing was erased: {exc}", messages.ERROR)
            return None
        n = receipt.counts.get("memories", 0)
        self.message_user(
            request,
            f"Erased {plural(n, 'memory', 'memories')} permanently. This is the receipt."
            + worker_note(receipt),
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse("admin:memoryapp_erasurereceipt_change", args=[receipt.pk])
        )

    @admin.action(description="Export selected memories as JSON…", permissions=["export"])
    def export_selected(self, request, queryset):
        if not confirmed(request):
            return confirmation(
                self,
                request,
                queryset,
                action="export_selected",
                title="Export memories as JSON",
                intro=[
                    "Downloads one JSON document with these memories (content, tags, keywords, "
                    "provenance) and their audit events.",
                    "It contains personal data: keep it only as long as you need it.",
                ],
                submit="Download the JSON",
            )
        rows = list(queryset.order_by("created_at", "id"))
        ids = [m.pk for m in rows]
        if selection_changed(self, request, ids):
            return None
        document = export_memories(rows=rows, using=db_for(MemoryEvent))
        return json_download(document, f"memories-{now():%Y%m%d-%H%M%S}.json")
