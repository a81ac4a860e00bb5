"""Recall and the two prompt blocks of the facade (docs/behaviour.md §5).

The selection, the shared block and recall itself are :mod:`memoryapp.services.prompt`;
this mixin adds what belongs to one manager: its stores, its write counter
(the block is rebuilt only after it wrote), its store problems and recall counters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import DatabaseError

from memoryapp import metrics
from memoryapp.conf import recall_ranking
from memoryapp.models import Memory
from memoryapp.rules import render
from memoryapp.rules.tool_results import RecallCandidate
from memoryapp.services import prompt
from memoryapp.services.prompt import CONTEXT_TOP_K, EXCERPT_CHARS

if TYPE_CHECKING:
    from memoryapp.facade.problems import StoreProblems
    from memoryapp.facade.types import Reads
    from memoryapp.services.slices import StoreSlice

logger = logging.getLogger("memoryapp.facade")

__all__ = ["CONTEXT_TOP_K", "EXCERPT_CHARS", "PromptBlocks"]


class PromptBlocks:
    """Mixin of :class:`~memoryapp.facade.MemoryManager`: recall, stable and context blocks."""

    if TYPE_CHECKING:  # what it uses of MemoryManager (core.py), for the type checker only
        sees: Reads
        problems: StoreProblems
        write_version: int
        recall_count: int
        recall_error_count: int
        last_recall_error: str | None
        _stable_cache: tuple[int, str, list[str]] | None

        def _stores(self, scope: str | None = None) -> list[StoreSlice]: ...
        def get_cross_session_tail(self) -> str: ...

    # ----------------------------------------------------------- prompt blocks
    def get_stable_entries(
        self, recent_project_limit: int = render.RECENT_PROJECT_LIMIT
    ) -> list[Memory]:
        """The memories the stable block selects from, by ``created_at`` (docs/behaviour.md §5).

        ``recent_project_limit``: how many of the most recently updated project facts
        and notes join (Agentao's argument, 3 by default).
        """
        if not self.sees.memories:
            return []
        stores = self._stores()
        return self.problems.read(
            stores,
            lambda: prompt.stable_entries(stores=stores, recent_limit=recent_project_limit),
            [],
        )

    def _stable_block(self, counters: prompt.TurnCounters | None = None) -> tuple[str, list[str]]:
        """``(block, ids shown)``, rebuilt only when this manager has written since.

        ``counters``: how the slice counters are read (a turn's shared read).
        """
        cached = self._stable_cache
        if cached is not None and cached[0] == self.write_version:
            return cached[1], cached[2]
        problems_before = dict(self.problems.messages)
        tail = self.get_cross_session_tail()
        block = None
        if self.sees.memories:  # never another manager's block from the shared cache
            stores = self._stores()
            block = self.problems.read(
                stores,
                lambda: prompt.stable_block(stores=stores, tail=tail, counters=counters),
                None,
            )
        text, ids = block if block is not None else render.render_stable_block([], tail)
        if self.problems.messages == problems_before or not self.problems.messages:
            # A block built while a store was unreadable is not kept: it would
            # hide that store's facts until the next write.
            self._stable_cache = (self.write_version, text, ids)
        return text, ids

    def render_stable_block(self) -> str:
        """The ``<memory-stable>`` block (docs/behaviour.md §5).

        Byte-identical until this manager writes.
        """
        try:
            return self._stable_block()[0]
        except Exception:
            logger.warning("render_stable_block failed", exc_info=True)
            return ""

    def render_context_block(self, query: str, messages=None) -> str:
        """The ``<memory-context>`` block: this turn's recall minus what the stable block shows."""
        try:
            shown = self._stable_block()[1]
        except Exception:
            logger.warning("render_context_block: stable block failed", exc_info=True)
            shown = []
        hits = self.recall(query, messages, top_k=CONTEXT_TOP_K, exclude_ids=shown)
        return prompt.context_block(hits)

    def recall_turn(
        self, query: str, messages=None, top_k: int = 5, ranking: str | None = None
    ) -> tuple[list[RecallCandidate], str]:
        """``recall(query, messages, top_k)`` and ``render_context_block(query, messages)``
        from one recall: what a turn needs, at the cost of one scoring pass.

        The ranking is one order (score, then id), and the context block is that
        order without the stable block's memories, so both come from the top
        ``max(top_k, 5 + shown)`` of a single recall. Both read the slice counters
        once (:class:`~memoryapp.services.prompt.TurnCounters`): one round trip less
        per API recall. ``ranking`` as for :meth:`recall`.

        Raises:
            ValueError: ``ranking`` names no ranking.
        """
        ranking = recall_ranking(ranking)
        # A turn that will not score (no query tokens, no path hints, no top_k) reads
        # the counters for its stable block only, not the snapshots.
        counters = prompt.TurnCounters(
            prefetch=prompt.scoring_input(query, messages, top_k) is not None
        )
        try:
            shown = self._stable_block(counters)[1]
        except Exception:
            logger.warning("recall_turn: stable block failed", exc_info=True)
            shown = []
        if not isinstance(top_k, int) or top_k <= 0:
            return [], self.render_context_block(query, messages)
        hits = self._observed_recall(
            query, messages, max(top_k, CONTEXT_TOP_K + len(shown)), None, counters, ranking
        )
        hidden = set(shown)
        context = [h for h in hits if h.memory_id not in hidden][:CONTEXT_TOP_K]
        return hits[:top_k], prompt.context_block(context)

    # ----------------------------------------------------------------- recall
    def recall(
        self,
        query: str,
        messages=None,
        top_k: int = 5,
        exclude_ids: Iterable[str] | None = None,
        ranking: str | None = None,
    ) -> list[RecallCandidate]:
        """The ``top_k`` memories scored against ``query`` (docs/behaviour.md §5), highest first.

        ``ranking``: ``agentao`` (Agentao's exact formula), ``hybrid``
        (:mod:`memoryapp.recall.core.hybrid`) or ``semantic``
        (:mod:`memoryapp.recall.core.semantic`,
        with an embedder); None uses ``MEMORYAPP_RECALL_RANKING``.
        Never breaks a turn: a database error records a store problem, any
        other failure logs a warning, and both return ``[]``.

        Raises:
            ValueError: ``ranking`` names no ranking (a caller's mistake, not a store's).
        """
        ranking = recall_ranking(ranking)
        return self._observed_recall(query, messages, top_k, exclude_ids, None, ranking)

    def _observed_recall(
        self,
        query,
        messages,
        top_k,
        exclude_ids,
        counters: prompt.TurnCounters | None,
        ranking: str = "agentao",
    ) -> list[RecallCandidate]:
        """:meth:`recall`, its counters read by ``counters`` (None: its own read)."""
        if not self.sees.memories:
            return []
        started = time.perf_counter()
        try:
            hits = self._recall(query, messages, top_k, exclude_ids, counters, ranking)
        except DatabaseError as exc:
            self._recall_failed(exc)
            self.problems.failed(self._stores(), exc)
        except Exception as exc:
            self._recall_failed(exc)
            logger.warning("recall failed", exc_info=True)
        else:
            self.recall_count += len(hits)
            metrics.observe_recall(time.perf_counter() - started, ok=True)
            return hits
        metrics.observe_recall(time.perf_counter() - started, ok=False)
        return []

    def _recall_failed(self, exc: Exception) -> None:
        self.recall_error_count += 1
        self.last_recall_error = type(exc).__name__  # the class only: messages may hold text

    def _recall(
        self, query, messages, top_k, exclude_ids, counters, ranking
    ) -> list[RecallCandidate]:
        return prompt.recall(
            stores=self._stores(),
            query=query,
            messages=messages,
            top_k=top_k,
            exclude_ids=exclude_ids,
            counters=counters,
            ranking=ranking,
        )
