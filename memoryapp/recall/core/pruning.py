"""Exact top-k from a recall index's candidates: upper bounds, pruning, exact scores.

A query's candidates get an upper bound from their packed counts and the cached recency bound;
only those whose bound can reach the k-th best score are scored exactly (mirroring
:func:`memoryapp.recall.core.scoring.score`, bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from memoryapp.recall.core.postings import SMALL_CANDIDATES, Layout
from memoryapp.recall.core.scoring import (
    SECONDS_PER_DAY,
    STALE_DAYS,
    Scored,
    rank_key,
    reasons,
    tag_weight,
)

if TYPE_CHECKING:
    from memoryapp.recall.core.index import RecallIndex

_EPS = 1e-9  # slack between float upper bounds and exact scores (both ~10, errors ~1e-15)


def collect(index: RecallIndex) -> tuple[np.ndarray, list[np.ndarray]]:
    """The live slots a query touched and their lane values; re-zeroes the accumulator."""
    n = len(index._ids)
    accs = index._acc
    touched = accs[0][:n] != 0
    for acc in accs[1:]:
        touched |= acc[:n] != 0
    cand = np.flatnonzero(touched)
    lanes = [acc[cand] for acc in accs]
    for acc in accs:
        # Re-zero: a dense fill is cheaper than a scattered one for many candidates.
        if 4 * len(cand) > n:
            acc[:n] = 0
        else:
            acc[cand] = 0
    if index._dead:
        alive = index.arrays.alive[cand]
        cand = cand[alive]
        lanes = [values[alive] for values in lanes]
    return cand, lanes


def rank(index: RecallIndex, c: Candidates, top_k: int) -> list[Scored]:
    """The top ``top_k`` of the candidates ``c``: prune by bounds, score exactly, sort."""
    if len(c.slots) <= max(SMALL_CANDIDATES, 4 * top_k):
        chosen = np.arange(len(c.slots))
    else:
        index._refresh_bound(c.now)
        chosen = survivors(c.upper_bounds(), c.exact, top_k)
    scores, stale = c.exact(chosen)
    if len(chosen) > top_k:
        # Keep everything scoring at least the k-th best (ties included), sorted below.
        kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
        keep = scores >= kth
        chosen, scores, stale = chosen[keep], scores[keep], stale[keep]
    lanes = [values[chosen] for values in c.lanes]
    slots = c.slots[chosen]
    digit = c.layout.digit
    columns = zip(
        slots.tolist(),
        scores.tolist(),
        digit(lanes, "tag").tolist(),
        digit(lanes, "title").tolist(),
        digit(lanes, "kw").tolist(),
        digit(lanes, "content").tolist(),
        c.layout.hinted(lanes).tolist(),
        stale.tolist(),
        index.arrays.explicit[slots].tolist(),
        strict=True,
    )
    hits = [
        Scored(cast(str, index._ids[slot]), total, reasons(*counts))
        for slot, total, *counts in columns
    ]
    hits.sort(key=rank_key)
    return hits[:top_k]


class Candidates:
    """The gated candidates of one query: slots, their lane values, and how to score them."""

    def __init__(
        self,
        index: RecallIndex,
        layout: Layout,
        n: int,
        slots: np.ndarray,
        lanes: list[np.ndarray],
        now: float,
    ) -> None:
        self.index = index
        self.layout = layout
        self.n = n  # the number of query tokens
        self.slots = slots
        self.lanes = lanes
        self.now = now

    def upper_bounds(self) -> np.ndarray:
        """A bound ≥ every candidate's exact score: P / 2N + 2·hint + the recency bound."""
        upper = self.index.arrays.bound[self.slots] + 2.0 * self.layout.hinted(self.lanes)
        if self.n:
            upper += self.layout.digit(self.lanes, "bound") * (1.0 / (2 * self.n))
        return upper

    def exact(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact scores and stale flags of the candidates ``idx``, mirroring :func:`score`."""
        n, digit, now = self.n, self.layout.digit, self.now
        lanes = [values[idx] for values in self.lanes]
        slots = self.slots[idx]
        hint = self.layout.hinted(lanes)
        days = np.maximum((now - self.index.arrays.updated[slots]) / SECONDS_PER_DAY, 0.0)
        stale = days > STALE_DAYS
        if n:
            title = digit(lanes, "title")
            terms = tag_weight(n) * (digit(lanes, "tag") / n)
            terms = terms + 3.0 * (title / (n + self.index.arrays.title_len[slots] - title))
            terms = terms + 2.0 * (digit(lanes, "kw") / n)
            terms = terms + 1.0 * (digit(lanes, "content") / n)
        else:
            terms = np.zeros(len(slots))
        total = terms + 2.0 * hint + 1.0 / (1.0 + days / 30.0)
        return total - 2.0 * stale, stale


def survivors(
    upper: np.ndarray, exact: Callable[[np.ndarray], tuple[np.ndarray, Any]], top_k: int
) -> np.ndarray:
    """The candidates whose upper bound reaches a proven lower bound of the k-th best score.

    θ, the k-th best exact score among the candidates with the highest bounds, is at most
    the true k-th best score, so a candidate whose bound is below θ cannot be in the answer.
    """
    best = float(upper.max())
    spread = best - float(upper.min())
    window = 1.0
    while True:
        near = np.flatnonzero(upper >= best - window)
        if len(near) >= top_k or window > spread:
            break
        window *= 4.0
    if len(near) < top_k:
        return near
    scores, _ = exact(near)
    theta = float(np.partition(scores, len(scores) - top_k)[len(scores) - top_k])
    return np.flatnonzero(upper >= theta - _EPS)
