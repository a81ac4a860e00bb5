"""The ``semantic`` recall ranking: hybrid's lexical evidence fused with embedding similarity.

Pure Python and numpy, no Django. It reads the same per-namespace
:class:`~memoryapp.recall.core.index.RecallIndex` as the other rankings: the lexical pass is
:mod:`memoryapp.recall.core.hybrid`'s own (BM25F, tags, path hints, recency, staleness),
and the index's int8 vectors (:mod:`memoryapp.recall.core.vectors`) give each memory's
cosine with the query's embedding. The fused score::

    lexical_norm = max(0, hybrid(d)) / max over the candidates of hybrid    (0 without evidence)
    score        = W_LEXICAL · lexical_norm + W_SIMILARITY · max(0, cos(q, d) − FLOOR)

A memory is a candidate when it has lexical evidence (a query token in a field, a
path-hint keyword) or a cosine above :data:`FLOOR`; any other memory is never
returned, however few the candidates. The weights and the floor are calibrated on
bench/retrieval.py's judged queries (bench/SEMANTIC.md gives the alternatives measured).

Beyond :data:`PREFILTER_FROM` slots the cosine is computed exactly only for the
lexical candidates and for the :data:`SHORTLIST` slots whose sign bits are nearest the
query's (Hamming distance over the packed bits, ``RecallIndex.arrays.bits``): a sign-bit
sketch orders unit vectors by angle closely enough to keep the memories above the floor.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import cast

import numpy as np

from memoryapp.recall.core import hybrid
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.postings import KW, TITLE
from memoryapp.recall.core.scoring import SECONDS_PER_DAY, STALE_DAYS, Scored, rank_key, reasons
from memoryapp.recall.core.vectors import query_form, similarities

__all__ = ["FLOOR", "PREFILTER_FROM", "SHORTLIST", "W_LEXICAL", "W_SIMILARITY", "query"]

W_LEXICAL = 0.3
W_SIMILARITY = 0.7
FLOOR = 0.2  # a cosine at or below it is no evidence (unrelated short texts reach ~0.15)
PREFILTER_FROM = 20_000  # slots from which the sign-bit prefilter shortlists
SHORTLIST = 2_000  # slots kept by the prefilter (then scored exactly)
REASON = "semantic_match"  # the reason a memory similar above the floor carries
_TEXT = hybrid._TEXT
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def query(
    index: RecallIndex,
    qtokens: frozenset[str],
    hints: frozenset[str],
    qvector: np.ndarray | None,
    top_k: int = 5,
    exclude_ids: Iterable[str] = (),
    now: float | None = None,
) -> list[Scored]:
    """The top ``top_k`` memories of ``index`` for the query, by the fused score.

    Args:
        index: The namespace's recall index.
        qtokens: The query tokens (:func:`~memoryapp.recall.core.tokens.query_tokens`).
        hints: The path-hint tokens (:func:`~memoryapp.recall.core.tokens.path_hints`).
        qvector: The query's unit embedding (float), or None (lexical evidence only).
        top_k: How many hits at most.
        exclude_ids: Ids never returned.
        now: The current time, POSIX seconds; defaults to ``time.time()``.

    Returns:
        The hits, highest score first, ties by ascending id (:func:`rank_key`).
    """
    now = time.time() if now is None else float(now)
    if top_k <= 0:
        return []
    with index._lock:
        if not index._slot_of:
            return []
        p = hybrid._Pass(index)
        for term in hybrid._terms(p, qtokens):
            p.add_query_term(term)
        for token in hints:
            p.add_hint(token)
        allowed = index.arrays.alive[: p.size].copy()
        for id in exclude_ids:
            slot = index._slot_of.get(id)
            if slot is not None:
                allowed[slot] = False
        lexical = ((p.fired != 0) | p.hinted) & allowed
        sim = _similarity(index, p, qvector, lexical, allowed)
        cand = np.flatnonzero(lexical | (sim > FLOOR))
        if not len(cand):
            return []
        return _ranked(p, cand, lexical[cand], sim[cand], top_k, now)


def _similarity(index, p, qvector, lexical, allowed) -> np.ndarray:
    """The cosine of each slot with ``qvector`` (0 where not computed or not allowed);
    beyond :data:`PREFILTER_FROM` slots, of the shortlist and the lexical top only."""
    size = p.size
    sim = np.zeros(size, dtype=np.float64)
    matrix = index.arrays.vec
    if qvector is None or not matrix.shape[1] or matrix.shape[1] > len(qvector):
        return sim  # no query vector (or none held): no shortlist, no cosine to compute
    qvector = query_form(qvector, matrix.shape[1])
    if size < PREFILTER_FROM:
        sim[:] = similarities(matrix[:size], qvector)
    else:
        wanted = np.zeros(size, dtype=bool)  # a mask: cheaper than np.union1d's sort
        wanted[_shortlist(index.arrays.bits[:size], qvector, allowed)] = True
        wanted[_lexical_top(p, lexical)] = True
        rows = np.flatnonzero(wanted)
        sim[rows] = similarities(matrix, qvector, rows)
    sim[~allowed] = 0.0
    return sim


def _lexical_top(p, lexical: np.ndarray) -> np.ndarray:
    """The :data:`SHORTLIST` lexical candidates of highest BM25 (all of them when fewer):
    a candidate below them can only win on similarity, and then the prefilter finds it."""
    slots = np.flatnonzero(lexical)
    if len(slots) <= SHORTLIST or len(lexical) < PREFILTER_FROM:
        return slots
    score = p.score[slots]
    return slots[np.argpartition(score, len(score) - SHORTLIST)[len(score) - SHORTLIST :]]


def _hamming(bits: np.ndarray, qbits: np.ndarray) -> np.ndarray:
    """Bits differing between each row of ``bits`` and ``qbits`` (packed, 8 bytes a word)."""
    if hasattr(np, "bitwise_count") and bits.shape[1] % 8 == 0:  # numpy 2: a popcount ufunc
        words, qwords = np.ascontiguousarray(bits).view(np.uint64), qbits.view(np.uint64)
        # Column by column: a sum along a row of two to four words is slower than these adds.
        distance = np.bitwise_count(words[:, 0] ^ qwords[0]).astype(np.int32)
        for j in range(1, words.shape[1]):
            distance += np.bitwise_count(words[:, j] ^ qwords[j])
        return distance
    return _POPCOUNT[bits ^ qbits].sum(axis=1, dtype=np.int32)


def _shortlist(bits: np.ndarray, qvector: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The :data:`SHORTLIST` allowed slots whose sign bits are nearest the query's."""
    qbits = np.packbits(qvector > 0)
    distance = _hamming(bits, qbits)
    distance[~allowed] = bits.shape[1] * 8 + 1
    if len(distance) <= SHORTLIST:
        return np.flatnonzero(allowed)
    return np.argpartition(distance, SHORTLIST)[:SHORTLIST]


