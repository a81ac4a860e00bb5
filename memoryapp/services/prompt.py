"""Recall and the stable block's selection over store slices (docs/behaviour.md §5).

The one implementation behind :meth:`MemoryManager.recall`,
``Memory.objects.in_namespace(ns).recall(...)`` and the stable block every
manager of the same slices shares. Database errors propagate: the facade turns
them into store problems. The rules over plain values are :mod:`memoryapp.recall.core.index`
and :mod:`memoryapp.rules.render`.
"""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, connections
from django.db.models import Q, Value
from django.db.models.functions import Least, Length

from memoryapp.conf import embedder as embedder_of_conf
from memoryapp.conf import recall_ranking, recall_snapshots
from memoryapp.db import compiled, replicas, vendor
from memoryapp.db import snapshots as stored_snapshots
from memoryapp.db.meta import read_slice_counters
from memoryapp.db.read_your_writes import lag_tolerant
from memoryapp.models import Memory, Scope, json_list
from memoryapp.recall.cache import INDEXES, NOT_READ
from memoryapp.recall.core import hybrid, semantic
from memoryapp.recall.core.scoring import Scored, rank_key
from memoryapp.recall.core.tokens import path_hints, query_tokens
from memoryapp.recall.rows import column_timestamp
from memoryapp.rules import render
from memoryapp.rules.tool_results import RecallCandidate
from memoryapp.services.slices import StoreSlice

logger = logging.getLogger(__name__)

EXCERPT_CHARS = 200  # of a recall candidate's content (docs/behaviour.md §5)
CONTEXT_TOP_K = 5  # memories in the context block: recall's default top_k (docs/behaviour.md §5)
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


SliceVersion = tuple[str, str, str, int]  # (alias, namespace, scope, change counter)


# ------------------------------------------------------------------ recall
def recall(
    *,
    stores: list[StoreSlice],
    query,
    messages=None,
    top_k: int = 5,
    exclude_ids=None,
    counters: TurnCounters | None = None,
    ranking: str | None = None,
) -> list[RecallCandidate]:
    """The ``top_k`` live memories of ``stores`` scored against ``query``, highest first.

    Each slice is ranked on its process-wide index (:data:`memoryapp.recall.cache.INDEXES`),
    kept fresh by the slice's change counter; only the shown columns of the hits are read.
    ``counters`` reads those counters (a turn passes its own, so that its stable block
    and its recall share one read; by default a fresh :class:`TurnCounters`).
    ``ranking`` is ``agentao``, ``hybrid`` or ``semantic`` (None: ``MEMORYAPP_RECALL_RANKING``).

    Raises:
        ValueError: ``ranking`` names no ranking.
    """
    ranking = recall_ranking(ranking)
    scored = scoring_input(query, messages, top_k)
    if scored is None:
        return []
    if counters is None:
        counters = TurnCounters()
    try:
        return _recall(stores, scored, top_k, exclude_ids, counters, ranking, query)
    except DatabaseError:
        failed = counters.replicas_used()
        if not failed:
            raise
        # A replica went away since it was measured: never an error for that, the
        # primary serves (the replica is skipped until measured again).
        for alias in failed:
            replicas.mark_down(alias, "a read failed")
        return _recall(stores, scored, top_k, exclude_ids, TurnCounters(), ranking, query)


def _recall(stores, scored, top_k, exclude_ids, counters, ranking, text) -> list[RecallCandidate]:
    qtokens, hints = scored
    qvector = _query_vector(text) if ranking == "semantic" else None
    exclude = frozenset(exclude_ids or ())
    now = time.time()
    versions = {
        (alias, namespace, scope): value for alias, namespace, scope, value in counters(stores)
    }
    hits: list[tuple[Scored, StoreSlice]] = []
    for s in stores:
        key = (s.using, s.namespace, s.scope)
        source = counters.source(s.using)
        index = INDEXES.get(*key, versions[key], counters.snapshot(*key), source)
        if ranking == "hybrid":
            found = hybrid.query(index, qtokens, hints, top_k, exclude, now)
        elif ranking == "semantic":
            found = semantic.query(index, qtokens, hints, qvector, top_k, exclude, now)
        else:
            found = index.query_tokenized(qtokens, hints, top_k, exclude, now)
        hits.extend((hit, s) for hit in found)
    hits.sort(key=lambda pair: rank_key(pair[0]))
    hits = hits[:top_k]
    rows = _hit_rows(hits, counters)
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


