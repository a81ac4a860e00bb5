"""Retrieval benchmark: does recall find the turn that answers a question?

Usage: .venv/bin/python bench/retrieval.py [--data PATH ...] [--locomo LOCOMO_JSON ...]
       [--keyings ids,summary] [--rankings agentao,hybrid,semantic,bm25,bm25-stem]
       [--latency-sizes 1000,100000] [--cold-tenants 300] [--quick]
       [--ablation] [--markdown PATH] [--json PATH]

Without ``--data`` it runs the three shipped sets: ``retrieval_small.json``
(bench/retrieval_data.py), ``retrieval_hard.json`` and ``retrieval_locomo_shaped.json``
(bench/retrieval_sets.py). ``--locomo FILE`` reads a LoCoMo-format file (``locomo10.json``'s
layout, below) directly; none is shipped or downloaded. The rankings compared are the list
:data:`RANKERS` (name, ranker factory, keyed): adding one is one line. Then the warm
latency (below) and a cold worker over ``--cold-tenants`` tenants
(bench/retrieval_cold.py). Every figure of one invocation comes from that one run; the
footer gives the machine's load average before and after.

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
and put in a :class:`~memoryapp.recall.core.index.RecallIndex` (the per-namespace index the
recall of every entry point runs on; the database only adds the reading of the hits'
columns). Each question is recalled with ``top_k=10`` under ``agentao`` (the exact
formula) and ``hybrid`` (:mod:`memoryapp.recall.core.hybrid`); ``bm25`` is plain Okapi BM25
(k1 1.5, b 0.75, idf ``ln(1 + (N − df + 0.5) / (df + 0.5))``) computed here over the
same contents, lower-cased ``\\w+`` words minus the recall stop words; ``bm25-stem`` is
the same over the words' English Snowball stems. A question is
found at k when one of its evidence turns is among the first k hits.

Latency: recall p50/p95 of ``agentao`` and ``hybrid`` over the queries of
``bench/corpus.py`` (the corpus of the other recall benchmarks) at each of
``--latency-sizes`` memories in one namespace, warm (index built, every query run once
untimed first), and the index's :attr:`~memoryapp.recall.core.index.RecallIndex.nbytes`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryapp.recall.core import hybrid  # noqa: E402
from memoryapp.recall.core.index import RecallIndex  # noqa: E402
from memoryapp.recall.core.scoring import IndexRecord  # noqa: E402
from memoryapp.recall.core.stemming import stem  # noqa: E402
from memoryapp.recall.core.tokens import STOP_WORDS, path_hints, query_tokens  # noqa: E402
from memoryapp.rules.classify import extract_keywords  # noqa: E402
from memoryapp.rules.guard import MemoryGuard  # noqa: E402

DATA = ROOT / "bench" / "data" / "retrieval_small.json"
KS = (5, 10)
SUMMARY_WORDS = 8
_GUARD = MemoryGuard()
_WORD = re.compile(r"\w+")
# The harness's own baselines (not recall rankings): plain BM25, and BM25 over Snowball stems.
BASELINES = ("bm25", "bm25-stem")
SETS = [DATA, DATA.with_name("retrieval_hard.json"), DATA.with_name("retrieval_locomo_shaped.json")]


# ----------------------------------------------------------------------------- the data
def load(path: Path) -> list[dict]:
    """The conversations of a data set in the layout above."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["conversations"]


def locomo_conversations(samples: list[dict]) -> list[dict]:
    """LoCoMo's samples (``locomo10.json``'s list) as this benchmark's conversations."""
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
    return out


def convert_locomo(source: Path, target: Path) -> None:
    """Write LoCoMo's ``locomo10.json`` in this benchmark's layout."""
    samples = json.loads(source.read_text(encoding="utf-8"))
    out = locomo_conversations(samples)
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


# -------------------------------------------------------------------------- rankers
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
    from memoryapp.recall.core import embedding

    return embedding.load(embedding.DEFAULT)


def _with_vectors(ranking: str, records):
    """The records, with their int8 vectors (shipped model) for the semantic ranking."""
    if ranking != "semantic":
        return records
    from memoryapp.recall.core import vectors

    records = list(records)
    texts = [vectors.text_of(r.title, r.content) for r in records]
    blobs = vectors.encode_many(_model().embed(texts))
    return [IndexRecord(**{**r.__dict__, "vector": b}) for r, b in zip(records, blobs, strict=True)]


