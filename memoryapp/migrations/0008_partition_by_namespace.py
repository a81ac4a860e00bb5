"""PostgreSQL: the personal-data tables partitioned by ``HASH (namespace)``.

An erasure then rewrites and byte-scans only the partitions that held the erased
rows, not whole tables (memoryapp/db/partitioning.py says why and how). SQLite
is unchanged. On a large database this migration copies each table once (it
needs the tables' size again in free disk, and holds them locked meanwhile):
run it in a maintenance window.
"""

from django.db import migrations, router

from memoryapp.db import partitioning
from memoryapp.db.vendor import for_connection


def _each_table(apps, schema_editor, change) -> None:
    connection = schema_editor.connection
    if not router.allow_migrate(connection.alias, "memoryapp"):
        return
    if not for_connection(connection).partitions_by_namespace:
        return
    with connection.cursor() as cursor:
        for table in partitioning.TABLES:
            change(cursor, table)


def partition(apps, schema_editor) -> None:
    _each_table(apps, schema_editor, partitioning.partition_table)


def unpartition(apps, schema_editor) -> None:
    _each_table(apps, schema_editor, partitioning.unpartition_table)


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0007_erasure_receipt_states"),
    ]

    operations = [migrations.RunPython(partition, unpartition)]
