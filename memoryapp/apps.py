"""App configuration: registers the system checks and the post-migrate hook."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryAppConfig(AppConfig):
    """The memoryapp Django app."""

    name = "memoryapp"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers the checks)
            logs,
        )
        from .db.meta import ensure_meta_rows

        # Django's SQL log carries the values of every statement: memory text.
        logs.install()

        # A test-database flush empties schema_meta; put the counter row back.
        post_migrate.connect(ensure_meta_rows, sender=self, dispatch_uid="memoryapp-meta-rows")