def _query_vector(text):
    """The query's unit embedding for the semantic ranking (None for a blank query).

    An embedder that fails now (a model server down) leaves None: the recall ranks
    by lexical evidence alone and the failure is logged, as a write stores its row
    without a vector (memoryapp.recall.core.vectors.embed_or_none).
    """
    embedder = embedder_of_conf()
    if embedder is None or not str(text or "").strip():
        return None
    try:
        return embedder.embed([str(text)])[0]
    except Exception:
        logger.warning(
            "memoryapp: the embedder failed on a query; ranked by its words", exc_info=True
        )
        return None


def _hit_rows(hits, counters: TurnCounters) -> dict[str, tuple[str, str, str, str]]:
    """The shown columns of the hits, read where the turn read each alias."""
    rows: dict[str, tuple[str, str, str, str]] = {}
    for alias, namespace in {(s.using, s.namespace) for _, s in hits}:
        ids = [h.id for h, s in hits if (s.using, s.namespace) == (alias, namespace)]
        source = counters.source(alias)
        if source is not None:
            rows.update(_shown_columns(source.alias, namespace, ids))
            # The held index may be newer than the replica: its newest hits from the primary.
            ids = [i for i in ids if i not in rows]
        if ids:
            rows.update(_shown_columns(alias, namespace, ids))
    return rows


def scoring_input(query, messages, top_k):
    """``(query tokens, path hints)`` when :func:`recall` with these arguments scores at
    all; None when it returns ``[]`` before reading anything (no ``top_k``, nothing to
    match)."""
    if not isinstance(top_k, int) or top_k <= 0:
        return None
    qtokens, hints = query_tokens(query), path_hints(messages)
    if not qtokens and not hints:
        return None
    return qtokens, hints


def slice_versions(stores: list[StoreSlice]) -> list[SliceVersion]:
    """``(alias, namespace, scope, change counter)`` of each store, one query per alias."""
    return TurnCounters(prefetch=False)(stores)


