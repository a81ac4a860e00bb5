"""App configuration of the API sub-package (its own label, its own migrations)."""

from django.apps import AppConfig


class MemoryApiConfig(AppConfig):
    """The memoryapp REST API: namespace grants, idempotent erasure requests, the DRF views."""

    name = "memoryapp.api"
    label = "memoryapp_api"
    verbose_name = "Agent memory API"
    default_auto_field = "django.db.models.BigAutoField"
