"""Admin pages of the API's tables: grants are edited here; erasure requests are read-only."""

from django.contrib import admin

from .models import ErasureRequest, NamespaceGrant


@admin.register(NamespaceGrant)
class NamespaceGrantAdmin(admin.ModelAdmin):
    """Which namespaces each API client may read, write or erase."""

    list_display = ("user", "namespace", "can_read", "can_write", "can_erase", "created_at")
    list_filter = ("can_read", "can_write", "can_erase")
    search_fields = ("user__username", "namespace")
    autocomplete_fields = ("user",)


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
