"""Read-only admin tables: the audit events, the schema metadata and the erasure receipts."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import display_for_value
from django.db.models import Exists, OuterRef
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from memoryapp import permissions as perms
from memoryapp.admin.base import ReadOnlyAdmin, db_for
from memoryapp.admin.compliance import links
from memoryapp.admin.erasure import (
    attention_guidance,
    erase_subject_view,
    receipt_print_view,
    retry_receipt_view,
)
from memoryapp.admin.exports import export_view
from memoryapp.admin.filters import InputFilter, SubjectFilter, SubjectSearch
from memoryapp.admin.labels import (
    ADMIN_LOG,
    admin_time,
    count_rows,
    format_detail,
    namespace_cell,
    two_lines,
)
from memoryapp.admin.lookup import lookup_view
from memoryapp.admin.wipe import wipe_namespace_view
from memoryapp.compliance import (
    ReceiptInProgress,
    desk_scope,
    outcome_of,
    outcome_words,
    receipt_as_dict,
    retry_purge,
    rows_removed,
)
from memoryapp.db.meta import CHANGE_KEY, VERSION_KEY, read_change_counter
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ReceiptState,
    ReviewItem,
    SchemaMeta,
    SessionSummary,
)
from memoryapp.rules.outcomes import UNKNOWN, Outcome, label
from memoryapp.rules.receipt_text import summarize
from memoryapp.rules.wording import plural

RECEIPT_REFRESH_SECONDS = 5
"""How often an unfinished receipt's page reloads itself while the worker runs."""

# The states the erasure worker takes up on its own (a failed purge included: it
# retries). Any other state is final for the page: complete, or waiting for a person.
_WORKER_STATES = (ReceiptState.REQUESTED, ReceiptState.DELETED)


def in_progress(receipt: ErasureReceipt) -> bool:
    """True while the erasure worker still has the receipt to complete."""
    return receipt.state in _WORKER_STATES


# ------------------------------------------------------------------ events
class MemoryIdFilter(InputFilter):
    title = "memory id"
    parameter_name = "memory_id"
    field = "memory_id"


class ActorFilter(admin.AllValuesFieldListFilter):
    """The actors, as a drop-down when there are many; the empty actor is named."""

    template = "memoryapp/admin/choice_filter.html"

    def choices(self, changelist):
        for choice in super().choices(changelist):
            if choice.get("display") == "":
                choice["display"] = "(not recorded)"
            yield choice


class EventTypeFilter(admin.AllValuesFieldListFilter):
    template = "memoryapp/admin/choice_filter.html"


@admin.register(MemoryEvent)
class MemoryEventAdmin(SubjectSearch, ReadOnlyAdmin):
    """The audit log of writes (ids, types, times, actors — never content); read-only."""

    # The actor under the event type: one column fewer kept the detail in view at 1,280 px.
    list_display = ("id", "when", "event", "row_link", "namespace_display", "detail_display")
    list_filter = (
        ("event_type", EventTypeFilter),
        MemoryIdFilter,
        SubjectFilter,
        ("actor", ActorFilter),
    )
    search_fields = ("=memory_id", "actor")
    search_help_text = (
        "An exact memory id, part of an actor's name, or an exact subject key (the events "
        "of the subject's memories, review items and summaries)."
    )
    ordering = ("-id",)
    list_per_page = 100
    show_full_result_count = False

    def get_queryset(self, request):
        ref = OuterRef("memory_id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                is_memory=Exists(Memory.objects.filter(pk=ref)),
                is_review=Exists(ReviewItem.objects.filter(pk=ref)),
                is_summary=Exists(SessionSummary.objects.filter(pk=ref)),
            )
        )

    @admin.display(description="when", ordering="timestamp")
    def when(self, obj):
        return admin_time(obj.timestamp)

    @admin.display(description="event, actor", ordering="event_type")
    def event(self, obj):
        return two_lines(obj.event_type, obj.actor or "actor not recorded")

    @admin.display(description="memory id", ordering="memory_id")
    def row_link(self, obj):
        for flag, model in (
            ("is_memory", "memory"),
            ("is_review", "reviewitem"),
            ("is_summary", "sessionsummary"),
        ):
            if getattr(obj, flag, False):
                url = reverse(f"admin:memoryapp_{model}_change", args=[obj.memory_id])
                # The first 12 characters, as the receipts list shows ids; all in the tooltip.
                return format_html(
                    '<a href="{}" title="{}"><code>{}</code></a>',
                    url,
                    obj.memory_id,
                    obj.memory_id[:12],
                )
        return format_html(
            '<code title="{}">{}</code> <span class="quiet">(gone)</span>',
            obj.memory_id,
            obj.memory_id[:12],
        )

    @admin.display(description="namespace", ordering="namespace")
    def namespace_display(self, obj):
        return namespace_cell(obj.namespace)

    @admin.display(description="detail")
    def detail_display(self, obj):
        return format_detail(obj.detail) or "—"


