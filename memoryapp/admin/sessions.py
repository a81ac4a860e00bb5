"""The session summaries admin: list, search, and hard delete on the shared confirmation page."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import model_ngettext
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext as _

from memoryapp.admin.base import StyledAdmin, actor, db_for
from memoryapp.admin.confirm import confirmation, confirmed, selection_changed
from memoryapp.admin.filters import InputFilter, NamespaceFilter, SubjectFilter, SubjectSearch
from memoryapp.admin.labels import admin_time, namespace_cell, two_lines
from memoryapp.models import SessionSummary
from memoryapp.rules.batching import batches
from memoryapp.rules.wording import plural
from memoryapp.services import summaries


class SessionFilter(InputFilter):
    """The summaries of one session id (exact), sidebar input."""

    title = "session id"
    parameter_name = "session_id"
    field = "session_id"


@admin.register(SessionSummary)
class SessionSummaryAdmin(SubjectSearch, StyledAdmin):
    """Summaries written after complete compactions; deleting one is a hard delete."""

    # Two values per cell where they belong together (session and subject, messages and
    # tokens): seven narrow columns left the summary ~10 lines tall at 1,280 px.
    list_display = ("created", "namespace_display", "session", "size", "excerpt")
    list_filter = (NamespaceFilter, SessionFilter, SubjectFilter)
    search_fields = ("session_id", "summary_text", "=id")
    search_help_text = (
        "Searches the session id and the summary text, or an exact id or subject key."
    )
    ordering = ("-created_at", "id")
    list_per_page = 50
    fields = (
        "namespace_display",
        "session_id",
        "subject",
        "summary_text",
        "messages_summarized",
        "tokens_before",
        "created_at",
        "id",
    )
    readonly_fields = ("namespace_display",)
    delete_confirmation_template = "admin/memoryapp/sessionsummary/delete_confirmation.html"
    actions = ("delete_selected",)  # ours, in place of Django's (same name, same permission)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="namespace", ordering="namespace")
    def namespace_display(self, obj):
        return namespace_cell(obj.namespace)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return admin_time(obj.created_at)

    @admin.display(description="session, subject", ordering="session_id")
    def session(self, obj):
        return two_lines(obj.session_id, obj.subject or "no subject")

    @admin.display(description="size", ordering="tokens_before")
    def size(self, obj):
        return two_lines(
            plural(obj.messages_summarized, "message", "messages"),
            plural(obj.tokens_before, "token", "tokens"),
        )

    @admin.display(description="summary")
    def excerpt(self, obj):
        # The list's wide column: three lines at most (the stylesheet clamps them).
        return format_html(
            '<span class="mem-clamp">{}</span>', Truncator(obj.summary_text).chars(300)
        )

    @admin.action(description="Delete selected session summaries", permissions=["delete"])
    def delete_selected(self, request, queryset):
        """Django's "delete selected", on the shared confirmation page.

        Django's own page lists every summary and re-posts every id, which
        fails above ~1,000 rows; this one names the first hundred and, under
        "Select all", carries the changelist's filter. The log entries, the
        hard delete and the message are Django's.
        """
        if not confirmed(request):
            return confirmation(
                self,
                request,
                queryset,
                action="delete_selected",
                title="Delete session summaries",
                intro=[
                    format_html(
                        "Deleting session summaries is a <strong>hard delete</strong>: the rows "
                        "are removed, and the agent no longer carries them into later sessions. "
                        "This is not a verified erasure — to remove someone's data for good, "
                        'with a receipt, use <a href="{}">Erase a subject</a>.',
                        reverse("admin:memoryapp_erase_subject"),
                    )
                ],
                submit=("Yes, delete it", "Yes, delete them"),
                danger=True,
            )
        ids = list(queryset.values_list("pk", flat=True))
        if selection_changed(self, request, ids):
            return None
        if ids:
            for batch in batches(ids):
                self.log_deletions(request, SessionSummary.objects.filter(pk__in=batch))
            self._hard_delete(request, ids)
            self.message_user(
                request,
                _("Successfully deleted %(count)d %(items)s.")
                % {"count": len(ids), "items": model_ngettext(self.opts, len(ids))},
                messages.SUCCESS,
            )
        return None

    def delete_model(self, request, obj):
        self._hard_delete(request, [obj.pk])

    def delete_queryset(self, request, queryset):
        self._hard_delete(request, list(queryset.values_list("pk", flat=True)))

    def _hard_delete(self, request, ids) -> None:
        """Hard delete, with an audit event naming the acting user for each summary."""
        summaries.delete_ids(ids=ids, using=db_for(SessionSummary), actor=actor(request))
