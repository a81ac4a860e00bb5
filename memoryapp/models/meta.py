"""Bookkeeping tables: the schema metadata, per-slice change counters, recall snapshots."""

from __future__ import annotations

from django.db import models


class SchemaMeta(models.Model):
    """Key/value metadata: ``version`` and the trigger-maintained ``memories_change`` counter."""

    key = models.CharField(primary_key=True, max_length=64)
    value = models.TextField()

    class Meta:
        db_table = "schema_meta"
        ordering = ("key",)
        verbose_name = "schema metadata"
        verbose_name_plural = "schema metadata"

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


class SliceChange(models.Model):
    """A change counter per (namespace, scope), bumped by triggers beside ``memories_change``.

    The recall index of one slice is current for its slice's value, so writes in
    other namespaces cost it nothing (not even a delta query); the database-wide
    ``memories_change`` row stays for Agentao and docs/behaviour.md §1. A slice without a row
    has never been written since this table was installed: its value is 0.
    """

    namespace = models.CharField(max_length=255)
    scope = models.CharField(max_length=16)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "memory_slice_changes"
        verbose_name = "slice change counter"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "scope"], name="uix_memory_slice_changes"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.scope}={self.value}"


class RecallSnapshot(models.Model):
    """A slice's recall index as bytes, so that a cold process loads it instead of rebuilding.

    ``counter`` is the slice's change-counter value the index was current for and
    ``watermark`` (POSIX seconds, the writer's clock) when it began reading rows; a
    loader whose slice counter differs catches up with the rows changed since, as a
    warm process does. The payload holds tokens of memory text, so it is personal
    data: a trigger deletes a slice's snapshot whenever a row of the slice is
    hard-deleted (erasure, raw SQL, another writer), and the erasure purge and byte
    scan cover this table. See :mod:`memoryapp.db.snapshots`.
    """

    namespace = models.CharField(max_length=255)
    scope = models.CharField(max_length=16)
    counter = models.BigIntegerField()
    watermark = models.FloatField()
    rows = models.IntegerField()
    payload = models.BinaryField()
    written_at = models.FloatField()

    class Meta:
        db_table = "memory_recall_snapshots"
        verbose_name = "recall snapshot"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "scope"], name="uix_memory_recall_snapshots"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.scope}@{self.counter} ({self.rows} rows)"
