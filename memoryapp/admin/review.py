"""The review queue: crystallizer candidates approved, rejected or purged (hard delete, receipt)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Case, IntegerField, Value, When
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memoryapp import permissions as perms
from memoryapp.admin.base import StyledAdmin, actor
from memoryapp.admin.confirm import confirmation, confirmed, refusals, selection_changed
from memoryapp.admin.filters import NamespaceFilter, SubjectFilter, SubjectSearch
from memoryapp.admin.forms import PurgeForm, ReviewItemForm
from memoryapp.admin.labels import (
    chips,
    count_rows,
    namespace_cell,
    namespace_label,
    title_cell,
    two_lines,
)
from memoryapp.admin.responses import forbidden, worker_note
from memoryapp.compliance import ErasureRequestError, erase, preview, purge_now
from memoryapp.models import Memory, MemoryEvent, ReviewItem, ReviewStatus
from memoryapp.rules.batching import batches
from memoryapp.rules.wording import plural
from memoryapp.services import review, review_edit


def _queue_counts(ids) -> list[dict]:
    """The rows a purge of these review items removes, for its confirmation page.

    Events are counted in batches: one ``IN`` list for a whole status would
    pass SQLite's limit of 32,766 bound variables.
    """
    events = MemoryEvent.objects
    n = sum(events.filter(memory_id__in=batch).count() for batch in batches(ids))
    return count_rows({"memory_review_queue": len(ids), "memory_events": n})


def receipt_link(receipt) -> str:
    """A link to a receipt's page, for messages."""
    url = reverse("admin:memoryapp_erasurereceipt_change", args=[receipt.pk])
    return format_html('<a href="{}">receipt {}</a>', url, receipt.pk[:12])


_EDIT_REFUSED = "_memoryapp_review_edit_refused"
"""Set on a request whose edit the service refused after the form's checks passed."""

SHOWN_APPROVED = 5
"""The new memories an approval message links by name; more are counted."""


def _approved_message(approved: int, items) -> str:
    """ "Approved 1 review item; it is a memory now: <link to the memory>." (links for a few).

    ``items``: the approved items' ``(namespace, id)`` pairs (an id alone may be
    another namespace's item too)."""
    made = review.approved_memories(items)
    # The memory's title is its key (as Agentao titles an approved item): shown as it is.
    titles = dict(
        Memory.objects.filter(pk__in=list(made.values())[:SHOWN_APPROVED]).values_list(
            "pk", "title"
        )
    )
    links = [
        format_html(
            '<a href="{}">{}</a>',
            reverse("admin:memoryapp_memory_change", args=[pk]),
            Truncator(titles.get(pk) or pk).chars(60),
        )
        for pk in list(made.values())[:SHOWN_APPROVED]
    ]
    head = f"Approved {plural(approved, 'review item', 'review items')}; "
    if not links:
        return head + ("it is a memory now." if approved == 1 else "they are memories now.")
    more = approved - len(links)
    shown = format_html_join(", ", "{}", ((link,) for link in links))
    if approved == 1:
        return format_html("{}it is a memory now: {}.", head, shown)
    if more > 0:
        return format_html("{}they are memories now: {} and {} more.", head, shown, f"{more:,}")
    return format_html("{}they are memories now: {}.", head, shown)


# -------------------------------------------------------------- review queue
class StatusFilter(admin.SimpleListFilter):
    """The queue opens on what needs a decision: pending, unless another status is chosen."""

    title = "status"
    parameter_name = "status"
    ALL = "all"

    def lookups(self, request, model_admin):
        return [*ReviewStatus.choices, (self.ALL, "All")]

    def value(self):
        return super().value() or ReviewStatus.PENDING

    def queryset(self, request, queryset):
        if self.value() == self.ALL:
            return queryset
        return queryset.filter(status=self.value())

    def choices(self, changelist):
        # No "All" of Django's own (it would be the default, pending): ours is explicit.
        for value, label in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }


