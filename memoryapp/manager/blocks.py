"""Recall and the two prompt blocks of the facade (SPEC §5)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from django.db import DatabaseError
from django.db.models import Q

from .. import render
from ..db.meta import read_change_counter
from ..indexes import INDEXES
from ..models import Memory, Scope
from ..recall import Scored, path_hints, query_tokens, rank_key
from .types import RecallCandidate, StoreSlice

logger = logging.getLogger("memoryapp.manager")

EXCERPT_CHARS = 200  # of a recall candidate's content (SPEC §5)


class PromptBlocks:
    """Mixin of :class:`~memoryapp.manager.MemoryManager`: recall, stable and context blocks."""

    # ----------------------------------------------------------- prompt blocks
    def _stable_querysets(self) -> list:
        """Per database alias, the live rows of the stable selection (SPEC §5)."""
        by_alias: dict[str, Q] = {}
        for s in self._stores():
            if s.scope == Scope.USER:
                q = Q(namespace=s.namespace, scope=s.scope)
            else:
                recent = list(
                    s.rows()
                    .live()
                    .filter(type__in=render.RECENT_PROJECT_TYPES)
                    .order_by("-updated_at", "-created_at", "-id")
                    .values_list("id", flat=True)[: render.RECENT_PROJECT_LIMIT]
                )
                q = Q(namespace=s.namespace, scope=s.scope) & (
                    Q(type__in=render.STABLE_PROJECT_TYPES) | Q(id__in=recent)
                )
            by_alias[s.using] = by_alias[s.using] | q if s.using in by_alias else q
        return [Memory.objects.using(alias).live().filter(q) for alias, q in by_alias.items()]

    def get_stable_entries(self) -> list[Memory]:
        """The memories the stable block selects from, ordered by ``created_at`` (SPEC §5)."""

        def read():
            rows = [m for qs in self._stable_querysets() for m in qs.order_by("created_at", "id")]
            return sorted(rows, key=lambda m: (m.created_at, m.id))

        return self._guarded_read(self._stores(), read, [])

    def _newest_stable(self, limit: int) -> list[Memory]:
        rows = [
            m for qs in self._stable_querysets() for m in qs.order_by("-created_at", "-id")[:limit]
        ]
        rows.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        return rows[:limit]

    def _stable_block(self) -> tuple[str, list[str]]:
        """``(block, ids shown)``, rebuilt only when this manager has written since."""
        cached = self._stable_cache
        if cached is not None and cached[0] == self.write_version:
            return cached[1], cached[2]
        problems_before = dict(self._problems)
        tail = self.get_cross_session_tail()
        # Facts are admitted newest first; once what remains of the budget is
        # below the cheapest possible fact, no older one can be admitted, so
        # only a newest-first prefix of the selection is ever read.
        limit = 32
        while True:
            rows = self._guarded_read(self._stores(), lambda n=limit: self._newest_stable(n), [])
            text, ids = render.render_stable_block([_fact(m) for m in rows], tail)
            used = len(text) + 1 if text else 0
            if len(rows) < limit or render.STABLE_BLOCK_MAX_CHARS - used < render.min_fact_cost():
                break
            limit *= 4
        if self._problems == problems_before or not self._problems:
            # A block built while a store was unreadable is not kept: it would
            # hide that store's facts until the next write.
            self._stable_cache = (self.write_version, text, ids)
        return text, ids

    def render_stable_block(self) -> str:
        """The ``<memory-stable>`` block; byte-identical until this manager writes (SPEC §5)."""
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
        hits = self.recall(query, messages, top_k=5, exclude_ids=shown)
        items = [
            render.ContextItem(h.scope, h.type, h.title, h.excerpt, h.score, tuple(h.reasons))
            for h in hits
        ]
        return render.render_context_block(items)

    # ----------------------------------------------------------------- recall
    def recall(
        self,
        query: str,
        messages=None,
        top_k: int = 5,
        exclude_ids: Iterable[str] | None = None,
    ) -> list[RecallCandidate]:
        """The ``top_k`` memories scored against ``query`` (SPEC §5), highest first.

        Never breaks a turn: a database error records a store problem, any
        other failure logs a warning, and both return ``[]``.
        """
        try:
            return self._recall(query, messages, top_k, exclude_ids)
        except DatabaseError as exc:
            for s in self._stores():
                self._record_problem(s, exc)
        except Exception:
            logger.warning("recall failed", exc_info=True)
        return []

    def _recall(self, query, messages, top_k, exclude_ids) -> list[RecallCandidate]:
        if not isinstance(top_k, int) or top_k <= 0:
            return []
        exclude = frozenset(exclude_ids or ())
        qtokens, hints = query_tokens(query), path_hints(messages)
        if not qtokens and not hints:
            return []
        now = time.time()
        counters: dict[str, int] = {}
        hits: list[tuple[Scored, StoreSlice]] = []
        for s in self._stores():
            if s.using not in counters:
                counters[s.using] = read_change_counter(s.using)
            index = INDEXES.get(s.using, s.namespace, s.scope, counters[s.using])
            found = index.query_tokenized(qtokens, hints, top_k, exclude, now)
            hits.extend((hit, s) for hit in found)
        hits.sort(key=lambda pair: rank_key(pair[0]))
        hits = hits[:top_k]
        rows: dict[str, Memory] = {}
        for alias in {s.using for _, s in hits}:
            ids = [h.id for h, s in hits if s.using == alias]
            rows.update((m.id, m) for m in Memory.objects.using(alias).live().filter(id__in=ids))
        return [
            RecallCandidate(
                memory_id=h.id,
                scope=rows[h.id].scope,
                type=rows[h.id].type,
                title=rows[h.id].title,
                excerpt=rows[h.id].content[:EXCERPT_CHARS],
                score=h.score,
                reasons=list(h.reasons),
            )
            for h, _ in hits
            if h.id in rows
        ]


def _fact(m: Memory) -> render.Fact:
    return render.Fact(
        scope=m.scope,
        type=m.type,
        confidence=m.confidence,
        key=m.key_normalized,
        title=m.title,
        content=m.content,
        tags=tuple(m.tags),
        created_at=m.created_at.timestamp(),
        updated_at=m.updated_at.timestamp(),
        id=m.id,
    )
