# The per-server checks of an erasure (docs/compliance.md, "Every copy of the data").

import django.db.models.deletion
from django.db import migrations, models

import memoryapp.fields


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0014_request_tenants_and_references"),
    ]

    operations = [
        migrations.CreateModel(
            name="CopyCheck",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("server", models.CharField(max_length=64)),
                ("role", models.CharField(max_length=16)),
                ("system_identifier", models.CharField(blank=True, default="", max_length=32)),
                ("outcome", models.CharField(max_length=32)),
                ("reason", models.TextField(blank=True, default="")),
                ("method", models.CharField(blank=True, default="", max_length=16)),
                ("lsn", models.CharField(blank=True, default="", max_length=32)),
                ("facts", models.JSONField(blank=True, default=dict)),
                ("sealed", models.TextField(blank=True, editable=False, null=True)),
                ("attempts", models.IntegerField(default=0)),
                ("requested_at", memoryapp.fields.IsoDateTimeField(default=memoryapp.fields.now)),
                ("checked_at", memoryapp.fields.IsoDateTimeField(blank=True, null=True)),
                (
                    "receipt",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="copy_checks",
                        to="memoryapp.erasurereceipt",
                    ),
                ),
            ],
            options={
                "verbose_name": "erasure copy check",
                "verbose_name_plural": "erasure copy checks",
                "db_table": "memory_erasure_copy_checks",
                "ordering": ("receipt", "id"),
                "indexes": [
                    models.Index(fields=["outcome", "requested_at"], name="ix_copy_checks_outcome")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("receipt", "server"), name="uix_copy_check_server"
                    )
                ],
            },
        ),
    ]
