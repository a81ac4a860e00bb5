"""Admin pages of the API's tables: one page per API client (its grants and tokens);
erasure requests are read-only.

Tokens are stored as digests: the admin shows a token in clear exactly once, on the
page that answers "Issue a new token" (never stored in a message or the session,
which live in the database or a cookie), and by its prefix afterwards.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.cache import add_never_cache_headers

from memoryapp.admin.base import StyledAdmin
from memoryapp.admin.labels import admin_time, namespace_cell
from memoryapp.api.models import ApiClient, ApiToken, ErasureRequest, NamespaceGrant


@admin.register(NamespaceGrant)
class NamespaceGrantAdmin(StyledAdmin):
    """Which namespaces each API client may read, write or erase."""

    # Short column heads and a cut namespace: at 1,280 px beside both sidebars the
    # "can …" heads and a long prefix pushed "created at" out of the list.
    list_display = ("user", "prefix", "read", "write", "erase", "created")
    list_filter = ("can_read", "can_write", "can_erase")
    search_fields = ("user__username", "namespace")
    autocomplete_fields = ("user",)

    @admin.display(description="namespace prefix", ordering="namespace")
    def prefix(self, obj):
        return namespace_cell(obj.namespace)

    @admin.display(description="read", boolean=True, ordering="can_read")
    def read(self, obj):
        return obj.can_read

    @admin.display(description="write", boolean=True, ordering="can_write")
    def write(self, obj):
        return obj.can_write

    @admin.display(description="erase", boolean=True, ordering="can_erase")
    def erase(self, obj):
        return obj.can_erase

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return admin_time(obj.created_at)


class GrantInline(admin.TabularInline):
    """A client's grants, edited on its page."""

    model = NamespaceGrant
    fields = ("namespace", "can_read", "can_write", "can_erase", "created_at")
    readonly_fields = ("created_at",)
    extra = 0


class TokenInline(admin.TabularInline):
    """A client's tokens by prefix; ticking "Delete" and saving revokes a token.

    New tokens come from the page's "Issue a new token" button (shown once), not
    from this list.
    """

    model = ApiToken
    fields = ("prefix", "created_at", "last_used_at")
    readonly_fields = fields
    extra = 0
    verbose_name = "token"
    verbose_name_plural = "tokens (the prefix identifies a token; delete to revoke it)"

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return ApiClientAdmin.may_manage(request)


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    """One page per API client (a non-staff user): its grants, its rights, its tokens.

    Staff and superuser accounts are not API clients and are not listed here.
    """

    list_display = ("username", "is_active", "grant_list", "token_count", "last_used")
    list_filter = ("is_active",)
    search_fields = ("username", "namespace_grants__namespace")
    ordering = ("username",)
    inlines = (GrantInline, TokenInline)
    actions = ("revoke_tokens",)
    change_form_template = "admin/memoryapp_api/apiclient/change_form.html"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .filter(is_staff=False, is_superuser=False)
            .prefetch_related("namespace_grants", "api_tokens")
        )

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("username", "is_active")
        return ("username", "is_active", "date_joined")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("username", "date_joined")

    def save_model(self, request, obj, form, change):
        if not change:
            # A token-only client: never staff, no password (no admin login).
            obj.is_staff = obj.is_superuser = False
            obj.set_unusable_password()
        super().save_model(request, obj, form, change)

    @admin.display(description="grants")
    def grant_list(self, obj) -> str:
        """Each grant as ``namespace (rights)``."""
        parts = []
        for g in obj.namespace_grants.all():
            rights = ", ".join(r for r, on in g.rights().items() if on)
            parts.append(f"{g.namespace or '(default)'} ({rights})")
        return "; ".join(parts) or "—"

    @admin.display(description="tokens")
    def token_count(self, obj) -> int:
        """How many tokens the client holds."""
        return len(obj.api_tokens.all())

    @admin.display(description="last used")
    def last_used(self, obj):
        """The most recent use of any of the client's tokens (to the minute)."""
        used = [t.last_used_at for t in obj.api_tokens.all() if t.last_used_at]
        return max(used) if used else None

    @staticmethod
    def may_manage(request) -> bool:
        """Whether the staff user may issue and revoke tokens (change the client)."""
        return request.user.has_perm("memoryapp_api.change_apiclient")

    @admin.action(description="Revoke every token of the selected clients")
    def revoke_tokens(self, request, queryset):
        """Delete the clients' tokens: their next request answers 401."""
        if not self.may_manage(request):
            raise PermissionDenied
        count, _ = ApiToken.objects.filter(user__in=queryset).delete()
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)

    def get_urls(self):
        new_token = self.admin_site.admin_view(self.new_token_view)
        return [
            path("<path:object_id>/new-token/", new_token, name="memoryapp_api_apiclient_token"),
            *super().get_urls(),
        ]

    def new_token_view(self, request, object_id):
        """POST: issue a token for the client and show it, this once."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.may_manage(request):
            raise PermissionDenied
        client = get_object_or_404(self.get_queryset(request), pk=object_id)
        with transaction.atomic():
            token, key = ApiToken.issue(client)
        self.log_change(request, client, f"Issued API token {token.prefix}…")
        response = TemplateResponse(
            request,
            "admin/memoryapp_api/apiclient/new_token.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "original": client,
                "title": f"New token for {client.username}",
                "token": token,
                "key": key,
                "client_url": reverse("admin:memoryapp_api_apiclient_change", args=[client.pk]),
            },
        )
        add_never_cache_headers(response)  # no proxy or browser cache keeps the page
        return response


@admin.register(ErasureRequest)
class ErasureRequestAdmin(admin.ModelAdmin):
    """Erasures asked for through the API (their Idempotency-Keys and receipts)."""

    list_display = ("created_at", "user", "idempotency_key", "receipt_id")
    search_fields = ("user__username", "idempotency_key", "receipt_id")
    readonly_fields = ("user", "idempotency_key", "fingerprint", "receipt_id", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