# -------------------------------------------------------------- schema meta
MEANINGS = {
    VERSION_KEY: "Schema version (Agentao-compatible stores write the same value).",
    CHANGE_KEY: "Advanced by database triggers on every insert, update and delete of "
    "memories, whoever writes; recall indexes are keyed by it.",
}


@admin.register(SchemaMeta)
class SchemaMetaAdmin(ReadOnlyAdmin):
    """``schema_meta``: the schema version and the live ``memories_change`` counter."""

    list_display = ("key", "value", "meaning")
    change_list_template = "admin/memoryapp/schemameta/change_list.html"

    @admin.display(description="meaning")
    def meaning(self, obj):
        return MEANINGS.get(obj.key, "")

    def retry_receipt(self, request, object_id):
        return retry_receipt_view(self, request, object_id)

    def changelist_view(self, request, extra_context=None):
        using = db_for(SchemaMeta)
        version = SchemaMeta.objects.using(using).filter(key=VERSION_KEY).first()
        extra = {
            "live_counter": read_change_counter(using),
            "schema_version": version.value if version else "?",
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)


# ------------------------------------------------------------------ receipts
# The receipt list's "verified" column: a tick for a byte scan's proof, else these words.
_OUTCOME_SHORT = {
    Outcome.UNSCANNED.value: "not scanned",
    Outcome.NOT_VERIFIED.value: "no",
    Outcome.NOT_CHECKED.value: "not yet",
    Outcome.NOTHING_ERASED.value: "nothing",
    UNKNOWN: "unknown",
}