def _ranked(p, cand, lexical, sim, top_k: int, now: float) -> list[Scored]:
    index = p.index
    days = np.maximum((now - index.arrays.updated[cand]) / SECONDS_PER_DAY, 0.0)
    stale = days > STALE_DAYS
    lex = (
        p.score[cand]
        + hybrid.HINT_BONUS * p.hinted[cand]
        + hybrid.RECENCY / (1.0 + days / 30.0)
        - hybrid.STALE_PENALTY * stale
    )
    lex = np.where(lexical, np.maximum(lex, 0.0), 0.0)
    best = float(lex.max())
    lexical_norm = lex / best if best > 0 else lex
    total = W_LEXICAL * lexical_norm + W_SIMILARITY * np.maximum(sim - FLOOR, 0.0)
    if len(cand) > top_k:
        kth = np.partition(total, len(total) - top_k)[len(total) - top_k]
        keep = total >= kth
        cand, total, stale, sim = cand[keep], total[keep], stale[keep], sim[keep]
    hits = []
    for slot, score, similar, is_stale in zip(
        cand.tolist(), total.tolist(), (sim > FLOOR).tolist(), stale.tolist(), strict=True
    ):
        code = int(p.fired[slot])
        why = reasons(
            int(p.tags[slot]), code & TITLE, code & KW, code & _TEXT, bool(p.hinted[slot]),
            is_stale, bool(index.arrays.explicit[slot]),
        )  # fmt: skip
        hits.append(Scored(cast(str, index._ids[slot]), score, why + (REASON,) * similar))
    hits.sort(key=rank_key)
    return hits[:top_k]
