"""Retrieval benchmark: does recall find the turn that answers a question?

Usage: .venv/bin/python bench/retrieval.py [--data PATH] [--keyings ids,summary]
       [--rankings agentao,hybrid,semantic,bm25,bm25-stem] [--latency-sizes 1000,100000] [--quick]
       [--json PATH]

Data layout (JSON, UTF-8)::

    {"name": "...",
     "conversations": [
       {"id": "c1",
        "turns": [{"id": "c1:1", "speaker": "Ana", "text": "..."}, ...],
        "questions": [{"id": "c1:q1", "question": "...", "evidence": ["c1:5"],
                       "category": "single-hop"}, ...]}]}

Turn ids are unique across the file; ``evidence`` lists the ids of the turns that answer
the question; ``category`` is any label (found@k is also reported per category). A
question without evidence is skipped. ``bench/retrieval_data.py`` generates the shipped
set (``bench/data/retrieval_small.json``). To run a real set, convert it to this layout
and pass ``--data``; for LoCoMo (``locomo10.json``): each sample's ``conversation`` holds
``session_<n>`` lists of ``{"speaker", "dia_id", "text"}`` (turn id = ``dia_id``,
prefixed with the sample id to keep ids unique) and its ``qa`` list holds
``{"question", "evidence": [dia_id, ...], "category": int}``; ``--convert-locomo IN OUT``
does exactly that.

Method. Each conversation is one namespace: each turn becomes one memory whose content is
``"<speaker>: <text>"`` and whose key is either ``turn <id>`` (keying ``ids``) or the first
8 words of the text (keying ``summary``), prepared as the store prepares a write (the
guard's key normalisation and title, :func:`~memoryapp.rules.classify.extract_keywords`)
and put in a :class:`~memoryapp.recall.index.RecallIndex` (the per-namespace index the
recall of every entry point runs on; the database only adds the reading of the hits'
columns). Each question is recalled with ``top_k=10`` under ``agentao`` (the exact
formula), ``hybrid`` (:mod:`memoryapp.recall.hybrid`) and ``semantic``
(:mod:`memoryapp.recall.semantic`, the shipped model; its latency is bench/semantic.py's);
``bm25`` is plain Okapi BM25
(k1 1.5, b 0.75, idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``) computed here over the
same contents, lower-cased ``\\w+`` words minus the recall stop words; ``bm25-stem`` is
the same over the words' English Snowball stems. A question is
found at k when one of its evidence turns is among the first k hits.

Latency: recall p50/p95 of ``agentao`` and ``hybrid`` over the queries of
``bench/corpus.py`` (the corpus of the other recall benchmarks) at each of
``--latency-sizes`` memories in one namespace, warm (index built, every query run once
untimed first), and the index's :attr:`~memoryapp.recall.index.RecallIndex.nbytes`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryapp.recall import hybrid  # noqa: E402
from memoryapp.recall.index import RecallIndex  # noqa: E402
from memoryapp.recall.scoring import IndexRecord  # noqa: E402
from memoryapp.recall.stemming import stem  # noqa: E402
from memoryapp.recall.tokens import STOP_WORDS, path_hints, query_tokens  # noqa: E402
from memoryapp.rules.classify import extract_keywords  # noqa: E402
from memoryapp.rules.guard import MemoryGuard  # noqa: E402

DATA = ROOT / "bench" / "data" / "retrieval_small.json"
KS = (5, 10)
SUMMARY_WORDS = 8
_GUARD = MemoryGuard()
_WORD = re.compile(r"\w+")
# The harness's own baselines (not recall rankings): plain BM25, and BM25 over Snowball stems.
BASELINES = ("bm25", "bm25-stem")


# ----------------------------------------------------------------------------- the data
def load(path: Path) -> list[dict]:
    """The conversations of a data set in the layout above."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["conversations"]


def convert_locomo(source: Path, target: Path) -> None:
    """Write LoCoMo's ``locomo10.json`` in this benchmark's layout."""
    samples = json.loads(source.read_text(encoding="utf-8"))
    out = []
    for n, sample in enumerate(samples):
        sid = str(sample.get("sample_id", n))
        conv = sample["conversation"]
        sessions = sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])
        )
        turns = [
            {"id": f"{sid}:{t['dia_id']}", "speaker": t["speaker"], "text": t["text"]}
            for k in sessions
            for t in conv[k]
        ]
        questions = [
            {
                "id": f"{sid}:q{i}",
                "question": qa["question"],
                # A few evidence entries hold two ids in one string ("D8:6; D9:17").
                "evidence": [
                    f"{sid}:{part}"
                    for e in qa.get("evidence", [])
                    for part in re.split(r"[;,\s]+", e)
                    if part
                ],
                "category": str(qa.get("category", "")),
            }
            for i, qa in enumerate(sample.get("qa", []))
        ]
        out.append({"id": sid, "turns": turns, "questions": questions})
    target.write_text(json.dumps({"name": "LoCoMo", "conversations": out}, ensure_ascii=False))


