"""Value types of the facade: the wipe result, recall candidates, store slices, read strategies.

The first three are the services' (:mod:`memoryapp.services`); they are named here
too because hosts import them from the facade.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryapp.rules.tool_results import RecallCandidate
from memoryapp.services.slices import StoreSlice
from memoryapp.services.wipe import WipeResult


@dataclass(frozen=True)
class Reads:
    """What a manager's reads see (a strategy): its memories, its session summaries.

    A sub-agent's manager sees neither (docs/behaviour.md §7): its reads answer
    empty without a query, whatever its stores hold.
    """

    memories: bool = True
    summaries: bool = True


SEES_ALL = Reads()
SEES_NOTHING = Reads(memories=False, summaries=False)

__all__ = ["SEES_ALL", "SEES_NOTHING", "Reads", "RecallCandidate", "StoreSlice", "WipeResult"]
