"""The review queue folds per subject: ``uix_review_scope_key`` gains ``COALESCE(subject, '')``.

Before, alice's and dave's identical message folded into one pending item whose
subject was whoever wrote last: the other's export and erasure missed it. Such a
merged item cannot be split honestly (its evidence keeps only the latest message),
so every pending item counting more than one occurrence is flagged
``subjects_uncertain`` for a reviewer: one subject saying a thing twice looks the
same in the row as two subjects saying it once.

On PostgreSQL the table is partitioned by namespace (migration 0008): the new unique
index is created on every leaf, whose generated names are renamed after the parent's
(``uix_review_scope_key_p17``), as the partitioning step named them. The SQL is frozen
here; migrations never import live code.
"""

import django.db.models.functions.comparison
from django.db import migrations, models, router

TABLE = "memory_review_queue"
INDEX = "uix_review_scope_key"


def _quote(name):
    return '"' + name.replace('"', '""') + '"'


def flag_merged(apps, schema_editor):
    """Pending items folded from more than one occurrence: whose they are is uncertain."""
    db = schema_editor.connection.alias
    ReviewItem = apps.get_model("memoryapp", "ReviewItem")
    ReviewItem.objects.using(db).filter(status="pending", occurrences__gt=1).update(
        subjects_uncertain=True
    )


def refuse_to_merge_subjects(apps, schema_editor):
    """Backwards: the old index allows one pending item per key, whoever proposed it.

    Merging several people's pending items into one is the defect this migration
    removes; rather than do it silently, unapplying stops (nothing changed: the
    migration runs in one transaction) and says which keys to decide first.
    """
    from django.db.models import Count

    db = schema_editor.connection.alias
    ReviewItem = apps.get_model("memoryapp", "ReviewItem")
    shared = (
        ReviewItem.objects.using(db)
        .filter(status="pending")
        .values("namespace", "scope", "key_normalized")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .order_by("namespace", "scope", "key_normalized")
    )
    keys = [f"{row['namespace']} {row['scope']} {row['key_normalized']}" for row in shared[:5]]
    if keys:
        raise RuntimeError(
            f"Cannot unapply 0013: {shared.count()} pending review key(s) have items from several "
            "subjects, which the old index would have to merge into one person's item (e.g. "
            + "; ".join(keys)
            + "). Approve or reject them first (admin: Review items, status pending), then "
            "migrate back."
        )


def name_leaf_indexes(apps, schema_editor):
    """Each leaf's copy of the new index named ``uix_review_scope_key_pNN`` (PostgreSQL)."""
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or not router.allow_migrate(connection.alias, "memoryapp"):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, t.relname FROM pg_class p "
            "JOIN pg_inherits i ON i.inhparent = p.oid "
            "JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_index ci ON ci.indexrelid = c.oid "
            "JOIN pg_class t ON t.oid = ci.indrelid "
            "WHERE p.relname = %s AND p.relkind = 'I'",
            [INDEX],
        )
        for child, leaf in cursor.fetchall():
            remainder = leaf.rsplit("_p", 1)[-1]
            if not remainder.isdigit():
                continue
            wanted = f"{INDEX}_p{remainder}"
            if child != wanted:
                cursor.execute(f"ALTER INDEX {_quote(child)} RENAME TO {_quote(wanted)}")


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0012_subject_requests"),
    ]

    operations = [
        # Backwards, this runs last: the restored old index's leaves get their names too.
        migrations.RunPython(migrations.RunPython.noop, name_leaf_indexes),
        migrations.AddField(
            model_name="reviewitem",
            name="subjects_uncertain",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(flag_merged, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="reviewitem",
            name="uix_review_scope_key",
        ),
        migrations.AddConstraint(
            model_name="reviewitem",
            constraint=models.UniqueConstraint(
                models.F("namespace"),
                models.F("scope"),
                django.db.models.functions.comparison.Coalesce(
                    models.F("subject"), models.Value("")
                ),
                models.F("key_normalized"),
                condition=models.Q(("status", "pending")),
                name="uix_review_scope_key",
            ),
        ),
        # Backwards, this runs before the old index returns: it refuses to merge subjects.
        migrations.RunPython(migrations.RunPython.noop, refuse_to_merge_subjects),
        migrations.RunPython(name_leaf_indexes, migrations.RunPython.noop),
    ]