def key_of(turn: dict, keying: str) -> str:
    """The memory key of a turn: ``turn <id>`` or its first words."""
    if keying == "ids":
        return f"turn {turn['id']}"
    words = turn["text"].split()[:SUMMARY_WORDS]
    return " ".join(words) or f"turn {turn['id']}"


def record_of(turn: dict, keying: str, at: float) -> IndexRecord:
    """The index record the store would write for this turn."""
    content = f"{turn['speaker']}: {turn['text']}"
    _, title, content = _GUARD.check(key_of(turn, keying), content)
    return IndexRecord(
        id=turn["id"],
        title=title,
        content=content,
        keywords=tuple(extract_keywords(title, content, ())),
        updated_at=at,
    )


# ------------------------------------------------------------------------- plain BM25
class BM25:
    """Okapi BM25 over whole texts (the harness's own baseline, no library)."""

    K1, B = 1.5, 0.75

    def __init__(self, docs: dict[str, str], stemmed: bool = False) -> None:
        self.stemmed = stemmed
        self.ids = list(docs)
        self.tf = [Counter(self.words(docs[i])) for i in self.ids]
        self.len = [sum(c.values()) for c in self.tf]
        self.avg = sum(self.len) / max(len(self.len), 1)
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(self.ids)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def words(self, text: str) -> list[str]:
        """Lower-cased ``\\w+`` words without the recall stop words (stemmed for bm25-stem)."""
        words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]
        return [stem(w) for w in words] if self.stemmed else words

    def top(self, query: str, k: int) -> list[str]:
        """The ids of the ``k`` best texts with at least one query word."""
        words = set(self.words(query))
        scored = []
        for i, tf in enumerate(self.tf):
            s = 0.0
            norm = self.K1 * (1 - self.B + self.B * self.len[i] / self.avg)
            for w in words & tf.keys():
                f = tf[w]
                s += self.idf[w] * f * (self.K1 + 1) / (f + norm)
            if s > 0:
                scored.append((-s, self.ids[i]))
        scored.sort()
        return [i for _, i in scored[:k]]


# -------------------------------------------------------------------------- found@k
def run_quality(convs: list[dict], keyings: list[str], rankings: list[str]) -> dict:
    """found@k per (keying, ranking), overall and per category, and query latencies."""
    results: dict = {}
    now = time.time()
    for keying in keyings:
        for ranking in rankings:
            hits: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # n, @5, @10
            for conv in convs:
                turns = conv["turns"]
                if ranking in BASELINES:
                    texts = {t["id"]: f"{t['speaker']}: {t['text']}" for t in turns}
                    bm25 = BM25(texts, stemmed=ranking == "bm25-stem")
                    rank = lambda q, bm25=bm25: bm25.top(q, max(KS))  # noqa: E731
                else:
                    index = RecallIndex(
                        _with_vectors(
                            ranking,
                            (
                                record_of(t, keying, now - 60.0 * (len(turns) - i))
                                for i, t in enumerate(turns)
                            ),
                        )
                    )
                    rank = _ranker(index, ranking, now)
                for q in conv["questions"]:
                    if not q.get("evidence"):
                        continue
                    top = rank(q["question"])
                    evidence = set(q["evidence"])
                    for cat in ("all", str(q.get("category", ""))):
                        row = hits[cat]
                        row[0] += 1
                        for j, k in enumerate(KS):
                            row[1 + j] += bool(evidence.intersection(top[:k]))
            results[(keying, ranking)] = {
                cat: {"n": n, **{f"found@{k}": row[1 + j] / n for j, k in enumerate(KS)}}
                for cat, row in hits.items()
                for n in (row[0],)
            }
            if ranking in BASELINES:  # the same for every keying
                for other in keyings:
                    results[(other, ranking)] = results[(keying, ranking)]
        rankings = [r for r in rankings if r not in BASELINES]
    return results


def _ranker(index: RecallIndex, ranking: str, now: float):
    def rank(question: str) -> list[str]:
        qtokens = query_tokens(question)
        if ranking == "hybrid":
            found = hybrid.query(index, qtokens, frozenset(), max(KS), (), now)
        elif ranking == "semantic":
            found = _semantic(index, question, qtokens, max(KS), now)
        else:
            found = index.query_tokenized(qtokens, frozenset(), max(KS), (), now)
        return [h.id for h in found]

    return rank


# ------------------------------------------------- the semantic ranking (bench/semantic.py)
@functools.cache
def _model():
    from memoryapp.recall import embedding

    return embedding.load(embedding.DEFAULT)


def _with_vectors(ranking: str, records):
    """The records, with their int8 vectors (shipped model) for the semantic ranking."""
    if ranking != "semantic":
        return records
    from memoryapp.recall import vectors

    records = list(records)
    model = _model()
    texts = [vectors.text_of(r.title, r.content) for r in records]
    blobs = vectors.encode_many(model.embed(texts))
    return [IndexRecord(**{**r.__dict__, "vector": b}) for r, b in zip(records, blobs, strict=True)]


