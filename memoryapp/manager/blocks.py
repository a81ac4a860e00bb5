"""Recall and the two prompt blocks of the facade (docs/behaviour.md §5)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from django.db import DatabaseError, connections
from django.db.models import Q, Value
from django.db.models.functions import Least, Length

from .. import metrics, render
from ..db import vendor
from ..db.meta import read_slice_counters
from ..indexes import INDEXES
from ..models import Memory, Scope, json_list
from ..recall import Scored, path_hints, query_tokens, rank_key
from .types import RecallCandidate, StoreSlice

logger = logging.getLogger("memoryapp.manager")

_T = TypeVar("_T")

EXCERPT_CHARS = 200  # of a recall candidate's content (docs/behaviour.md §5)
FIRST_BATCH = 32  # newest stable facts read before the budget is known
_FACT_COLUMNS = (
    "scope",
    "type",
    "confidence",
    "key_normalized",
    "title",
    "content",
    "tags_json",
    "created_at",
    "updated_at",
    "id",
)


class PromptBlocks:
    """Mixin of :class:`~memoryapp.manager.MemoryManager`: recall, stable and context blocks."""

    if TYPE_CHECKING:  # what it uses of MemoryManager (core.py), for the type checker only
        write_version: int
        recall_count: int
        recall_error_count: int
        last_recall_error: str | None
        _problems: dict[str, str]
        _stable_cache: tuple[int, str, list[str]] | None
        _read_failures: int

        def _stores(self, scope: str | None = None) -> list[StoreSlice]: ...
        def _guarded_read(
            self, stores: list[StoreSlice], read: Callable[[], _T], empty: _T
        ) -> _T: ...
        def _record_problem(self, s: StoreSlice, exc: Exception) -> None: ...
        def get_cross_session_tail(self) -> str: ...

    # ----------------------------------------------------------- prompt blocks
    def _stable_querysets(
        self, *, by_type: bool = False, recent_limit: int = render.RECENT_PROJECT_LIMIT
    ) -> list:
        """The live rows of the stable selection (docs/behaviour.md §5), as querysets to merge.

        One queryset per database alias by default (one statement reads the newest
        facts of every slice through ``ix_memories_ns_created``). ``by_type``: a user
        store whole, a project store one queryset per stable type — each a range of
        ``ix_memories_ns_type``, so a filtered read never walks the slice's notes and
        project facts — plus its 3 most recently updated project facts and notes.
        """
        by_alias: dict[str, Q] = {}
        querysets = []
        for s in self._stores():
            if s.scope == Scope.USER:
                q = Q(namespace=s.namespace, scope=s.scope)
                if by_type:
                    querysets.append(s.rows().live())
            else:
                live = s.rows().live()
                recent = list(
                    live.filter(type__in=sorted(render.RECENT_PROJECT_TYPES))
                    .order_by("-updated_at", "-created_at", "-id")
                    .values_list("id", flat=True)[: max(int(recent_limit), 0)]
                )
                q = Q(namespace=s.namespace, scope=s.scope) & (
                    Q(type__in=sorted(render.STABLE_PROJECT_TYPES)) | Q(id__in=recent)
                )
                if by_type:
                    types = sorted(render.STABLE_PROJECT_TYPES)
                    querysets += [live.filter(type=type_) for type_ in types]
                    if recent:
                        # By primary key alone: with the slice's columns in the filter
                        # too, SQLite walks ix_memories_ns_created for the ORDER BY.
                        rows = Memory.objects.using(s.using).live()
                        querysets.append(rows.filter(id__in=recent))
            by_alias[s.using] = by_alias[s.using] | q if s.using in by_alias else q
        if by_type:
            return querysets
        return [Memory.objects.using(alias).live().filter(q) for alias, q in by_alias.items()]

    def get_stable_entries(
        self, recent_project_limit: int = render.RECENT_PROJECT_LIMIT
    ) -> list[Memory]:
        """The memories the stable block selects from, by ``created_at`` (docs/behaviour.md §5).

        ``recent_project_limit``: how many of the most recently updated project facts
        and notes join (Agentao's argument, 3 by default).
        """

        def read():
            querysets = self._stable_querysets(recent_limit=recent_project_limit)
            rows = {m.id: m for qs in querysets for m in qs}
            return sorted(rows.values(), key=lambda m: (m.created_at, m.id))

        return self._guarded_read(self._stores(), read, [])

    def _admissible_facts(self, tail: str) -> list[render.Fact]:
        """The part of the stable selection that can decide the block, read newest first.

        Facts are admitted newest first and what remains of the budget only falls, so
        once less than the cheapest possible fact remains, no older fact matters. Reads
        grow ×4 from :data:`FIRST_BATCH` rows. From the third read on, they are filtered
        in SQL by a lower bound of each fact's cost — the cheapest fact's fixed text plus
        its key, title and first 240 content characters (escaping only lengthens) — against
        the budget left after the previous read, so a namespace whose newest facts leave a
        small remainder that few older facts fit is not read row by row to the end.
        """
        facts: list[render.Fact] = []
        limit, reads = FIRST_BATCH, self._stable_querysets()
        while True:
            batch = _newest_facts(reads, limit)
            facts = list({f.id: f for f in (*facts, *batch)}.values())
            left = _budget_left(facts, tail)
            if len(batch) < limit or left < render.min_fact_cost():
                return facts
            if limit >= 4 * FIRST_BATCH:
                # Rows passing the bound are a superset of the admissible older ones.
                bound = left - (render.min_fact_cost() - 3)  # the cheapest fact's fields are 1
                cost = (
                    Length("key_normalized")
                    + Length("title")
                    + Least(Length("content"), Value(render.VALUE_CHARS))
                )
                reads = [
                    qs.alias(_cost=cost).filter(_cost__lte=bound)
                    for qs in self._stable_querysets(by_type=True)
                ]
            limit *= 4

    def _shared_stable_block(self, tail: str) -> tuple[str, list[str]]:
        """The block any manager of these slices would render now, shared in the process.

        Reused while the slices' change counters and the tail are unchanged (one
        counter read), else selected, rendered and kept for the next manager.
        """
        key = (tail, *_slice_versions(self._stores()))
        found = INDEXES.stable_blocks.get(key)
        if found is None:
            text, ids = render.render_stable_block(self._admissible_facts(tail), tail)
            INDEXES.stable_blocks.put(key, text, ids)
            return text, ids
        return found[0], list(found[1])

    def _stable_block(self) -> tuple[str, list[str]]:
        """``(block, ids shown)``, rebuilt only when this manager has written since."""
        cached = self._stable_cache
        if cached is not None and cached[0] == self.write_version:
            return cached[1], cached[2]
        problems_before = dict(self._problems)
        tail = self.get_cross_session_tail()
        block = self._guarded_read(self._stores(), lambda: self._shared_stable_block(tail), None)
        text, ids = block if block is not None else render.render_stable_block([], tail)
        if self._problems == problems_before or not self._problems:
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
        return _context_block(hits)

    def recall_turn(
        self, query: str, messages=None, top_k: int = 5
    ) -> tuple[list[RecallCandidate], str]:
        """``recall(query, messages, top_k)`` and ``render_context_block(query, messages)``
        from one recall: what a turn needs, at the cost of one scoring pass.

        The ranking is one order (score, then id), and the context block is that
        order without the stable block's memories, so both come from the top
        ``max(top_k, 5 + shown)`` of a single recall.
        """
        try:
            shown = self._stable_block()[1]
        except Exception:
            logger.warning("recall_turn: stable block failed", exc_info=True)
            shown = []
        if not isinstance(top_k, int) or top_k <= 0:
            return [], self.render_context_block(query, messages)
        hits = self.recall(query, messages, top_k=max(top_k, CONTEXT_TOP_K + len(shown)))
        hidden = set(shown)
        context = [h for h in hits if h.memory_id not in hidden][:CONTEXT_TOP_K]
        return hits[:top_k], _context_block(context)

    # ----------------------------------------------------------------- recall
    def recall(
        self,
        query: str,
        messages=None,
        top_k: int = 5,
        exclude_ids: Iterable[str] | None = None,
    ) -> list[RecallCandidate]:
        """The ``top_k`` memories scored against ``query`` (docs/behaviour.md §5), highest first.

        Never breaks a turn: a database error records a store problem, any
        other failure logs a warning, and both return ``[]``.
        """
        started = time.perf_counter()
        try:
            hits = self._recall(query, messages, top_k, exclude_ids)
        except DatabaseError as exc:
            self._read_failures += 1
            self._recall_failed(exc)
            for s in self._stores():
                self._record_problem(s, exc)
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

    def _recall(self, query, messages, top_k, exclude_ids) -> list[RecallCandidate]:
        return recall_slices(self._stores(), query, messages, top_k, exclude_ids)


def recall_slices(
    stores: list[StoreSlice], query, messages=None, top_k: int = 5, exclude_ids=None
) -> list[RecallCandidate]:
    """The ``top_k`` live memories of ``stores`` scored against ``query`` (docs/behaviour.md §5).

    The one recall implementation: :meth:`MemoryManager.recall` runs it over the
    manager's stores, ``Memory.objects.in_namespace(ns).recall(...)`` over that
    namespace's slices. Database errors propagate (the facade turns them into
    store problems).
    """
    if not isinstance(top_k, int) or top_k <= 0:
        return []
    exclude = frozenset(exclude_ids or ())
    qtokens, hints = query_tokens(query), path_hints(messages)
    if not qtokens and not hints:
        return []
    now = time.time()
    counters = {
        (alias, namespace, scope): value
        for alias, namespace, scope, value in _slice_versions(stores)
    }
    hits: list[tuple[Scored, StoreSlice]] = []
    for s in stores:
        index = INDEXES.get(s.using, s.namespace, s.scope, counters[s.using, s.namespace, s.scope])
        found = index.query_tokenized(qtokens, hints, top_k, exclude, now)
        hits.extend((hit, s) for hit in found)
    hits.sort(key=lambda pair: rank_key(pair[0]))
    hits = hits[:top_k]
    rows: dict[str, tuple[str, str, str, str]] = {}
    for alias, namespace in {(s.using, s.namespace) for _, s in hits}:
        ids = [h.id for h, s in hits if (s.using, s.namespace) == (alias, namespace)]
        rows.update(_shown_columns(alias, namespace, ids))
    return [
        RecallCandidate(
            memory_id=h.id,
            scope=rows[h.id][0],
            type=rows[h.id][1],
            title=rows[h.id][2],
            excerpt=rows[h.id][3][:EXCERPT_CHARS],
            score=h.score,
            reasons=list(h.reasons),
        )
        for h, _ in hits
        if h.id in rows
    ]


def _slice_versions(stores: list[StoreSlice]) -> list[tuple[str, str, str, int]]:
    """``(alias, namespace, scope, change counter)`` of each store, one query per alias."""
    versions = []
    for alias in dict.fromkeys(s.using for s in stores):
        slices = [(s.namespace, s.scope) for s in stores if s.using == alias]
        for (namespace, scope), value in read_slice_counters(alias, slices).items():
            versions.append((alias, namespace, scope, value))
    return versions


CONTEXT_TOP_K = 5  # memories in the context block: recall's default top_k (docs/behaviour.md §5)


def _context_block(hits: list[RecallCandidate]) -> str:
    items = [
        render.ContextItem(h.scope, h.type, h.title, h.excerpt, h.score, tuple(h.reasons))
        for h in hits
    ]
    return render.render_context_block(items)


def _shown_columns(
    using: str, namespace: str, ids: list[str]
) -> dict[str, tuple[str, str, str, str]]:
    """id → (scope, type, title, content) of the live rows among ``ids`` (of ``namespace``).

    One plain statement: on the recall hot path the ORM's queryset and model
    building cost several times the query itself (~1.2 ms against ~0.1 ms for
    five rows on SQLite at 100,000 memories). The ids are looked up by primary
    key, the namespace checked beside them (:attr:`Vendor.namespace_beside_ids`).
    """
    marks = ", ".join(["%s"] * len(ids))
    beside = vendor.for_connection(connections[using]).namespace_beside_ids
    sql = (
        "SELECT id, scope, type, title, content FROM memories"
        f" WHERE id IN ({marks}) AND deleted_at IS NULL AND {beside}"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [*ids, namespace])
        return {row[0]: row[1:] for row in cursor.fetchall()}


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


def _newest_facts(querysets: list, limit: int) -> list[render.Fact]:
    """The newest ``limit`` rows (by ``created_at``, then id) across ``querysets``, as facts."""
    facts = [
        render.Fact(
            scope=scope,
            type=type_,
            confidence=confidence,
            key=key,
            title=title,
            content=content[: render.VALUE_CHARS],  # all the block shows
            tags=tuple(json_list(tags_json)),
            created_at=created_at.timestamp(),
            updated_at=updated_at.timestamp(),
            id=memory_id,
        )
        for qs in querysets
        for (
            scope,
            type_,
            confidence,
            key,
            title,
            content,
            tags_json,
            created_at,
            updated_at,
            memory_id,
        ) in qs.order_by("-created_at", "-id").values_list(*_FACT_COLUMNS)[:limit]
    ]
    facts.sort(key=lambda f: (f.created_at, f.id), reverse=True)
    return facts[:limit]


def _budget_left(facts: list[render.Fact], tail: str) -> int:
    """What the stable block's budget leaves after admitting from ``facts``."""
    text, _ = render.render_stable_block(facts, tail)
    return render.STABLE_BLOCK_MAX_CHARS - (len(text) + 1 if text else 0)
