"""The app's model admin bases, the acting user, and the database the admin writes to."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db import DEFAULT_DB_ALIAS, router

from memoryapp.db import replicas


def actor(request) -> str:
    """Who is acting, as recorded in events and receipts."""
    return request.user.get_username()


def db_for(model) -> str:
    """The database alias the admin writes ``model`` to."""
    return router.db_for_write(model)


class StyledAdmin(admin.ModelAdmin):
    """A model admin with the app's stylesheet (badges, chips, confirmation pages)."""

    class Media:
        css = {"all": ("memoryapp/admin.css",)}
        js = ("memoryapp/admin.js",)

    def get_queryset(self, request):
        """A change list read by GET tolerates lag: a read replica may serve it."""
        queryset = super().get_queryset(request)
        url_name = getattr(request.resolver_match, "url_name", "") or ""
        changelist = request.method == "GET" and url_name.endswith("_changelist")
        if changelist and queryset.db == DEFAULT_DB_ALIAS:
            queryset = queryset.using(replicas.lag_tolerant_alias(DEFAULT_DB_ALIAS))
        return queryset

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