class TurnCounters:
    """The slice counters of one turn, read once: its stable block and its recall share them.

    A call with the same stores returns the first read. That read is one moment of the
    slices, as if both parts ran at once: a write landing between them is seen by the
    next turn, as a write landing just after a single read would be. A failed read
    raises and is not kept, so the next part reads (and reports its failure) on its own.

    A slice whose index this process does not hold gets its stored snapshot in the
    same statement (:func:`memoryapp.db.snapshots.read_with_counters`), which its
    recall then loads: on a cold tenant, one round trip instead of two.

    With read replicas, each alias's counters are read where its recall reads
    (:func:`memoryapp.db.replicas.read_source`, chosen once per turn and alias): a
    replica current enough for the caller, else the primary.
    """

    def __init__(self, *, prefetch: bool = True) -> None:
        """``prefetch``: read cold slices' snapshots with the counters (False when the
        turn will not score: its recall would throw them away)."""
        self._prefetch = prefetch
        self._read: dict[tuple[StoreSlice, ...], list[SliceVersion]] = {}
        self._snapshots: dict[tuple[str, str, str], stored_snapshots.StoredSnapshot | None] = {}
        self._sources: dict[str, replicas.ReplicaStatus | None] = {}

    def source(self, alias: str) -> replicas.ReplicaStatus | None:
        """The replica this turn reads ``alias``'s slices from (None: the alias itself)."""
        if alias not in self._sources:
            with lag_tolerant():
                self._sources[alias] = replicas.read_source(alias)
        return self._sources[alias]

    def __call__(self, stores: list[StoreSlice]) -> list[SliceVersion]:
        key = tuple(stores)
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = self._versions(stores)
        return found

    def _versions(self, stores: list[StoreSlice]) -> list[SliceVersion]:
        versions = []
        for alias in dict.fromkeys(s.using for s in stores):
            slices = [(s.namespace, s.scope) for s in stores if s.using == alias]
            cold = [k for k in slices if not INDEXES.holds(alias, *k)] if self._prefetch else []
            source = self.source(alias)
            read = source.alias if source is not None else alias
            try:
                counters, stored = self._read_counters(read, slices, cold)
            except DatabaseError:
                if source is None:
                    raise
                # The replica went away since it was measured: the primary serves.
                replicas.mark_down(source.alias, "a read failed")
                self._sources[alias] = None
                counters, stored = self._read_counters(alias, slices, cold)
            self._snapshots.update({(alias, *k): v for k, v in stored.items()})
            versions += [(alias, ns, scope, value) for (ns, scope), value in counters.items()]
        return versions

    def replicas_used(self) -> list[str]:
        """The replica aliases this turn has read from."""
        return [s.alias for s in self._sources.values() if s is not None]

    @staticmethod
    def _read_counters(alias: str, slices, cold):
        if cold and recall_snapshots() and not stored_snapshots.in_memory(alias):
            return stored_snapshots.read_with_counters(alias, slices, cold)
        return read_slice_counters(alias, slices), {}

    def snapshot(self, using: str, namespace: str, scope: str):
        """The slice's stored snapshot read with its counter (None: none stored), handed
        over once; :data:`memoryapp.recall.cache.NOT_READ` when it was not read."""
        return self._snapshots.pop((using, namespace, scope), NOT_READ)


def context_block(hits: list[RecallCandidate]) -> str:
    """The ``<memory-context>`` block of these recall hits."""
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


# ------------------------------------------------------------ stable block
def _stable_querysets(
    stores: list[StoreSlice],
    *,
    by_type: bool = False,
    recent_limit: int = render.RECENT_PROJECT_LIMIT,
) -> list:
    """The live rows the stable selection may pick from, as querysets to merge.

    A superset read in SQL, as :mod:`memoryapp.services.search` narrows a search: every
    row :func:`memoryapp.rules.render.select_stable` can choose, and few others; the
    callers apply that rule to what is read. One queryset per database alias by
    default (one statement reads the newest facts of every slice through
    ``ix_memories_ns_created``). ``by_type``: a user store whole, a project store
    one queryset per stable type — each a range of ``ix_memories_ns_type``, so a
    filtered read never walks the slice's notes and project facts — plus its
    ``recent_limit`` most recently updated project facts and notes.
    """
    by_alias: dict[str, Q] = {}
    querysets = []
    for s in stores:
        if s.scope == Scope.USER:
            q = Q(namespace=s.namespace, scope=s.scope)
            if by_type:
                querysets.append(s.rows().live())
        else:
            live = s.rows().live()
            recent_rows = (
                live.filter(type__in=sorted(render.RECENT_PROJECT_TYPES))
                .order_by("-updated_at", "-created_at", "-id")
                .values_list("id", flat=True)[: max(int(recent_limit), 0)]
            )
            # A subquery, not a list: the read of a block is one round trip.
            q = Q(namespace=s.namespace, scope=s.scope) & (
                Q(type__in=sorted(render.STABLE_PROJECT_TYPES)) | Q(id__in=recent_rows)
            )
            if by_type:
                recent = list(recent_rows)
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


def stable_entries(
    *, stores: list[StoreSlice], recent_limit: int = render.RECENT_PROJECT_LIMIT
) -> list[Memory]:
    """The memories the stable block selects from, by ``created_at`` (docs/behaviour.md §5)."""
    querysets = _stable_querysets(stores, recent_limit=recent_limit)
    rows = {m.id: m for qs in querysets for m in qs}
    chosen = render.select_stable([fact(m) for m in rows.values()], recent_limit=recent_limit)
    return [rows[f.id] for f in chosen]


