"""The ``hybrid`` recall ranking: BM25F over the namespace's own postings, fused with the
signals of the exact formula that BM25 lacks (exact tags, path hints, recency, staleness).

Pure Python and numpy, no Django. It reads the same per-namespace
:class:`~memoryapp.recall.core.index.RecallIndex` the ``agentao`` ranking reads (its postings,
their field bits and the per-slot content lengths), so writes, erasure, compaction and
snapshots keep both rankings fresh at once. The index gives the tokens found only after
the content's first 500 characters a field bit of their own (``TAIL``), which the exact
formula gives no value and this ranking counts as content: it reads the whole text.

For a query token ``t`` held by a memory ``d``::

    idf(t)   = ln(1 + (N − df + 0.5) / (df + 0.5))          N live memories, df its postings
    tf'(t,d) = Σ w_field · [t in field of d] / (1 − b + b · len(d) / avglen)
    bm25(d)  = Σ_t idf(t) · tf' · (k1 + 1) / (tf' + k1)

``len(d)`` is the number of distinct tokens of the whole content.
Each field holds a token at most once (the index keeps token sets), so ``tf`` is the
weighted count of fields holding it: a word in the key, the tags and the content counts
more than one in the content alone, and a word that most memories hold (``turn``, a
shared tag) weighs almost nothing, whatever field it is in. The fused score adds a
bonus per exact tag match scaled by its idf, the path-hint bonus, a small recency term
and the stale penalty::

    score = bm25 + TAG_BONUS · Σ idf(tag hits) + HINT_BONUS · hint
            + RECENCY · 1 / (1 + days / 30) − STALE_PENALTY · stale

A query token stands for every held form of its English stem (``deployments`` reads the
postings of ``deploy`` and ``deployed`` too, :mod:`memoryapp.recall.core.stemming`), merged
into one posting so a memory holding several forms counts once; query tokens of one stem
are one term. The held forms are found exactly, by prefix in the index's sorted tokens,
and remembered per index (:class:`~memoryapp.recall.core.stemming.StemForms`). The index's
tokens are unchanged: only this ranking stems.

Question words (``what``, ``when``, ``who``, ``how``…, :data:`QUESTION_WORDS`) are not
terms: a question says *what* it asks with them, never *about what*, and a conversation
is full of them (a turn asking "what time?" matched "what did Ana name the puppy?").

Length normalisation is mild (``b`` 0.4, not BM25's usual 0.75): a memory is one turn or
one note, and a long turn that answers is not less about the question than a short one
that merely repeats one of its words; with 0.75 the short chatter won.

A memory with no query token in any field and no path-hint keyword is never returned:
recency and staleness only reorder memories that have lexical evidence. ``reasons`` uses
the vocabulary of the exact formula (:data:`~memoryapp.recall.core.scoring.REASON_ORDER`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import cast

import numpy as np

from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.postings import (
    CODE_BITS,
    CODE_MASK,
    CODES,
    CONTENT,
    KW,
    TAG,
    TAIL,
    TITLE,
)
from memoryapp.recall.core.rankings import RANKINGS, check_ranking
from memoryapp.recall.core.scoring import SECONDS_PER_DAY, STALE_DAYS, Scored, rank_key, reasons
from memoryapp.recall.core.stemming import StemForms, stem

__all__ = ["B", "K1", "QUESTION_WORDS", "RANKINGS", "check_ranking", "query"]

K1 = 1.2  # BM25 term saturation
B = 0.4  # BM25 length normalisation: mild (see the module docstring)
# Field weights of tf' (field bits as in memoryapp.recall.core.index: 1 tag, 2 title, 4 kw, 8
# content). A title word the content lacks says what the memory is about (a key an agent
# chose) and counts like a mention; a title word the content holds too is an echo (a key
# made of the content's first words would otherwise double those words and favour chatter
# that opens with the query's common words), and so is a keyword, which the store derives
# from the title, the content and the tags: echoes add nothing.
_W_TAG, _W_TITLE, _W_KW, _W_CONTENT = 1.0, 1.0, 0.5, 1.0
_TEXT = CONTENT | TAIL  # the whole content: its first 500 characters and the rest


def _weight(code: int) -> float:
    """tf' of one posting entry, from the fields holding the token."""
    weight = _W_CONTENT * bool(code & _TEXT) + _W_TAG * bool(code & TAG)
    if code & TITLE and not code & _TEXT:
        weight += _W_TITLE
    if code & KW and not code & (TITLE | _TEXT | TAG):
        weight += _W_KW  # e.g. a whole file path, which the content splits into words
    return weight


