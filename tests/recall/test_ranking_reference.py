"""The ``hybrid`` and ``semantic`` rankings against a naive reference on a random corpus.

The reference scores every live memory one by one, in plain Python and float64, from the
formulas in the docstrings of :mod:`memoryapp.recall.core.hybrid` and
:mod:`memoryapp.recall.core.semantic`: the index's postings, merges, masks and partial
sorts (the parts made fast) must give the same ids, order, reasons and scores (1e-9).
"""

from __future__ import annotations

import bisect
import math
import random

import numpy as np
import pytest

from memoryapp.recall.core import hybrid, semantic, stemming, vectors
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.postings import KW, TAG, TITLE, codes_of, tail_of
from memoryapp.recall.core.scoring import (
    SECONDS_PER_DAY,
    STALE_DAYS,
    IndexRecord,
    Scored,
    fields_of,
    rank_key,
    reasons,
)
from memoryapp.recall.core.tokens import query_tokens

NOW = 1_800_000_000.0
# Words with several held forms of one stem (the merged postings), rare and common ones.
WORDS = [
    "deploy",
    "deployed",
    "deploys",
    "deploying",
    "deployment",
    "deployments",
    "name",
    "named",
    "naming",
    "names",
    "study",
    "studied",
    "studies",
    "cat",
    "cats",
    "run",
    "running",
    "runs",
    "server",
    "servers",
    "database",
    "databases",
    "friday",
    "monday",
    "chemistry",
    "report",
    "reports",
    "reporting",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kappa",
    "puppy",
    "puppies",
    "garden",
    "gardening",
    "ticket",
    "tickets",
    "what",
    "when",
    "how",
]
PATHS = ("src/app.py", "docs/api.md", "bench/run.py")
_TEXT = hybrid._TEXT


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _vector(rng: random.Random, dims: int) -> bytes | None:
    if rng.random() < 0.1:
        return None  # a row its embedder failed on: similar to nothing
    v = np.array([rng.gauss(0.0, 1.0) for _ in range(dims)])
    return vectors.encode(v / np.linalg.norm(v))


def _record(rng: random.Random, i: int, dims: int) -> IndexRecord:
    content = _text(rng, rng.choice((3, 8, 20)))
    if rng.random() < 0.2:  # past the first 500 characters: the TAIL field
        content = content + " " + "x" * 500 + " " + _text(rng, 5)
    if rng.random() < 0.2:
        content += " see " + rng.choice(PATHS)
    return IndexRecord(
        id=f"m{i:04d}",
        title=_text(rng, rng.choice((1, 2, 3))),
        content=content,
        tags=tuple(rng.sample(WORDS[:20], rng.choice((0, 0, 1, 2)))),
        keywords=tuple(rng.sample(PATHS, 1)) if rng.random() < 0.15 else (),
        updated_at=NOW - SECONDS_PER_DAY * rng.choice((0.5, 3, 40, 120, 400)),
        explicit=rng.random() < 0.1,
        vector=_vector(rng, dims),
    )


class Naive:
    """Every live record scored one by one, as the module docstrings define it."""

    def __init__(self, records: dict[str, IndexRecord]) -> None:
        self.records = records
        self.codes = {}
        self.length = {}
        for id, r in records.items():
            fields = fields_of(r)
            tail = tail_of(r, fields)
            self.codes[id] = codes_of(fields, tail)
            self.length[id] = len(fields.content) + len(tail)
        self.tokens = sorted({t for codes in self.codes.values() for t in codes})

    def forms(self, token: str) -> set[str]:
        """The held tokens of ``token``'s stem, found by prefix (irregular forms aside)."""
        if not stemming.is_word(token):
            return {token}
        root = stemming.stem(token)
        prefix = root[:-1] if len(root) >= 3 and root[-1] in "ei" else root
        start = bisect.bisect_left(self.tokens, prefix)
        held = {token}
        for t in self.tokens[start:]:
            if not t.startswith(prefix):
                break
            if stemming.stem(t) == root:
                held.add(t)
        return held

    def lexical(self, qtokens: frozenset[str], hints: frozenset[str]) -> dict[str, tuple]:
        """id → (bm25 + tag bonus, OR of the fired fields, tag hits, hinted)."""
        terms: dict[str, set[str]] = {}
        for token in sorted(qtokens - hybrid.QUESTION_WORDS):
            terms.setdefault(stemming.stem(token), set()).update(self.forms(token))
        n = len(self.records)
        step = hybrid.B / max(sum(self.length.values()) / n, 1.0)
        df = [
            sum(any(f in c for f in forms) for c in self.codes.values()) for forms in terms.values()
        ]
        out = {}
        for id, codes in self.codes.items():
            score, fired, tags = 0.0, 0, 0
            for forms, held in zip(terms.values(), df, strict=True):
                code = 0
                for f in forms:
                    code |= codes.get(f, 0)
                if not code:
                    continue
                idf = math.log(1.0 + (n - held + 0.5) / (held + 0.5))
                tf = hybrid._weight(code) / ((1.0 - hybrid.B) + step * self.length[id])
                score += idf * tf * (hybrid.K1 + 1.0) / (tf + hybrid.K1)
                if code & TAG:
                    score += hybrid.TAG_BONUS * idf
                    tags += 1
                fired |= code
            hinted = any(codes.get(h, 0) & KW for h in hints)
            out[id] = (score, fired, tags, hinted)
        return out

    def adjusted(self, id: str, score: float, hinted: bool) -> tuple[float, bool]:
        days = max((NOW - self.records[id].updated_at) / SECONDS_PER_DAY, 0.0)
        stale = days > STALE_DAYS
        total = (
            score
            + hybrid.HINT_BONUS * hinted
            + hybrid.RECENCY / (1.0 + days / 30.0)
            - hybrid.STALE_PENALTY * stale
        )
        return total, stale

    def why(self, id: str, fired: int, tags: int, hinted: bool, stale: bool) -> tuple:
        explicit = self.records[id].explicit
        return reasons(tags, fired & TITLE, fired & KW, fired & _TEXT, hinted, stale, explicit)

    def hybrid(self, qtokens, hints, top_k, exclude) -> list[Scored]:
        hits = []
        for id, (score, fired, tags, hinted) in self.lexical(qtokens, hints).items():
            if id in exclude or not (fired or hinted):
                continue
            total, stale = self.adjusted(id, score, hinted)
            hits.append(Scored(id, total, self.why(id, fired, tags, hinted, stale)))
        return sorted(hits, key=rank_key)[:top_k]

    def semantic(self, qtokens, hints, qvector, top_k, exclude) -> list[Scored]:
        dims = vectors.INDEX_DIMS
        q = vectors.query_form(qvector, dims).astype(np.float64)
        rows = {}
        for id, (score, fired, tags, hinted) in self.lexical(qtokens, hints).items():
            if id in exclude:
                continue
            stored = vectors.decode(self.records[id].vector)
            held = None if stored is None else vectors.index_form(stored)
            sim = 0.0 if held is None else float(held.astype(np.float64) @ q) / vectors.SCALE
            lexical = bool(fired or hinted)
            if lexical or sim > semantic.FLOOR:
                total, stale = self.adjusted(id, score, hinted)
                rows[id] = (max(total, 0.0) if lexical else 0.0, sim, fired, tags, hinted, stale)
        best = max((row[0] for row in rows.values()), default=0.0)
        hits = []
        for id, (lex, sim, fired, tags, hinted, stale) in rows.items():
            norm = lex / best if best > 0 else lex
            total = semantic.W_LEXICAL * norm + semantic.W_SIMILARITY * max(
                sim - semantic.FLOOR, 0.0
            )
            why = self.why(id, fired, tags, hinted, stale)
            hits.append(Scored(id, total, why + (semantic.REASON,) * (sim > semantic.FLOOR)))
        return sorted(hits, key=rank_key)[:top_k]


