"""``memory reembed``: store the current embedder's vectors on the rows that lack them.

A model change (another ``MEMORYAPP_EMBEDDER``, a new release of the shipped model)
leaves rows with vectors of the old model; recall never compares those, it embeds
such rows again as it reads them (memoryapp.recall.rows.with_vectors). This stores
the new vectors so that no read pays for it again. Rows are read and written in
batches by primary key; ``updated_at`` and the change counters are left alone on
purpose: the text did not change, and every index already holds these vectors.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.db.models import Q

from memoryapp import conf
from memoryapp.models import Memory
from memoryapp.recall.core import vectors

BATCH = 500


def stale_rows(using: str, model: str, *, everything: bool = False):
    """The rows (live and soft-deleted) whose vector is missing or of another model."""
    rows = Memory.objects.using(using).all()
    if not everything:
        rows = rows.filter(Q(embedding__isnull=True) | ~Q(embedding_model=model))
    return rows


def reembed(
    using: str,
    *,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Embed the stale rows (``everything``: all rows) and store their vectors.

    Returns:
        How many rows were written.

    Raises:
        RuntimeError: no embedder is configured or it cannot load.
    """
    embedder = conf.embedder()
    if embedder is None:
        raise RuntimeError(f"no embedder: {conf.embedder_problem()}")
    model = embedder.model_id
    ids = list(
        stale_rows(using, model, everything=everything).order_by("pk").values_list("pk", flat=True)
    )
    done = 0
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        rows = list(Memory.objects.using(using).filter(pk__in=chunk).only("pk", "title", "content"))
        blobs = vectors.embed(embedder, [vectors.text_of(r.title, r.content) for r in rows])
        for row, blob in zip(rows, blobs, strict=True):
            row.embedding, row.embedding_model = blob, model
        with transaction.atomic(using=using):
            # A row rewritten while its text was being embedded keeps what its own write
            # stored: only rows whose text is still the one embedded are updated (locked).
            now_held = dict(
                (pk, (title, content))
                for pk, title, content in Memory.objects.using(using)
                .select_for_update()
                .filter(pk__in=[r.pk for r in rows])
                .values_list("pk", "title", "content")
            )
            same = [r for r in rows if now_held.get(r.pk) == (r.title, r.content)]
            Memory.objects.using(using).bulk_update(same, ["embedding", "embedding_model"])
        done += len(same)
        if progress is not None:
            progress(done, len(ids))
    return done
