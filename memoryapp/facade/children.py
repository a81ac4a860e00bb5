"""Sub-agent managers (docs/behaviour.md §7): writes through the parent, reads that see nothing."""

from __future__ import annotations

from memoryapp.facade.core import MemoryManager
from memoryapp.facade.types import SEES_NOTHING


class ChildManager(MemoryManager):
    """A sub-agent's manager (docs/behaviour.md §7): the parent's ``save_memory``, empty reads.

    The facade with the :data:`~memoryapp.facade.types.SEES_NOTHING` read strategy
    (every read answers empty, and the stable block is never the parent's from the
    shared cache) and ``save_memory`` routed to the parent.
    """

    sees = SEES_NOTHING
    _route = None

    @property
    def save_memory(self):
        """The parent's ``save_memory``; absent (AttributeError) when it could not be routed."""
        if self._route is None:
            raise AttributeError("this sub-agent manager has no save_memory: no parent route")
        return self._route
