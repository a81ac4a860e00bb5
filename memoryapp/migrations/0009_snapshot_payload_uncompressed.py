"""Recall snapshots are stored as they are: PostgreSQL keeps ``payload`` out of line, uncompressed.

Snapshot format 3 (``memoryapp.recall.core.snapshot``) is no longer zlib-compressed, so that
a cold recall does not spend most of its time inflating it. Left at the default
``EXTENDED`` storage, PostgreSQL would compress the value itself (pglz) and inflate it on
every read, on the server; ``EXTERNAL`` stores it out of line in TOAST without
compression. The bytes on disk are then the snapshot's own, so the erasure's byte scan
can see tokens of erased text should any ever remain. On a partitioned table the
setting applies to every partition. SQLite stores blobs as they are: nothing to do.
Existing rows keep their storage until rewritten; every stored snapshot is of the
previous format and is rewritten by its first use anyway.
"""

from django.db import migrations

from memoryapp.db.operations import VendorSQL


class Migration(migrations.Migration):
    dependencies = [("memoryapp", "0008_partition_by_namespace")]

    operations = [
        VendorSQL(
            forwards={
                "postgresql": [
                    "ALTER TABLE memory_recall_snapshots ALTER COLUMN payload SET STORAGE EXTERNAL"
                ],
                "sqlite": [],
            },
            backwards={
                "postgresql": [
                    "ALTER TABLE memory_recall_snapshots ALTER COLUMN payload SET STORAGE EXTENDED"
                ],
                "sqlite": [],
            },
            description="Store recall snapshots uncompressed (PostgreSQL: STORAGE EXTERNAL)",
            hints={"model_name": "recallsnapshot"},
        ),
    ]