def _semantic(index: RecallIndex, question: str, qtokens, k: int, now: float):
    from memoryapp.recall.core import semantic

    qvec = _model().embed([question])[0]
    return semantic.query(index, qtokens, frozenset(), qvec, k, (), now)


# A ranker: (turns of one conversation, keying, now) -> rank(question) -> ids, best first.
def _recall_ranker(ranking: str):
    def make(turns: list[dict], keying: str, now: float):
        index = RecallIndex(
            _with_vectors(
                ranking,
                (record_of(t, keying, now - 60.0 * (len(turns) - i)) for i, t in enumerate(turns)),
            )
        )
        return _ranker(index, ranking, now)

    return make


def _bm25_ranker(stemmed: bool):
    def make(turns: list[dict], keying: str, now: float):
        bm25 = BM25({t["id"]: f"{t['speaker']}: {t['text']}" for t in turns}, stemmed=stemmed)
        return lambda q: bm25.top(q, max(KS))

    return make


#: The rankings compared, in report order: (name, ranker factory, keyed). A new ranking is
#: one line here; ``keyed`` False: it ignores the memory key (one run serves every keying).
RANKERS = [
    ("agentao", _recall_ranker("agentao"), True),
    ("hybrid", _recall_ranker("hybrid"), True),
    ("semantic", _recall_ranker("semantic"), True),
    ("bm25", _bm25_ranker(False), False),
    ("bm25-stem", _bm25_ranker(True), False),
]