#: Words that say a query is a question, not what it is about: never terms of this ranking
#: (the recall stop words, docs/behaviour.md §5, already drop "did", "does", "is"…).
QUESTION_WORDS = frozenset(
    [
        "what",
        "when",
        "where",
        "who",
        "whom",
        "whose",
        "which",
        "why",
        "how",
        "whatever",
        "whenever",
        "wherever",
    ]
)

TAG_BONUS = 0.5  # per exact tag hit, times the tag's idf
HINT_BONUS = 2.0  # a file named in recent messages is in the memory's keywords
RECENCY = 0.25  # weight of 1 / (1 + days / 30): a tie-breaker between similar texts
STALE_PENALTY = 1.0  # over 90 days without an update

_WEIGHT_OF_CODE = np.array([_weight(code) for code in range(CODES)], dtype=np.float64)


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class _Pass:
    """One query's per-slot accumulators: score, fields that fired, tag hits, hint."""

    def __init__(self, index: RecallIndex) -> None:
        self.index = index
        self.size = len(index._ids)
        alive = index.arrays.alive[: self.size]
        self.n = int(alive.sum())
        self.lengths = index.arrays.doc_len[: self.size]
        total = float(np.sum(self.lengths, where=alive, dtype=np.int64))
        self.length_step = B / max(total / max(self.n, 1), 1.0)  # b / average length
        # Narrow per-slot arrays: at 100,000 memories a fresh int64 array is 800 KB that
        # the allocator maps anew each query (page faults); the codes fit 5 bits.
        self.score = np.zeros(self.size, dtype=np.float64)
        self.fired = np.zeros(self.size, dtype=np.int8)  # OR of the field bits hit
        self.tags = np.zeros(self.size, dtype=np.int32)
        self.hinted = np.zeros(self.size, dtype=bool)

    def entries(self, token: str) -> tuple[np.ndarray, int] | None:
        posting = self.index._postings.get(token)
        if posting is None:
            return None
        if posting.new_kw is not None or posting.new_other is not None:
            self.index._merge(posting)
        return posting.entries, posting.n_kw

    def add_query_term(self, forms: Iterable[str]) -> None:
        """Score one query term: the postings of all its word forms, read as one."""
        parts = [found[0] for found in map(self.entries, forms) if found is not None]
        if not parts:
            return
        if len(parts) == 1:
            slots, codes = parts[0] >> CODE_BITS, parts[0] & CODE_MASK
        else:
            slots, codes = self.union(parts)
        idf = _idf(self.n, len(slots))
        tf = _WEIGHT_OF_CODE[codes] / ((1.0 - B) + self.length_step * self.lengths[slots])
        gain = idf * tf * (K1 + 1.0) / (tf + K1)
        tagged = (codes & TAG) != 0
        gain += TAG_BONUS * idf * tagged
        # A posting holds each slot once, so plain fancy indexing accumulates correctly
        # (and several times faster than ufunc.at or a full-length bincount).
        self.score[slots] += gain
        self.tags[slots[tagged]] += 1
        self.fired[slots] |= codes

    def union(self, parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The slots of several postings, once each, with the OR of their field codes."""
        total = sum(map(len, parts))
        if 8 * total < self.size:
            # Few entries (the usual case: a stem's rarer forms): sort the packed entries
            # (slot, then code) and OR the codes of each slot's run; no full-length scratch.
            merged = np.sort(np.concatenate(parts))
            slots = merged >> CODE_BITS
            first = np.flatnonzero(np.concatenate(([True], slots[1:] != slots[:-1])))
            return slots[first], np.bitwise_or.reduceat(merged & CODE_MASK, first)
        # A posting holds each slot once, so OR-ing posting by posting into a per-slot
        # scratch is exact, and cheaper than sorting a long concatenation.
        acc = np.zeros(self.size, dtype=np.int8)  # field codes fit 5 bits
        for entries in parts:
            acc[entries >> CODE_BITS] |= entries & CODE_MASK
        # Every entry has a field bit: nonzero where held. Through a bool mask: numpy's
        # nonzero is ~10× faster on bools than on int8 (437 µs against 37 µs at 100,000
        # slots half of them held), most of a common stem's merge.
        slots = np.flatnonzero(acc != 0)
        return slots, acc[slots]

    def add_hint(self, token: str) -> None:
        found = self.entries(token)
        if found is not None and found[1]:
            self.hinted[found[0][: found[1]] >> CODE_BITS] = True


def stem_forms(index: RecallIndex) -> StemForms:
    """The index's memo of word forms, made from its sorted tokens on first use."""
    memo = index._stem_forms
    if memo is None:
        postings = index._postings
        listed = getattr(postings, "tokens", None)  # a loaded snapshot's, already sorted
        memo = index._stem_forms = StemForms(listed() if listed else sorted(postings))
    return cast(StemForms, memo)


def _terms(p: _Pass, qtokens: frozenset[str]) -> list[frozenset[str]]:
    """The query's terms: each token with its held word forms, tokens of one stem merged."""
    by_stem: dict[str, set[str]] = {}
    memo = stem_forms(p.index)
    for token in sorted(qtokens - QUESTION_WORDS):
        forms = by_stem.setdefault(stem(token), {token})  # itself, held or not: irregulars
        forms.add(token)
        forms.update(memo.forms(token))
    return [frozenset(forms) for forms in by_stem.values()]


def query(
    index: RecallIndex,
    qtokens: frozenset[str],
    hints: frozenset[str] = frozenset(),
    top_k: int = 5,
    exclude_ids: Iterable[str] = (),
    now: float | None = None,
) -> list[Scored]:
    """The top ``top_k`` memories of ``index`` for the query, by the hybrid score.

    Args:
        index: The namespace's recall index.
        qtokens: The query tokens (:func:`~memoryapp.recall.core.tokens.query_tokens`).
        hints: The path-hint tokens (:func:`~memoryapp.recall.core.tokens.path_hints`).
        top_k: How many hits at most.
        exclude_ids: Ids never returned.
        now: The current time, POSIX seconds; defaults to ``time.time()``.

    Returns:
        The hits, highest score first, ties by ascending id (:func:`rank_key`).
    """
    now = time.time() if now is None else float(now)
    if top_k <= 0 or not (qtokens or hints):
        return []
    with index._lock:
        if not index._slot_of:
            return []
        p = _Pass(index)
        for term in _terms(p, qtokens):
            p.add_query_term(term)
        for token in hints:
            p.add_hint(token)
        return _ranked(p, top_k, exclude_ids, now)


def _ranked(p: _Pass, top_k: int, exclude_ids: Iterable[str], now: float) -> list[Scored]:
    index = p.index
    evidence = (p.fired != 0) | p.hinted
    evidence &= index.arrays.alive[: p.size]
    for id in exclude_ids:
        slot = index._slot_of.get(id)
        if slot is not None:
            evidence[slot] = False
    cand = np.flatnonzero(evidence)
    if not len(cand):
        return []
    days = np.maximum((now - index.arrays.updated[cand]) / SECONDS_PER_DAY, 0.0)
    stale = days > STALE_DAYS
    total = (
        p.score[cand]
        + HINT_BONUS * p.hinted[cand]
        + RECENCY / (1.0 + days / 30.0)
        - STALE_PENALTY * stale
    )
    if len(cand) > top_k:
        # Keep everything scoring at least the k-th best (ties included), sorted below.
        kth = np.partition(total, len(total) - top_k)[len(total) - top_k]
        keep = total >= kth
        cand, total, stale = cand[keep], total[keep], stale[keep]
    fired = p.fired[cand].tolist()
    hits = [
        Scored(
            cast(str, index._ids[slot]),
            score,
            reasons(tag, code & TITLE, code & KW, code & _TEXT, hinted, is_stale, explicit),
        )
        for slot, score, code, tag, hinted, is_stale, explicit in zip(
            cand.tolist(),
            total.tolist(),
            fired,
            p.tags[cand].tolist(),
            p.hinted[cand].tolist(),
            stale.tolist(),
            index.arrays.explicit[cand].tolist(),
            strict=True,
        )
    ]
    hits.sort(key=rank_key)
    return hits[:top_k]