def _semantic(index: RecallIndex, question: str, qtokens, k: int, now: float):
    from memoryapp.recall import semantic

    qvec = _model().embed([question])[0]
    return semantic.query(index, qtokens, frozenset(), qvec, k, (), now)


# --------------------------------------------------------------------------- latency
def run_latency(sizes: list[int], rankings: list[str]) -> list[dict]:
    """Warm recall latency and index bytes at each size, on bench/corpus.py."""
    sys.path.insert(0, str(ROOT / "bench"))
    import corpus as corpus_module

    rows = []
    queries = corpus_module.make_queries()[:200]
    for n in sizes:
        corpus, _, _ = corpus_module.make_corpus(n)
        now = time.time()
        index = RecallIndex(
            IndexRecord(
                id=f"m{i:07d}",
                title=_GUARD.check(key, value)[1],
                content=value,
                tags=tuple(tags),
                keywords=tuple(extract_keywords(_GUARD.check(key, value)[1], value, tags)),
                updated_at=now - 3600.0 * (i % 2400),
            )
            for i, (key, value, tags) in enumerate(corpus)
        )
        prepared = [(query_tokens(q), path_hints(_messages(h))) for q, h in queries]
        for ranking in rankings:
            if ranking in BASELINES or ranking == "semantic":  # timed by bench/semantic.py
                continue
            run = _timed(index, ranking, now)
            for qt, hints in prepared:  # warm: every posting merged, every layout built
                run(qt, hints)
            times = sorted(t for _ in range(3) for qt, hints in prepared for t in [run(qt, hints)])
            rows.append(
                {
                    "memories": n,
                    "ranking": ranking,
                    "p50_ms": statistics.median(times) * 1e3,
                    "p95_ms": times[int(0.95 * len(times)) - 1] * 1e3,
                    "index_bytes": index.nbytes,
                }
            )
    return rows


def _messages(hints):
    return [{"role": "user", "content": " ".join(hints)}] if hints else None


def _timed(index: RecallIndex, ranking: str, now: float):
    def run(qtokens, hints) -> float:
        started = time.perf_counter()
        if ranking == "hybrid":
            hybrid.query(index, qtokens, hints, 5, (), now)
        else:
            index.query_tokenized(qtokens, hints, 5, (), now)
        return time.perf_counter() - started

    return run


# ---------------------------------------------------------------------------- report
def report(quality: dict, latency: list[dict], keyings: list[str], rankings: list[str]) -> str:
    """Markdown tables of the results."""
    lines = ["| keying | ranking | found@5 | found@10 | questions |", "|---|---|---|---|---|"]
    for keying in keyings:
        for ranking in rankings:
            row = quality[(keying, ranking)]["all"]
            lines.append(
                f"| {keying} | {ranking} | {row['found@5']:.3f} | {row['found@10']:.3f} "
                f"| {row['n']} |"
            )
    cats = sorted({c for r in quality.values() for c in r if c != "all"})
    lines += ["", "found@5 per category:", ""]
    lines.append("| keying | ranking | " + " | ".join(cats) + " |")
    lines.append("|---|---|" + "---|" * len(cats))
    for keying in keyings:
        for ranking in rankings:
            r = quality[(keying, ranking)]
            cells = [f"{r[c]['found@5']:.3f} ({r[c]['n']})" if c in r else "-" for c in cats]
            lines.append(f"| {keying} | {ranking} | " + " | ".join(cells) + " |")
    if latency:
        lines += [
            "",
            "| memories | ranking | p50 ms | p95 ms | index bytes |",
            "|---|---|---|---|---|",
        ]
        for row in latency:
            lines.append(
                f"| {row['memories']:,} | {row['ranking']} | {row['p50_ms']:.3f} "
                f"| {row['p95_ms']:.3f} | {row['index_bytes']:,} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Parse the arguments, run, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--keyings", default="ids,summary")
    parser.add_argument("--rankings", default="agentao,hybrid,semantic,bm25,bm25-stem")
    parser.add_argument("--latency-sizes", default="1000,100000")
    parser.add_argument("--quick", action="store_true", help="latency at 1,000 only")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--convert-locomo", nargs=2, type=Path, metavar=("IN", "OUT"))
    args = parser.parse_args()
    if args.convert_locomo:
        convert_locomo(*args.convert_locomo)
        return
    keyings = args.keyings.split(",")
    rankings = args.rankings.split(",")
    sizes = [1000] if args.quick else [int(s) for s in args.latency_sizes.split(",") if s]
    quality = run_quality(load(args.data), keyings, rankings)
    latency = run_latency(sizes, rankings)
    print(report(quality, latency, keyings, rankings))
    if args.json:
        raw = {"quality": {f"{k}/{r}": v for (k, r), v in quality.items()}, "latency": latency}
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
