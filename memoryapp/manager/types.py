"""Value types of the facade: the wipe result, recall candidates, and a store slice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Memory


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
class RecallCandidate:
    """A scored recall hit (docs/behaviour.md §13); ``excerpt`` is the content's first 200 chars."""

    memory_id: str
    scope: str
    type: str
    title: str
    excerpt: str
    score: float
    reasons: list[str]


@dataclass(frozen=True)
class StoreSlice:
    """One (database alias, namespace, scope) slice of the tables that a manager owns."""

    label: str
    using: str
    namespace: str
    scope: str

    def rows(self):
        return Memory.objects.using(self.using).filter(namespace=self.namespace, scope=self.scope)
