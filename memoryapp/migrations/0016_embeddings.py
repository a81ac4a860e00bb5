# The semantic recall ranking's stored embeddings (docs/behaviour.md §5, "semantic").

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0015_erasure_copy_checks"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="embedding",
            field=models.BinaryField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="embedding_model",
            field=models.CharField(blank=True, editable=False, max_length=128, null=True),
        ),
    ]
