"""Sub-agent managers (docs/behaviour.md §7): writes through the parent, reads that see nothing."""

from __future__ import annotations

from ..models import Memory
from .core import MemoryManager
from .types import RecallCandidate


class ChildManager(MemoryManager):
    """A sub-agent's manager (docs/behaviour.md §7): the parent's ``save_memory``, empty reads."""

    _route = None

    @property
    def save_memory(self):
        """The parent's ``save_memory``; absent (AttributeError) when it could not be routed."""
        if self._route is None:
            raise AttributeError("this sub-agent manager has no save_memory: no parent route")
        return self._route

    def get_all_entries(self, scope: str | None = None) -> list[Memory]:
        """A sub-agent sees no memories."""
        return []

    def search(self, query: str, scope: str | None = None) -> list[Memory]:
        """A sub-agent sees no memories."""
        return []

    def filter_by_tag(self, tag: str, scope: str | None = None) -> list[Memory]:
        """A sub-agent sees no memories."""
        return []

    def get_cross_session_tail(self) -> str:
        """A sub-agent sees no summaries."""
        return ""

    def get_stable_entries(self, recent_project_limit: int = 3) -> list[Memory]:
        """A sub-agent's stable block is empty."""
        return []

    def _stable_querysets(self, **_options) -> list:
        return []

    def _shared_stable_block(self, tail: str) -> tuple[str, list[str]]:
        return "", []  # never the parent's block from the shared cache

    def recall(self, query, messages=None, top_k=5, exclude_ids=None) -> list[RecallCandidate]:
        """A sub-agent recalls nothing."""
        return []
