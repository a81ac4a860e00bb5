"""The app's model admin bases, the acting user, and the database the admin writes to."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS, router

from memoryapp.admin.responses import forbidden
from memoryapp.db import replicas


def actor(request) -> str:
    """Who is acting, as recorded in events and receipts."""
    return request.user.get_username()


def db_for(model) -> str:
    """The database alias the admin writes ``model`` to."""
    return router.db_for_write(model)


FILTER_TEMPLATE = "memoryapp/admin/filter.html"


class CountedChangeList(ChangeList):
    """Django's change list, its plain filters rendered with thousands separators in
    their facet counts (:data:`FILTER_TEMPLATE`)."""

    def get_filters(self, request, *args, **kwargs):
        found = super().get_filters(request, *args, **kwargs)
        for spec in found[0]:
            if getattr(spec, "template", "") == "admin/filter.html":
                spec.template = FILTER_TEMPLATE
        return found


class StyledAdmin(admin.ModelAdmin):
    """A model admin with the app's stylesheet (badges, chips, confirmation pages)."""

    class Media:
        css = {"all": ("memoryapp/admin.css", "memoryapp/narrow.css")}
        js = ("memoryapp/admin.js",)

    def get_queryset(self, request):
        """A change list read by GET tolerates lag: a read replica may serve it."""
        queryset = super().get_queryset(request)
        url_name = getattr(request.resolver_match, "url_name", "") or ""
        changelist = request.method == "GET" and url_name.endswith("_changelist")
        if changelist and queryset.db == DEFAULT_DB_ALIAS:
            queryset = queryset.using(replicas.lag_tolerant_alias(DEFAULT_DB_ALIAS))
        return queryset

    def _styled_403(self, request, action: str, view, *args, **kwargs):
        """``view(...)``, its ``PermissionDenied`` as the app's styled 403 naming
        ``action``'s permission (``view``, ``add``, ``change``, ``delete``).

        Django's model views raise ``PermissionDenied``, which gave a bare "403
        Forbidden" without the admin's frame or a way back to a staff user who
        followed a link (docs/operations.md promises the styled page).
        """
        try:
            return view(request, *args, **kwargs)
        except PermissionDenied:
            opts = self.model._meta
            perm = f"{opts.app_label}.{action}_{opts.model_name}"
            return forbidden(self, request, perm, str(opts.verbose_name_plural).capitalize())

    def changelist_view(self, request, extra_context=None):
        parent = super().changelist_view
        if request.method != "GET":  # an action: it writes, on the primary
            return self._styled_403(request, "view", parent, extra_context)

        def read():
            response = self._styled_403(request, "view", parent, extra_context)
            # Rendered here: the page's rows are read while the template renders, and a
            # replica dying then must be caught here too (the primary renders it again).
            if hasattr(response, "render") and not response.is_rendered:
                response.render()
            return response

        return replicas.read_with_fallback(read)

    def add_view(self, request, form_url="", extra_context=None):
        return self._styled_403(request, "add", super().add_view, form_url, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        parent = super().change_view
        return self._styled_403(request, "view", parent, object_id, form_url, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        parent = super().delete_view
        return self._styled_403(request, "delete", parent, object_id, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        parent = super().history_view
        return self._styled_403(request, "view", parent, object_id, extra_context)

    def get_changelist(self, request, **kwargs):
        return CountedChangeList

    def get_changelist_instance(self, request):
        # A NUL in a query parameter (``?id=%00``, ``?status=%00``) reached PostgreSQL as
        # an error, a 500; the admin's answer to a lookup it cannot run is its "?e=1" page.
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                raise IncorrectLookupParameters("A NUL character in the query.")
        return super().get_changelist_instance(request)


class ReadOnlyAdmin(StyledAdmin):
    """Nobody adds, changes or deletes rows of an audit table through the admin."""

    actions: Sequence[str] | None = None  # a subclass may name its own

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