# -------------------------------------------------------------------------- found@k
def run_quality(convs: list[dict], keyings: list[str], rankings: list[str]) -> dict:
    """found@k per (keying, ranking), overall and per category."""
    results: dict = {}
    now = time.time()
    factories = {name: (make, keyed) for name, make, keyed in RANKERS}
    for ranking in rankings:
        make, keyed = factories[ranking]
        for keying in keyings if keyed else keyings[:1]:
            hits: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # n, @5, @10
            for conv in convs:
                rank = make(conv["turns"], keying, now)
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
            found = {
                cat: {"n": row[0], **{f"found@{k}": row[1 + j] / row[0] for j, k in enumerate(KS)}}
                for cat, row in hits.items()
            }
            for each in keyings if not keyed else [keying]:
                results[(each, ranking)] = found
    return results


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
            if ranking not in hybrid.RANKINGS:  # a harness baseline: no recall index
                continue
            if ranking == "semantic":  # its warm latency is timed by bench/semantic.py
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
                    "p99_ms": times[int(0.99 * len(times)) - 1] * 1e3,
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
def report(name: str, quality: dict, keyings: list[str], rankings: list[str]) -> str:
    """Markdown tables of one set's found@k, and hybrid's ratio to the BM25 baselines."""
    lines = [f"### {name}", "", "| keying | ranking | found@5 | found@10 | questions |"]
    lines.append("|---|---|---|---|---|")
    for keying in keyings:
        for ranking in rankings:
            row = quality[(keying, ranking)]["all"]
            lines.append(
                f"| {keying} | {ranking} | {row['found@5']:.3f} | {row['found@10']:.3f} "
                f"| {row['n']} |"
            )
    if "hybrid" in rankings:
        lines.append("")
        for keying in keyings:
            ours = quality[(keying, "hybrid")]["all"]["found@5"]
            for base in (r for r in rankings if r in BASELINES):
                theirs = quality[(keying, base)]["all"]["found@5"]
                ratio = f"{ours / theirs:.3f}" if theirs else "n/a (baseline 0)"
                lines.append(f"- {keying}: hybrid / {base} at found@5 = {ratio}")
    cats = sorted({c for r in quality.values() for c in r if c != "all"})
    lines += ["", "found@5 per category (questions):", ""]
    lines.append("| keying | ranking | " + " | ".join(cats) + " |")
    lines.append("|---|---|" + "---|" * len(cats))
    for keying in keyings:
        for ranking in rankings:
            r = quality[(keying, ranking)]
            cells = [f"{r[c]['found@5']:.3f} ({r[c]['n']})" if c in r else "-" for c in cats]
            lines.append(f"| {keying} | {ranking} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_latency(latency: list[dict], cold: dict | None) -> str:
    """Markdown tables of the warm latencies and the cold worker."""
    lines = ["### Warm recall latency", ""]
    lines += ["| memories | ranking | p50 ms | p95 ms | p99 ms | index bytes |"]
    lines.append("|---|---|---|---|---|---|")
    for row in latency:
        lines.append(
            f"| {row['memories']:,} | {row['ranking']} | {row['p50_ms']:.3f} "
            f"| {row['p95_ms']:.3f} | {row['p99_ms']:.3f} | {row['index_bytes']:,} |"
        )
    if cold:
        lines += ["", "### Cold worker (hybrid)", ""]
        lines.append(
            f"{cold['tenants']} tenants × {cold['memories']:,} memories, fresh process: first "
            f"recall per tenant (snapshot load + query) p50 {cold['cold_p50_ms']:.3f} ms, "
            f"p99 {cold['cold_p99_ms']:.3f} ms; one tenant warm p50 {cold['warm_p50_ms']:.3f} "
            f"ms, p99 {cold['warm_p99_ms']:.3f} ms; cold p99 / warm p99 = "
            f"{cold['ratio_p99']:.2f} (mean snapshot {cold['snapshot_bytes_mean']:,.0f} bytes)."
        )
    return "\n".join(lines)


def main() -> None:
    """Parse the arguments, run, print the tables (and write them with ``--markdown``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append", help="a set (repeatable)")
    parser.add_argument("--locomo", type=Path, action="append", help="a LoCoMo-format file")
    parser.add_argument("--keyings", default="ids,summary")
    parser.add_argument("--rankings", default=",".join(name for name, _, _ in RANKERS))
    parser.add_argument("--latency-sizes", default="1000,100000")
    parser.add_argument("--quick", action="store_true", help="latency at 1,000, 30 tenants")
    parser.add_argument("--cold-tenants", type=int, default=300, help="0: no cold run")
    parser.add_argument("--ablation", action="store_true", help="bench/retrieval_ablation.py too")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--convert-locomo", nargs=2, type=Path, metavar=("IN", "OUT"))
    args = parser.parse_args()
    if args.convert_locomo:
        convert_locomo(*args.convert_locomo)
        return
    keyings = args.keyings.split(",")
    rankings = args.rankings.split(",")
    sizes = [1000] if args.quick else [int(s) for s in args.latency_sizes.split(",") if s]
    sets = [(p.stem, load(p)) for p in args.data or ([] if args.locomo else SETS)]
    for path in args.locomo or ():
        samples = json.loads(path.read_text(encoding="utf-8"))
        sets.append((f"{path.stem} (LoCoMo)", locomo_conversations(samples)))
    started = time.time()
    load_before = os.getloadavg()
    out, raw = [], {"quality": {}, "latency": [], "cold": None}
    for name, convs in sets:
        quality = run_quality(convs, keyings, rankings)
        raw["quality"][name] = {f"{k}/{r}": v for (k, r), v in quality.items()}
        out.append(report(name, quality, keyings, rankings))
        print(out[-1], "\n", flush=True)
    if args.ablation:
        sys.path.insert(0, str(ROOT / "bench"))
        import retrieval_ablation

        parts = ["### Ablation: hybrid with one choice undone"]
        parts += [retrieval_ablation.table(name, convs, keyings[0]) for name, convs in sets]
        out.append("\n\n".join(parts))
        print(out[-1], "\n", flush=True)
    raw["latency"] = run_latency(sizes, rankings)
    tenants = min(args.cold_tenants, 30) if args.quick else args.cold_tenants
    if tenants and "hybrid" in rankings:
        sys.path.insert(0, str(ROOT / "bench"))
        import retrieval_cold

        raw["cold"] = retrieval_cold.parent(tenants, 1000)
    out.append(report_latency(raw["latency"], raw["cold"]))
    print(out[-1])
    load_after = os.getloadavg()
    footer = (
        f"\nRun {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))}-"
        f"{time.strftime('%H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, load average "
        f"{load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f} before, "
        f"{load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f} after."
    )
    print(footer)
    if args.markdown:
        args.markdown.write_text("\n\n".join(out) + "\n" + footer + "\n")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