@admin.register(ErasureReceipt)
class ErasureReceiptAdmin(ReadOnlyAdmin):
    """Proof of each erasure: who, when, what, counts per table, purge and verification.

    Also hosts the compliance pages (erase a subject, wipe a namespace, export).
    """

    # Beside the two sidebars a list has about 630 px at 1,280 px: the columns
    # pair up (time over id, target over actor), the flags are icons under short
    # headers, and the long texts (the whole id and actor, the counts per table,
    # the state and purge status in words) are the cells' tooltips.
    list_display = (
        "created",
        "target_actor",
        "counts_summary",
        "state_badge",
        "purge_flag",
        "vacuum",
        "verified_flag",
    )
    list_filter = ("state", "target_kind", "verified", "vacuumed")
    search_fields = ("=id", "actor")
    search_help_text = "An exact receipt id, or part of an actor's name."
    ordering = ("-created_at", "id")
    actions = ("retry_purge_selected",)
    change_form_template = "admin/memoryapp/erasurereceipt/change_form.html"
    change_list_template = "admin/memoryapp/erasurereceipt/change_list.html"
    fieldsets = (
        (
            "Request",
            {
                "fields": (
                    "id",
                    "created_at",
                    "actor",
                    "target_kind",
                    "include_authored",
                    "criteria",
                )
            },
        ),
        (
            "Result",
            {
                "fields": (
                    "state",
                    "authored_display",
                    "purge_method",
                    "purge_status",
                    "vacuumed",
                    "outcome_display",
                    "verification",
                    "caveats",
                    "purged_at",
                    "attempts",
                    "databases",
                )
            },
        ),
        (
            "Identifiers (keyed HMACs — the receipt never holds the subject or erased text)",
            {"fields": ("subject_hmac", "namespace_hmac", "key_id", "ids_recorded")},
        ),
    )
    readonly_fields = ("authored_display", "outcome_display", "ids_recorded")

    def has_view_permission(self, request, obj=None):
        return perms.can_see_receipts(request.user)

    def get_queryset(self, request):
        # A tenant-scoped officer lists, opens and retries their tenants' receipts only.
        return desk_scope.visible_records(request.user, super().get_queryset(request))

    def has_retry_permission(self, request):
        return request.user.has_perm(perms.ERASE_MEMORY)

    def get_urls(self):
        view = self.admin_site.admin_view
        urls = [
            path("erase-subject/", view(self.erase_subject), name="memoryapp_erase_subject"),
            path("wipe-namespace/", view(self.wipe_namespace), name="memoryapp_wipe_namespace"),
            path("export/", view(self.export), name="memoryapp_export"),
            path(
                "<path:object_id>/retry/",
                view(self.retry_receipt),
                name="memoryapp_erasurereceipt_retry",
            ),
            path("lookup/", view(self.lookup), name="memoryapp_lookup"),
            path(
                "<path:object_id>/print/",
                view(self.print_receipt),
                name="memoryapp_erasurereceipt_print",
            ),
        ]
        return urls + super().get_urls()

    def erase_subject(self, request):
        return erase_subject_view(self, request)

    def wipe_namespace(self, request):
        return wipe_namespace_view(self, request)

    def export(self, request):
        return export_view(self, request)

    def retry_receipt(self, request, object_id):
        return retry_receipt_view(self, request, object_id)

    def lookup(self, request):
        return lookup_view(self, request)

    def print_receipt(self, request, object_id):
        return receipt_print_view(self, request, object_id)

    def changelist_view(self, request, extra_context=None):
        extra = {**links(request.user), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if obj is not None:
            extra["receipt_counts"] = count_rows(obj.counts or {})
            extra["receipt_total"] = rows_removed(obj.counts)
            extra["receipt_refresh"] = RECEIPT_REFRESH_SECONDS if in_progress(obj) else None
            extra["attention"] = attention_guidance(obj, request.user)
            extra["receipt_summary"] = summarize(receipt_as_dict(obj))
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return format_html(
            '{}<code class="mem-excerpt" title="{}">{}</code>',
            admin_time(obj.created_at),
            obj.pk,
            obj.pk[:12],
        )

    @admin.display(description="target, actor", ordering="target_kind")
    def target_actor(self, obj):
        return format_html(
            '{}<span class="mem-excerpt mem-ns" title="{}">{}</span>',
            obj.get_target_kind_display(),
            obj.actor,
            f"by {obj.actor}" if obj.actor else "actor not recorded",
        )

    @admin.display(description="removed")
    def counts_summary(self, obj):
        """The rows removed in all, with the count per table as the tooltip.

        Admin history entries are not removed (their titles become "[erased]"):
        they are in the tooltip, not in the total.
        """
        # In the tables' usual order: PostgreSQL's jsonb does not keep the keys' order.
        parts = [(r["table"], r["count"]) for r in count_rows(obj.counts or {}) if r["count"]]
        if not parts:
            return "nothing"
        total = rows_removed(obj.counts)  # the CLI's `erase --list` count, same rows
        detail = ", ".join(
            f"{table}: {n:,}" + (" (titles replaced)" if table == ADMIN_LOG else "")
            for table, n in parts
        )
        return format_html('<span title="{}">{}</span>', detail, plural(total, "row", "rows"))

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        return format_html(
            '<span class="mem-badge mem-receipt-{}" title="{}">{}</span>',
            obj.state,
            obj.get_state_display(),
            obj.state,
        )

    @admin.display(description="purged", ordering="purge_status")
    def purge_flag(self, obj):
        """Django's yes/no icon; the purge status, with its reason, as the tooltip."""
        icon = display_for_value(obj.purged, "", boolean=True)
        return format_html('<span title="{}">{}</span>', obj.purge_status, icon)

    @admin.display(description="vacuum", boolean=True, ordering="vacuumed")
    def vacuum(self, obj):
        return obj.vacuumed

    @admin.display(description="verified", ordering="verified")
    def verified_flag(self, obj):
        """A tick only for a byte scan's proof; otherwise the outcome in a word or two
        (its full name is the tooltip): never a tick for a scan that could not run."""
        outcome, reason = outcome_of(obj)
        short = _OUTCOME_SHORT.get(outcome)
        shown = display_for_value(True, "", boolean=True) if short is None else short
        return format_html('<span title="{}">{}</span>', label(outcome, reason), shown)

    @admin.display(description="verification outcome")
    def outcome_display(self, obj):
        return outcome_words(obj)

    @admin.display(description="project memories the subject wrote")
    def authored_display(self, obj):
        authored = obj.authored or {}
        if not authored:
            return "—"
        if "project_memories_kept" in authored:
            n = authored["project_memories_kept"]
            return f"{n:,} kept (not erased; their ids are recorded in this receipt)"
        return "erased too (include authored)"

    @admin.display(description="ids recorded (for replay after a restore)")
    def ids_recorded(self, obj):
        ids = obj.erased_ids or {}
        if not ids:
            return "none"
        return format_html_join(", ", "{}: {}", ((t, f"{len(v):,}") for t, v in ids.items()))

    @admin.action(description="Retry the purge and verification", permissions=["retry"])
    def retry_purge_selected(self, request, queryset):
        done = 0
        held: list[ReceiptInProgress] = []
        for receipt in queryset:
            if receipt.purged and receipt.verified:
                continue
            try:
                retry_purge(receipt)
            except ReceiptInProgress as busy:  # another process runs it now: left to it
                held.append(busy)
                continue
            done += 1
        self.message_user(
            request,
            f"Retried the purge of {plural(done, 'receipt', 'receipts')}; "
            "see their purge and verification columns.",
            messages.SUCCESS,
        )
        for other in held:
            self.message_user(request, f"Not retried: {other}.", messages.WARNING)
