"""App configuration: the checks, the post-migrate hook and Memory.objects' entry points."""

from django.apps import AppConfig
from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate

from memoryapp.db.meta import CHANGE_KEY, SCHEMA_VERSION, VERSION_KEY
from memoryapp.db.read_your_writes import install_write_detector


class MemoryAppConfig(AppConfig):
    """The memoryapp Django app."""

    name = "memoryapp"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memoryapp.ops import logs
        from memoryapp.services import queryset_methods as entry_points

        # Django's SQL log carries the values of every statement: memory text.
        logs.install()

        # Memory.objects.upsert / .recall: the querysets may not import the layers above.
        entry_points.install()

        # The system checks (memoryapp.E001..., the replicas' W010) register on import.
        from memoryapp.ops import checks  # noqa: F401

        # Read-your-writes with replicas: every primary connection notes its writes.
        connection_created.connect(
            install_write_detector, dispatch_uid="memoryapp-replica-write-detector"
        )

        # A test-database flush empties schema_meta; put the counter row back.
        post_migrate.connect(ensure_meta_rows, sender=self, dispatch_uid="memoryapp-meta-rows")


def ensure_meta_rows(sender=None, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """Create the ``memories_change`` and ``version`` rows when missing.

    Connected to ``post_migrate`` by :meth:`MemoryAppConfig.ready`: a test-database flush empties
    ``schema_meta`` and this puts the counter back at 0 (the triggers upsert it
    anyway, but ``change_version()`` should read a row, not a default).
    """
    # Here, not in db.meta: the models sit above the vendor SQL, which must not import them.
    from memoryapp.models import SchemaMeta

    if not router.allow_migrate_model(using, SchemaMeta):
        return
    if SchemaMeta._meta.db_table not in connections[using].introspection.table_names():
        return  # migrated to zero
    SchemaMeta.objects.using(using).get_or_create(key=CHANGE_KEY, defaults={"value": "0"})
    SchemaMeta.objects.using(using).get_or_create(
        key=VERSION_KEY, defaults={"value": SCHEMA_VERSION}
    )
