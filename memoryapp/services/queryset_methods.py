"""What ``Memory.objects.upsert`` and ``.recall`` run: the services' write and recall.

The querysets sit below the store and the facade (both import the models), so
they cannot import this code; :meth:`MemoryAppConfig.ready` installs it into
:mod:`memoryapp.querysets` instead (see :func:`memoryapp.querysets.install`).
"""

from __future__ import annotations

from collections.abc import Iterable

from memoryapp import querysets
from memoryapp.conf import get_guard
from memoryapp.models import Memory
from memoryapp.rules import validation
from memoryapp.rules.tool_results import RecallCandidate
from memoryapp.services import memories, prompt
from memoryapp.services.slices import StoreSlice
from memoryapp.writes import store


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
    # Memory.objects.upsert is an entry point of its own (no facade in front of it):
    # the same namespace rule as every other one, before any statement.
    namespace = validation.check_namespace(namespace, "namespace")
    if subject is not None:
        subject = validation.check_namespace(subject, "subject")
    prepared = store.prepare(guard or get_guard(), key, value, tags, scope, type, source)
    result = memories.write(
        prepared=prepared, using=using, namespace=namespace, subject=subject, actor=actor
    )
    return result.memory


def recall(
    using: str,
    namespace: str,
    scopes: Iterable[str],
    query: str,
    messages,
    top_k,
    exclude_ids,
    ranking: str | None = None,
) -> list[RecallCandidate]:
    """The ``top_k`` memories of ``namespace``'s ``scopes`` for ``query`` (docs/behaviour.md §5).

    The facade's own implementation (:func:`~memoryapp.services.prompt.recall`), on the
    same per-slice indexes.
    """
    stores = [StoreSlice(f"{s} store", using, namespace, s) for s in scopes]
    return prompt.recall(
        stores=stores,
        query=query,
        messages=messages,
        top_k=top_k,
        exclude_ids=exclude_ids,
        ranking=ranking,
    )


def install() -> None:
    """Give ``Memory.objects`` these implementations (called once, by ``AppConfig.ready``)."""
    querysets.install(upsert=upsert, recall=recall)