def _same(got: list[Scored], want: list[Scored]) -> None:
    assert [(h.id, h.reasons) for h in got] == [(h.id, h.reasons) for h in want]
    for a, b in zip(got, want, strict=True):
        assert abs(a.score - b.score) < 1e-9, (a, b)


def _corpus(seed: int, n: int) -> tuple[RecallIndex, dict[str, IndexRecord], random.Random]:
    """A random index: bulk-loaded, then written one by one (append buffers), some
    memories replaced and removed, and compacted (the reference has no dead slots)."""
    rng = random.Random(seed)
    dims = rng.choice((128, 256))  # 256: the index keeps the first 128 (index_form)
    records = {r.id: r for r in (_record(rng, i, dims) for i in range(n))}
    index = RecallIndex(list(records.values())[: n // 2])
    for r in list(records.values())[n // 2 :]:
        index.add(r)
    for id in rng.sample(sorted(records), n // 10):
        records[id] = _record(rng, int(id[1:]), dims)
        index.add(records[id])
    for id in rng.sample(sorted(records), n // 10):
        del records[id]
        index.remove(id)
    index.compact()
    return index, records, rng


@pytest.mark.parametrize("seed", range(6))
def test_hybrid_and_semantic_match_the_naive_reference(seed):
    index, records, rng = _corpus(seed, 300)
    naive = Naive(records)
    for _ in range(25):
        qtokens = query_tokens(_text(rng, rng.choice((1, 2, 4, 6))))
        hints = frozenset(rng.sample(PATHS, rng.choice((0, 0, 1))))
        exclude = frozenset(rng.sample(sorted(records), 3))
        top_k = rng.choice((1, 5, 10, 40))
        qvector = np.array([rng.gauss(0.0, 1.0) for _ in range(256)])
        qvector /= np.linalg.norm(qvector)
        if seed % 2:  # a query near a memory: cosines well above the floor
            near = vectors.decode(records[rng.choice(sorted(records))].vector)
            if near is not None:
                qvector = 0.3 * qvector
                qvector[: len(near)] += near / vectors.SCALE
                qvector /= np.linalg.norm(qvector)
        _same(
            hybrid.query(index, qtokens, hints, top_k, exclude, NOW),
            naive.hybrid(qtokens, hints, top_k, exclude),
        )
        _same(
            semantic.query(index, qtokens, hints, qvector, top_k, exclude, NOW),
            naive.semantic(qtokens, hints, qvector, top_k, exclude),
        )


def test_the_prefilter_path_matches_the_reference_when_it_keeps_every_row(monkeypatch):
    """Beyond PREFILTER_FROM the cosines are computed for a shortlist only: with a shortlist
    as long as the index, that path must score exactly as the reference does."""
    index, records, rng = _corpus(99, 200)
    monkeypatch.setattr(semantic, "PREFILTER_FROM", 10)
    monkeypatch.setattr(semantic, "SHORTLIST", 1000)
    naive = Naive(records)
    for _ in range(10):
        qtokens = query_tokens(_text(rng, 3))
        qvector = np.array([rng.gauss(0.0, 1.0) for _ in range(256)])
        qvector /= np.linalg.norm(qvector)
        _same(
            semantic.query(index, qtokens, frozenset(), qvector, 10, (), NOW),
            naive.semantic(qtokens, frozenset(), qvector, 10, frozenset()),
        )
