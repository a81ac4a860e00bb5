"""Persisted recall indexes (``memory_recall_snapshots``) and the trigger that forgets them.

A snapshot holds tokens of memory text. Whenever a row of ``memories`` is
hard-deleted — by an erasure, raw SQL or another writer such as Agentao — the
snapshot of its (namespace, scope) slice is deleted in the same statement, so no
token of erased text survives in a snapshot. On PostgreSQL the trigger is
statement-level with a transition table and its name sorts after the slice-counter
triggers of 0004: a deleting statement bumps the slice counter (taking that row's
lock) before it forgets the snapshot, so a snapshot written concurrently under the
old counter is either refused (see ``memoryapp.snapshots.persist``) or deleted.
TRUNCATE of ``memories`` empties the table too.
"""

from django.db import migrations, models

from memoryapp.db.operations import VendorSQL

_SQLITE_FORGET = (
    "CREATE TRIGGER trg_memory_snapshot_forget AFTER DELETE ON memories\n"
    "BEGIN\n"
    "    DELETE FROM memory_recall_snapshots\n"
    "    WHERE namespace = OLD.namespace AND scope = OLD.scope;\n"
    "END"
)
_PG_FORGET_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryapp_forget_snapshots() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_recall_snapshots AS s
    USING (SELECT DISTINCT namespace, scope FROM old_rows) AS gone
    WHERE s.namespace = gone.namespace AND s.scope = gone.scope;
    RETURN NULL;
END;
$$
""".strip()
_PG_TRUNCATE_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryapp_truncate_snapshots() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_recall_snapshots;
    RETURN NULL;
END;
$$
""".strip()

FORWARDS = {
    "sqlite": ["DROP TRIGGER IF EXISTS trg_memory_snapshot_forget", _SQLITE_FORGET],
    "postgresql": [
        _PG_FORGET_FUNCTION,
        _PG_TRUNCATE_FUNCTION,
        "CREATE TRIGGER trg_memory_snapshot_forget AFTER DELETE ON memories "
        "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
        "EXECUTE FUNCTION memoryapp_forget_snapshots()",
        "CREATE TRIGGER trg_memory_snapshot_truncate AFTER TRUNCATE ON memories "
        "FOR EACH STATEMENT EXECUTE FUNCTION memoryapp_truncate_snapshots()",
    ],
}
BACKWARDS = {
    "sqlite": ["DROP TRIGGER IF EXISTS trg_memory_snapshot_forget"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS trg_memory_snapshot_forget ON memories",
        "DROP TRIGGER IF EXISTS trg_memory_snapshot_truncate ON memories",
        "DROP FUNCTION IF EXISTS memoryapp_forget_snapshots()",
        "DROP FUNCTION IF EXISTS memoryapp_truncate_snapshots()",
    ],
}


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0004_slice_change_counters"),
    ]

    operations = [
        migrations.CreateModel(
            name="RecallSnapshot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("namespace", models.CharField(max_length=255)),
                ("scope", models.CharField(max_length=16)),
                ("counter", models.BigIntegerField()),
                ("watermark", models.FloatField()),
                ("rows", models.IntegerField()),
                ("payload", models.BinaryField()),
                ("written_at", models.FloatField()),
            ],
            options={
                "verbose_name": "recall snapshot",
                "db_table": "memory_recall_snapshots",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("namespace", "scope"), name="uix_memory_recall_snapshots"
                    )
                ],
            },
        ),
        VendorSQL(
            forwards=FORWARDS,
            backwards=BACKWARDS,
            description="Forget a slice's recall snapshot when a row of it is deleted",
            # Where recall snapshots are not migrated (the ephemeral store), no trigger needs them.
            hints={"model_name": "recallsnapshot"},
        ),
    ]
