"""The names of the recall rankings, apart from their formulas.

:mod:`memoryapp.conf` checks ``MEMORYAPP_RECALL_RANKING`` against them without importing
numpy or any ranking (``hybrid`` and ``semantic`` re-use these names).
"""

from __future__ import annotations

__all__ = ["RANKINGS", "check_ranking"]

#: The rankings recall knows: the exact formula of Agentao, hybrid, and hybrid fused
#: with embedding similarity (memoryapp.recall.core.semantic; served with the ``semantic`` extra).
RANKINGS = ("agentao", "hybrid", "semantic")


def check_ranking(ranking: object) -> str:
    """``ranking`` when it names a known ranking.

    Raises:
        ValueError: anything else (the API answers 400).
    """
    if ranking not in RANKINGS:
        raise ValueError(f"unknown recall ranking {ranking!r}: expected one of {RANKINGS}")
    return str(ranking)
