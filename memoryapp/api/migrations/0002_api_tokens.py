"""Hashed API tokens (``ApiToken``) replace DRF's clear ``authtoken_token`` rows.

Existing clear tokens are moved over as their SHA-256 digests, so deployed clients
keep working, and the clear rows are deleted. The legacy table itself is left in
place (empty): a host project may still have ``rest_framework.authtoken`` installed.
Not reversible for the data: a digest cannot be turned back into a token.
"""

import datetime as dt
import hashlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils.dateparse import parse_datetime

LEGACY_TABLE = "authtoken_token"
PREFIX_LENGTH = 8  # memoryapp.api.models.PREFIX_LENGTH when this was written


def digest_of(key: str) -> str:
    """memoryapp.api.models.digest_of, frozen here as a migration must be."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _aware(created):
    """A stored ``created`` value as an aware datetime (SQLite keeps naive UTC)."""
    if isinstance(created, str):
        created = parse_datetime(created)
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=dt.UTC)
    return created


def hash_legacy_tokens(apps, schema_editor):
    """Copy every clear DRF token as a digest, then delete the clear rows."""
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("memoryapp_api", "ApiToken")
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('key')}, {quote('user_id')}, {quote('created')}"
            f" FROM {quote(LEGACY_TABLE)}"
        )
        rows = cursor.fetchall()
        tokens = [
            ApiToken(user_id=user_id, digest=digest_of(key), prefix=key[:PREFIX_LENGTH])
            for key, user_id, _created in rows
        ]
        ApiToken.objects.bulk_create(tokens)
        # auto_now_add set created_at to now: keep each token's own creation time.
        for (_key, _user_id, created), token in zip(rows, tokens, strict=True):
            if created is not None:
                ApiToken.objects.filter(digest=token.digest).update(created_at=_aware(created))
        cursor.execute(f"DELETE FROM {quote(LEGACY_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp_api", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiClient",
            fields=[],
            options={
                "verbose_name": "API client",
                "verbose_name_plural": "API clients",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=(settings.AUTH_USER_MODEL,),
        ),
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                ("prefix", models.CharField(editable=False, max_length=8)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(blank=True, editable=False, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "API token",
                "verbose_name_plural": "API tokens",
                "ordering": ("user", "-created_at", "-id"),
            },
        ),
        migrations.RunPython(hash_legacy_tokens, migrations.RunPython.noop, elidable=True),
    ]
