"""The seed's reset of one binding (docs/behaviour.md §3): what it would clear, and clearing it.

Not erasure: soft-deleted memories keep their content (docs/behaviour.md §9).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryapp.models import Memory
from memoryapp.rules import validation
from memoryapp.services import memories, summaries
from memoryapp.services.slices import Binding

logger = logging.getLogger("memoryapp.facade")


@dataclass(frozen=True)
class WipeResult:
    """What :meth:`MemoryManager.wipe_all` did (docs/behaviour.md §3).

    Failures show here, never as exceptions.
    """

    memories_cleared: int
    summaries_cleared: int
    not_cleared: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when every part was cleared."""
        return not self.not_cleared

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (the API's response body)."""
        return {
            "memories_cleared": self.memories_cleared,
            "summaries_cleared": self.summaries_cleared,
            "not_cleared": list(self.not_cleared),
            "ok": self.ok,
        }


@dataclass(frozen=True)
class WipePreview:
    """What :func:`wipe` would clear now: live memories of both stores, the project's summaries."""

    memories: int
    summaries: int


@validation.checked_arguments
def clear_memories(*, binding: Binding, scope: str | None = None, actor: str = "") -> int:
    """Soft-delete every live memory of ``scope`` (None = both) in ``binding``; the count."""
    return sum(len(memories.clear(store_slice=s, actor=actor)) for s in binding.stores(scope))


def preview(*, binding: Binding) -> WipePreview:
    """The counts a wipe of ``binding`` would clear, for a confirmation page."""
    count = 0
    for s in binding.stores():
        count += (
            Memory.objects.using(s.using)
            .live()
            .filter(namespace=s.namespace, scope=s.scope)
            .count()
        )
    return WipePreview(memories=count, summaries=summaries.summaries(binding).count())


def run(
    *,
    clear_memories: Callable[[], int],
    delete_summaries: Callable[[], int],
    summaries_left: Callable[[], bool],
) -> WipeResult:
    """Run a wipe's parts, each whatever the others did; never raises.

    The parts are given by the caller (the facade passes its own ``clear``, so a
    host's override is honoured). A part that failed, or summaries that a
    read-back still finds, are named in ``not_cleared``.
    """
    not_cleared: list[str] = []
    count = 0
    try:
        count = clear_memories()
    except Exception:
        logger.warning("wipe_all: clearing memories failed", exc_info=True)
        not_cleared.append("memories")
    deleted = 0
    try:
        deleted = delete_summaries()
    except Exception:
        logger.warning("wipe_all: deleting session summaries failed", exc_info=True)
    try:
        # Read back: a delete that "succeeded" but left rows is still a failure.
        if summaries_left():
            not_cleared.append("session summaries")
    except Exception:
        logger.warning("wipe_all: could not verify session summaries", exc_info=True)
        not_cleared.append("session summaries")
    return WipeResult(count, deleted, tuple(not_cleared))
