# Copy checks are claimed before a server is scanned (docs/compliance.md, "Every copy of
# the data"): no two checkers scan the same (receipt, server) at once.

from django.db import migrations, models

import memoryapp.fields


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0018_receipt_tenants"),
    ]

    operations = [
        migrations.AddField(
            model_name="copycheck",
            name="claimed_by",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="copycheck",
            name="claimed_until",
            field=memoryapp.fields.IsoDateTimeField(blank=True, null=True),
        ),
    ]