def stable_block(
    *, stores: list[StoreSlice], tail: str, counters: TurnCounters | None = None
) -> tuple[str, list[str]]:
    """The block any manager of these slices would render now, shared in the process.

    Reused while the slices' change counters and the tail are unchanged (one
    counter read, by ``counters`` as in :func:`recall`), else selected, rendered
    and kept for the next manager.
    """
    key = (tail, *(slice_versions(stores) if counters is None else counters(stores)))
    found = INDEXES.stable_blocks.get(key)
    if found is None:
        text, ids = render.render_stable_block(_admissible_facts(stores, tail), tail)
        INDEXES.stable_blocks.put(key, text, ids)
        return text, ids
    return found[0], list(found[1])


def _admissible_facts(stores: list[StoreSlice], tail: str) -> list[render.Fact]:
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
    limit, reads = FIRST_BATCH, None  # None: the default superset, as compiled statements
    while True:
        batch = _newest_facts(reads, limit) if reads else _newest_stable_facts(stores, limit)
        facts = render.select_stable({f.id: f for f in (*facts, *batch)}.values())
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
                for qs in _stable_querysets(stores, by_type=True)
            ]
        limit *= 4


def fact(m: Memory) -> render.Fact:
    """A memory as the stable block shows it."""
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


def _row_fact(row) -> render.Fact:
    """A row of :data:`_FACT_COLUMNS` as the stable block sees it (timestamps as read by
    the ORM or raw: :func:`~memoryapp.recall.rows.column_timestamp` takes both)."""
    scope, type_, confidence, key, title, content, tags_json, created, updated, memory_id = row
    return render.Fact(
        scope=scope,
        type=type_,
        confidence=confidence,
        key=key,
        title=title,
        content=content[: render.VALUE_CHARS],  # all the block shows
        tags=tuple(json_list(tags_json)),
        created_at=column_timestamp(created),
        updated_at=column_timestamp(updated),
        id=memory_id,
    )


def _newest(facts: list[render.Fact], limit: int) -> list[render.Fact]:
    facts.sort(key=lambda f: (f.created_at, f.id), reverse=True)
    return facts[:limit]


def _newest_facts(querysets: list, limit: int) -> list[render.Fact]:
    """The newest ``limit`` rows (by ``created_at``, then id) across ``querysets``, as facts."""
    return _newest(
        [
            _row_fact(row)
            for qs in querysets
            for row in qs.order_by("-created_at", "-id").values_list(*_FACT_COLUMNS)[:limit]
        ],
        limit,
    )


def _newest_stable_facts(stores: list[StoreSlice], limit: int) -> list[render.Fact]:
    """:func:`_newest_facts` of the default superset read (:func:`_stable_querysets`),
    each alias's statement compiled once per shape (:mod:`memoryapp.db.compiled`).

    Every cold tenant's stable block starts here; building the queryset anew cost
    ~10× the query.
    """
    facts: list[render.Fact] = []
    for alias in dict.fromkeys(s.using for s in stores):
        mine = [s for s in stores if s.using == alias]

        def build(namespaces, mine=mine):
            slices = [
                StoreSlice(s.label, s.using, ns, s.scope)
                for s, ns in zip(mine, namespaces, strict=True)
            ]
            (qs,) = _stable_querysets(slices)
            return qs.order_by("-created_at", "-id").values_list(*_FACT_COLUMNS)[:limit]

        shape = ("stable-newest", alias, tuple(s.scope for s in mine), limit)
        facts += map(_row_fact, compiled.run(shape, build, [s.namespace for s in mine]))
    return _newest(facts, limit)


def _budget_left(facts: list[render.Fact], tail: str) -> int:
    """What the stable block's budget leaves after admitting from ``facts``."""
    text, _ = render.render_stable_block(facts, tail)
    return render.STABLE_BLOCK_MAX_CHARS - (len(text) + 1 if text else 0)