@admin.register(ReviewItem)
class ReviewItemAdmin(SubjectSearch, StyledAdmin):
    """Crystallizer candidates: pending first; approve, reject or purge them."""

    list_display = (
        "item",
        "status_badge",
        "namespace_subject",
        "kind",
        "seen",
    )
    list_filter = (
        StatusFilter,
        NamespaceFilter,
        SubjectFilter,
        "type",
        "scope",
        "confidence",
        # Items folded from several subjects before migration 0013: a reviewer decides.
        "subjects_uncertain",
    )
    # The subject is matched whole and exactly (SubjectSearch), not as a substring:
    # "acme/zed" must not find another tenant's "globex/acme/zed".
    search_fields = ("title", "key_normalized", "content", "evidence", "=id")
    search_help_text = (
        "Searches the title, key, content and evidence, or an exact id or subject key."
    )
    list_per_page = 50
    actions = ("approve_selected", "reject_selected", "purge_selected")
    change_list_template = "admin/memoryapp/reviewitem/change_list.html"
    change_form_template = "admin/memoryapp/reviewitem/change_form.html"
    fieldsets = (
        (None, {"fields": ("title", "content", "status_badge", "type", "scope")}),
        ("Why it was proposed", {"fields": ("evidence", "occurrences", "confidence")}),
        (
            "Where it comes from",
            {
                "fields": (
                    "namespace_display",
                    "subject",
                    "subjects_uncertain",
                    "source_session",
                    "key_normalized",
                    "tags_display",
                    "created_at",
                    "updated_at",
                    "id",
                )
            },
        ),
    )
    readonly_fields = ("status_badge", "namespace_display", "tags_display")
    form = ReviewItemForm

    # ---------------------------------------------------------- permissions
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # Decisions are actions (approve / reject); the one edit is a reviewer's
        # correction of a pending item's title, content, type or scope (docs/behaviour.md §6).
        return (
            obj is not None
            and obj.status == ReviewStatus.PENDING
            and self.has_decide_permission(request)
        )

    def get_readonly_fields(self, request, obj=None):
        if not self.has_change_permission(request, obj):
            return super().get_readonly_fields(request, obj)
        shown = [name for _, options in self.fieldsets for name in options["fields"]]
        return [name for name in shown if name not in review_edit.EDITABLE]

    def save_model(self, request, obj, form, change):
        # Never obj.save(): the correction goes through the guard, audited, in the service.
        try:
            edited = review_edit.edit(
                item_id=obj.pk,
                namespace=obj.namespace,
                changes=form.corrections,
                actor=actor(request),
            )
        except review_edit.ReviewEditConflict as exc:
            # The form checked for a collision, but another edit (or a new candidate)
            # took this scope and key between that check and this save: say so, as
            # the form would have, instead of a server error. Its message holds no text.
            setattr(request, _EDIT_REFUSED, True)
            self.message_user(request, f"Not saved: {exc}.", messages.ERROR)
            return
        if edited is None:  # decided or purged since the form was shown
            setattr(request, _EDIT_REFUSED, True)
            self.message_user(
                request, "The item is no longer pending: nothing was changed.", messages.ERROR
            )

    def log_change(self, request, obj, message):
        if getattr(request, _EDIT_REFUSED, False):
            return None  # nothing changed: no "Changed …" history entry
        return super().log_change(request, obj, message)

    def response_change(self, request, obj):
        if getattr(request, _EDIT_REFUSED, False):
            # Back to the item as stored, with the refusal; not "changed successfully".
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def has_delete_permission(self, request, obj=None):
        return False  # removing is "purge": hard delete, vacuum, receipt

    def has_decide_permission(self, request):
        return request.user.has_perm(perms.CHANGE_REVIEWITEM)

    def has_purge_permission(self, request):
        return request.user.has_perm(perms.PURGE_REVIEWITEM)

    def get_ordering(self, request):
        pending_first = Case(
            When(status=ReviewStatus.PENDING, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        )
        return (pending_first.asc(), "-occurrences", "-updated_at", "id")

    # ---------------------------------------------------------------- lists
    @admin.display(description="namespace", ordering="namespace")
    def namespace_display(self, obj):
        return namespace_cell(obj.namespace)

    @admin.display(description="namespace, subject", ordering="namespace")
    def namespace_subject(self, obj):
        # Whose message it came from (what approval, export and erasure go by), under
        # the namespace: one more column did not fit at 1,280 px.
        whose = obj.subject or "no subject"
        others = getattr(obj, "other_proposers", 0) or 0
        if others:  # project scope: the siblings decided with this item
            also = plural(others, "other", "others")
            whose = format_html("{} · also proposed by {}", whose, also)
        if obj.subjects_uncertain:
            whose = format_html("{} · subjects uncertain", whose)
        return two_lines(namespace_cell(obj.namespace), whose)

    def get_queryset(self, request):
        return super().get_queryset(request).with_other_proposers()

    @admin.display(description="tags")
    def tags_display(self, obj):
        return chips(obj.tags) or "—"

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        return format_html('<span class="mem-badge mem-{}">{}</span>', obj.status, obj.status)

    @admin.display(description="candidate and evidence", ordering="title")
    def item(self, obj):
        return title_cell(
            obj.title, format_html("“{}”", Truncator(obj.evidence or obj.content).chars(110))
        )

    @admin.display(description="type", ordering="type")
    def kind(self, obj):
        return two_lines(obj.get_type_display(), f"{obj.scope} scope")

    @admin.display(description="occurrences", ordering="occurrences")
    def seen(self, obj):
        return two_lines(f"{obj.occurrences}×", obj.get_confidence_display())

    def get_urls(self):
        urls = [
            path(
                "purge/",
                self.admin_site.admin_view(self.purge_view),
                name="memoryapp_reviewitem_purge",
            )
        ]
        return urls + super().get_urls()

    def changelist_view(self, request, extra_context=None):
        extra = {"can_purge": self.has_purge_permission(request), **(extra_context or {})}
        return super().changelist_view(request, extra)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if obj is not None:
            extra.update(
                can_decide=obj.status == ReviewStatus.PENDING
                and self.has_decide_permission(request),
                can_purge=self.has_purge_permission(request),
            )
        return super().change_view(request, object_id, form_url, extra)

    # -------------------------------------------------------------- actions
    @admin.action(description="Approve selected review items", permissions=["decide"])
    def approve_selected(self, request, queryset):
        pending = queryset.filter(status=ReviewStatus.PENDING)
        if not confirmed(request):
            return confirmation(
                self,
                request,
                pending,
                action="approve_selected",
                title="Approve review items",
                intro=[
                    "Each pending item becomes a memory (source “crystallized”) through the "
                    "same guard as every other write; the agent will recall it.",
                    "Items that are not pending are left as they are.",
                ],
                submit=("Yes, approve it", "Yes, approve them"),
            )
        pairs = list(pending.values_list("namespace", "pk"))
        ids = [pk for _, pk in pairs]
        if selection_changed(self, request, ids):
            return None
        # The one decision path: chunks of items, each memory in its item's namespace,
        # scope and subject, the review_approve events logged with the decisions.
        approved, failed = review.approve_many(item_ids=ids, actor=actor(request))
        if approved:
            self.message_user(request, _approved_message(approved, pairs), messages.SUCCESS)
        refusals(self, request, failed, "approved")
        return None

    @admin.action(description="Reject selected review items", permissions=["decide"])
    def reject_selected(self, request, queryset):
        pending = queryset.filter(status=ReviewStatus.PENDING)
        if not confirmed(request):
            return confirmation(
                self,
                request,
                pending,
                action="reject_selected",
                title="Reject review items",
                intro=[
                    "Each pending item is marked rejected: it never becomes a memory. The "
                    "item and its evidence stay in the queue until purged.",
                ],
                submit=("Yes, reject it", "Yes, reject them"),
            )
        ids = list(pending.values_list("pk", flat=True))
        if selection_changed(self, request, ids):
            return None
        # The service logs the review_reject events with the decisions.
        rejected = review.reject_many(item_ids=ids, actor=actor(request))
        self.message_user(
            request,
            f"Rejected {plural(rejected, 'review item', 'review items')}.",
            messages.SUCCESS,
        )
        return None

    @admin.action(description="Purge selected review items permanently…", permissions=["purge"])
    def purge_selected(self, request, queryset):
        pairs = list(queryset.values_list("namespace", "pk"))
        ids = [pk for _, pk in pairs]
        # Exactly the selected items: never another table's (or namespace's) row that
        # happens to share an id.
        rows = {ReviewItem._meta.db_table: pairs}
        if not confirmed(request):
            return confirmation(
                self,
                request,
                queryset,
                action="purge_selected",
                title="Purge review items permanently",
                intro=[
                    "The selected review items, with their evidence (excerpts of what users "
                    "said), are deleted for good and the database files are rewritten so the "
                    "text cannot be recovered. A receipt records the counts.",
                ],
                warning="This cannot be undone.",
                # What erase(rows=...) below removes, counted by the erasure itself.
                counts=count_rows(preview(rows=rows)["counts"]) if ids else None,
                submit=("Yes, purge it permanently", "Yes, purge them permanently"),
                danger=True,
            )
        if selection_changed(self, request, ids):
            return None
        self._purge(request, lambda: erase(rows=rows, actor=actor(request), purge=purge_now()))
        return None

    def _purge(self, request, run) -> bool:
        """Run one purge (``run()`` returns its receipt) and tell the user; True if it ran."""
        try:
            receipt = run()
        except ErasureRequestError as exc:
            self.message_user(request, f"Nothing was purged: {exc}", messages.ERROR)
            return False
        n = receipt.counts.get("memory_review_queue", 0)
        self.message_user(
            request,
            format_html(
                "Purged {} permanently ({}).{}",
                plural(n, "review item", "review items"),
                receipt_link(receipt),
                worker_note(receipt),
            ),
            messages.SUCCESS,
        )
        return True

    # ------------------------------------------------------ purge by status
    def purge_view(self, request):
        """Purge every review item of a status (optionally of one namespace), confirmed."""
        if not self.has_purge_permission(request):
            return forbidden(self, request, perms.PURGE_REVIEWITEM, "Purge review items")
        namespaces = list(
            ReviewItem.objects.order_by("namespace").values_list("namespace", flat=True).distinct()
        )
        form = PurgeForm(request.POST if request.method == "POST" else None, namespaces=namespaces)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Purge review items",
            "form": form,
        }
        if request.method == "POST" and form.is_valid():
            status, namespace = form.selection()
            qs = ReviewItem.objects.with_status(status)
            if namespace is not None:
                qs = qs.in_namespace(namespace)
            ids = list(qs.values_list("pk", flat=True))
            if not confirmed(request):
                context.update(
                    step="confirm",
                    status_label=status or "any status",
                    namespace_label=namespace_label(namespace) if namespace is not None else None,
                    counts=_queue_counts(ids),
                    total=len(ids),
                )
                return TemplateResponse(request, "memoryapp/admin/purge_review.html", context)
            purged = self._purge(
                request,
                lambda: review.purge(
                    namespaces=[namespace], status=status, actor=actor(request), purge=purge_now()
                )[0],
            )
            if not purged:
                return HttpResponseRedirect(request.path)
            return HttpResponseRedirect(reverse("admin:memoryapp_reviewitem_changelist"))
        context["step"] = "form"
        return TemplateResponse(request, "memoryapp/admin/purge_review.html", context)
