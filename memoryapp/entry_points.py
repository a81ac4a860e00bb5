"""What ``Memory.objects.upsert`` and ``.recall`` run: the store's write and the facade's recall.

The querysets sit below the store and the facade (both import the models), so
they cannot import this code; :meth:`MemoryAppConfig.ready` installs it into
:mod:`memoryapp.querysets` instead (see :func:`memoryapp.querysets.install`).
"""

from __future__ import annotations

from collections.abc import Iterable

from . import querysets, store
from .conf import get_guard
from .manager.blocks import recall_slices
from .manager.types import RecallCandidate, StoreSlice
from .models import Memory


def upsert(
    using: str,
    key: str,
    value: str,
    tags: Iterable[str] | None,
    scope: str | None,
    type: str | None,
    source: str,
    *,
    namespace: str,
    subject: str | None,
    guard,
    actor: str,
) -> Memory:
    """Validate, classify and write one memory (docs/behaviour.md §2); return it.

    Raises:
        MemoryValidationError: invalid input.
        SensitiveMemoryError: the content looks like a credential.
    """
    prepared = store.prepare(guard or get_guard(), key, value, tags, scope, type, source)
    result = store.write(prepared, using=using, namespace=namespace, subject=subject, actor=actor)
    return result.memory


def recall(
    using: str, namespace: str, scopes: Iterable[str], query: str, messages, top_k, exclude_ids
) -> list[RecallCandidate]:
    """The ``top_k`` memories of ``namespace``'s ``scopes`` for ``query`` (docs/behaviour.md §5).

    The facade's own implementation (:func:`~memoryapp.manager.blocks.recall_slices`),
    on the same per-slice indexes.
    """
    stores = [StoreSlice(f"{s} store", using, namespace, s) for s in scopes]
    return recall_slices(stores, query, messages, top_k, exclude_ids)


def install() -> None:
    """Give ``Memory.objects`` these implementations (called once, by ``AppConfig.ready``)."""
    querysets.install(upsert=upsert, recall=recall)
