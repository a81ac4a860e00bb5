"""Semantic ranking benchmark: calibration, found@k, warm latency, index bytes, write throughput.

Usage: .venv/bin/python bench/semantic.py [--data PATH] [--sizes 1000,100000]
       [--writes 300] [--import-rows 5000] [--rounds 5] [--skip quality,latency,writes]
       [--out bench/SEMANTIC.md] [--quick]

Quality (bench/retrieval.py's method on its shipped set and on
bench/data/semantic_paraphrase.json, 27 hand-written questions that paraphrase their answer
turns: each turn one memory, each question recalled with top_k=10; found@k = an evidence
turn among the first k): plain BM25 (the harness's baseline), ``hybrid``, and ``semantic``
with the shipped weights, beside the alternatives measured to choose them: other
lexical/similarity weights and floors, reciprocal-rank fusion (RRF, k=60) of hybrid's and
the similarity's rankings, and similarity alone.

Latency and bytes: warm recall p50/p95 (every query run once untimed first, then three
timed passes) of ``agentao``, ``hybrid`` and ``semantic`` over bench/corpus.py's queries at
each size, one namespace, and ``RecallIndex.nbytes`` with and without the vectors.

Writes: single ``MemoryManager.upsert`` calls and one bulk import into a fresh SQLite
database, in a child process each, with the embedder on (the shipped model) and off
(``MEMORYAPP_EMBEDDER=none``), the same texts, the same run: ``--rounds`` rounds, the two
modes alternating, and the median of the rounds' ratios (not a ratio of bests).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
import retrieval  # noqa: E402

from memoryapp.recall.core import embedding, hybrid, semantic, vectors  # noqa: E402
from memoryapp.recall.core.index import RecallIndex  # noqa: E402
from memoryapp.recall.core.scoring import IndexRecord  # noqa: E402
from memoryapp.recall.core.tokens import path_hints, query_tokens  # noqa: E402

_EMBEDDER: embedding.Embedder | None = None
# Hand-written paraphrase questions sharing few words with their answers (bench/data).
PARAPHRASE = ROOT / "bench" / "data" / "semantic_paraphrase.json"


def embedder() -> embedding.Embedder:
    """The shipped model, loaded once."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = embedding.load(embedding.DEFAULT)
    return _EMBEDDER


def with_vectors(records: list[IndexRecord]) -> list[IndexRecord]:
    """The records with their int8 vectors, as the store writes them."""
    texts = [vectors.text_of(r.title, r.content) for r in records]
    blobs = vectors.encode_many(embedder().embed(texts)) if texts else []
    return [IndexRecord(**{**r.__dict__, "vector": b}) for r, b in zip(records, blobs, strict=True)]


def semantic_ids(index: RecallIndex, question: str, k: int, now: float, **weights) -> list[str]:
    """The ids of the semantic ranking's top ``k`` (``weights`` override its constants)."""
    saved = {name: getattr(semantic, name) for name in weights}
    for name, value in weights.items():
        setattr(semantic, name, value)
    try:
        qvec = embedder().embed([question])[0]
        found = semantic.query(index, query_tokens(question), frozenset(), qvec, k, (), now)
    finally:
        for name, value in saved.items():
            setattr(semantic, name, value)
    return [h.id for h in found]


def _rrf(index: RecallIndex, question: str, k: int, now: float) -> list[str]:
    lexical = [h.id for h in hybrid.query(index, query_tokens(question), frozenset(), 50, (), now)]
    n = len(index._ids)
    qvec = vectors.query_form(embedder().embed([question])[0], index.arrays.vec.shape[1])
    sims = vectors.similarities(index.arrays.vec[:n], qvec)
    by_sim = [index._ids[s] for s in np.argsort(-sims)[:50] if sims[s] > semantic.FLOOR]
    score: dict[str, float] = {}
    for ranked in (lexical, by_sim):
        for r, i in enumerate(ranked):
            score[i] = score.get(i, 0.0) + 1.0 / (60 + r)
    return sorted(score, key=lambda i: -score[i])[:k]


def _sim_only(index: RecallIndex, question: str, k: int, now: float) -> list[str]:
    return semantic_ids(index, question, k, now, W_LEXICAL=0.0, W_SIMILARITY=1.0)


VARIANTS: dict = {
    "hybrid": lambda index, q, k, now: [
        h.id for h in hybrid.query(index, query_tokens(q), frozenset(), k, (), now)
    ],
    "semantic (0.3/0.7, floor 0.2: shipped)": lambda i, q, k, now: semantic_ids(i, q, k, now),
    "semantic 0.5/0.5, floor 0.2": lambda i, q, k, now: semantic_ids(
        i, q, k, now, W_LEXICAL=0.5, W_SIMILARITY=0.5
    ),
    "semantic 0.2/0.8, floor 0.2": lambda i, q, k, now: semantic_ids(
        i, q, k, now, W_LEXICAL=0.2, W_SIMILARITY=0.8
    ),
    "semantic 0.3/0.7, floor 0.1": lambda i, q, k, now: semantic_ids(i, q, k, now, FLOOR=0.1),
    "semantic 0.3/0.7, floor 0.3": lambda i, q, k, now: semantic_ids(i, q, k, now, FLOOR=0.3),
    "RRF(hybrid, similarity), k=60": _rrf,
    "similarity alone (floor 0.2)": _sim_only,
}


def run_quality(convs: list[dict], keying: str) -> dict[str, dict[str, float]]:
    """found@5/@10 of plain BM25 and of each variant, over every judged question."""
    now = time.time()
    counts = {name: [0, 0, 0] for name in ["bm25", *VARIANTS]}
    for conv in convs:
        turns = conv["turns"]
        records = [
            retrieval.record_of(t, keying, now - 60.0 * (len(turns) - i))
            for i, t in enumerate(turns)
        ]
        index = RecallIndex(with_vectors(records))
        bm25 = retrieval.BM25({t["id"]: f"{t['speaker']}: {t['text']}" for t in turns})
        for q in conv["questions"]:
            evidence = set(q.get("evidence") or ())
            if not evidence:
                continue
            for name in counts:
                if name == "bm25":
                    top = bm25.top(q["question"], 10)
                else:
                    top = VARIANTS[name](index, q["question"], 10, now)
                row = counts[name]
                row[0] += 1
                row[1] += bool(evidence.intersection(top[:5]))
                row[2] += bool(evidence.intersection(top[:10]))
    return {
        n: {"n": r[0], "found@5": r[1] / r[0], "found@10": r[2] / r[0]} for n, r in counts.items()
    }


def run_latency(sizes: list[int]) -> list[dict]:
    """Warm p50/p95 and index bytes per ranking and size (bench/corpus.py)."""
    import corpus as corpus_module

    queries = corpus_module.make_queries()[:200]
    rows = []
    for n in sizes:
        items, _, _ = corpus_module.make_corpus(n)
        now = time.time()
        records = [
            IndexRecord(
                id=f"m{i:07d}",
                title=key,
                content=value,
                tags=tuple(tags),
                updated_at=now - 3600.0 * (i % 2400),
            )  # fmt: skip
            for i, (key, value, tags) in enumerate(items)
        ]
        plain = RecallIndex(records)
        started = time.perf_counter()
        embedded = with_vectors(records)
        embed_seconds = time.perf_counter() - started
        rich = RecallIndex(embedded)
        del records, embedded
        prepared = [
            (q, query_tokens(q), path_hints(retrieval._messages(h)), embedder().embed([q])[0])
            for q, h in queries
        ]
        runs = _runs(plain, rich, now)
        for name, run in runs.items():
            # The garbage of the builds (100,000 records) is collected before, not during,
            # the timed passes: without this the first ranking timed paid for it.
            gc.collect()
            for args in prepared:
                run(*args)
            times = []
            for _ in range(3):
                for args in prepared:
                    t = time.perf_counter()
                    run(*args)
                    times.append(time.perf_counter() - t)
            times.sort()
            rows.append(
                {
                    "memories": n,
                    "ranking": name,
                    "p50_ms": statistics.median(times) * 1e3,
                    "p95_ms": times[int(0.95 * len(times)) - 1] * 1e3,
                    "index_bytes": (rich if name.startswith("semantic") else plain).nbytes,
                    "embed_seconds": embed_seconds,
                }
            )
        del plain, rich
    return rows


def _runs(plain: RecallIndex, rich: RecallIndex, now: float) -> dict:
    """One timed call per ranking: ``(query, tokens, hints, query vector)``."""
    return {
        "agentao": lambda q, qt, hi, qv: plain.query_tokenized(qt, hi, 5, (), now),
        "hybrid": lambda q, qt, hi, qv: hybrid.query(plain, qt, hi, 5, (), now),
        "semantic (query embedded beforehand)": lambda q, qt, hi, qv: semantic.query(
            rich, qt, hi, qv, 5, (), now
        ),
        "semantic (with the query's embedding)": lambda q, qt, hi, qv: semantic.query(
            rich, qt, hi, embedder().embed([q])[0], 5, (), now
        ),
    }


# ---------------------------------------------------------------------- write throughput
def write_worker(result: Path, writes: int, import_rows: int) -> None:
    """In a child process: single upserts, then one import, into a fresh database."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from memoryapp import MemoryManager, conf

    conf.embedder()  # the model's load is a start-up cost, not a write's
    texts = retrieval_texts()
    mm = MemoryManager(project="bench/writes")
    started = time.perf_counter()
    for i in range(writes):
        mm.upsert(f"single {i}", f"{texts[i % len(texts)]} ({i})")  # distinct texts
    single = writes / (time.perf_counter() - started)
    records = [
        (n, {"key": f"bulk {n}", "value": texts[n % len(texts)]}) for n in range(import_rows)
    ]
    started = time.perf_counter()
    MemoryManager(project="bench/import").import_memories(records, actor="bench")
    bulk = import_rows / (time.perf_counter() - started)
    result.write_text(json.dumps({"single_per_s": single, "import_per_s": bulk}))


def retrieval_texts() -> list[str]:
    """Realistic memory texts: the turns of the shipped retrieval set."""
    convs = retrieval.load(retrieval.DATA)
    return [f"{t['speaker']}: {t['text']}" for c in convs for t in c["turns"]]


def run_writes(writes: int, import_rows: int, rounds: int = 5) -> dict:
    """Write rates with the embedder off and on in ``rounds`` rounds of one child run each,
    the two modes alternating within a round (which goes first alternates too): the
    machine's load moves, and a ratio is taken only between runs a few seconds apart.

    Returns:
        ``{"rounds": [{"without": rates, "with": rates}, ...]}``, rates per second by key.
    """
    out: list[dict[str, dict[str, float]]] = []
    modes = [("without", "none"), ("with", embedding.DEFAULT)]
    for n in range(rounds):
        got: dict[str, dict[str, float]] = {}
        for mode, spec in modes if n % 2 == 0 else modes[::-1]:
            with tempfile.TemporaryDirectory() as tmp:
                result = Path(tmp) / "result.json"
                env = dict(
                    os.environ,
                    DATABASE_URL=f"sqlite:///{tmp}/writes.sqlite3",
                    MEMORYAPP_EMBEDDER=spec,
                    MEMORYAPP_LOG_LEVEL="WARNING",
                )
                command = [sys.executable, __file__, "--worker", str(result)]
                command += ["--writes", str(writes), "--import-rows", str(import_rows)]
                subprocess.run(command, env=env, check=True, cwd=ROOT)
                got[mode] = json.loads(result.read_text())
        out.append(got)
        print(f"round {n + 1}: {json.dumps(got)}", file=sys.stderr)
    return {"rounds": out}


# ---------------------------------------------------------------------------- report
def report(quality: dict, latency: list[dict], writes: dict, load: float) -> str:
    """The results as Markdown."""
    lines = [f"Machine load (1-min average) at the start: {load:.2f}; 2 cores.", ""]
    for keying, table in quality.items():
        bm25 = table["bm25"]["found@5"]
        lines += [
            f"Quality, {keying} ({table['bm25']['n']} questions):",
            "",
            "| ranking | found@5 | found@10 | found@5 / BM25 |",
            "|---|---|---|---|",
        ]
        for name, row in table.items():
            ratio = row["found@5"] / bm25 if bm25 else float("nan")
            lines.append(
                f"| {name} | {row['found@5']:.3f} | {row['found@10']:.3f} | {ratio:.2f}× |"
            )
        lines.append("")
    lines += [
        "| memories | ranking | p50 ms | p95 ms | index bytes | vs agentao |",
        "|---|---|---|---|---|---|",
    ]
    base = {r["memories"]: r["index_bytes"] for r in latency if r["ranking"] == "agentao"}
    for r in latency:
        lines.append(
            f"| {r['memories']:,} | {r['ranking']} | {r['p50_ms']:.3f} | {r['p95_ms']:.3f} "
            f"| {r['index_bytes']:,} | {r['index_bytes'] / base[r['memories']]:.2f}× |"
        )
    embeds = {r["memories"]: r["embed_seconds"] for r in latency}
    lines += [""] + [f"Embedding {n:,} memories: {s:.1f} s." for n, s in embeds.items()] + [""]
    if writes:
        rounds = writes["rounds"]
        lines += [
            f"Writes: {len(rounds)} rounds, each one child run per mode, the modes alternating.",
            "",
            "| writes | without /s (median) | with /s (median) | ratio per round | median ratio |",
            "|---|---|---|---|---|",
        ]
        for key, label in (("single_per_s", "single upserts"), ("import_per_s", "bulk import")):
            a = statistics.median(r["without"][key] for r in rounds)
            b = statistics.median(r["with"][key] for r in rounds)
            ratios = [r["with"][key] / r["without"][key] for r in rounds]
            each = ", ".join(f"{x:.2f}" for x in ratios)
            lines.append(
                f"| {label} | {a:,.0f} | {b:,.0f} | {each} | {statistics.median(ratios):.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    """Parse the arguments, run, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", default=f"{retrieval.DATA},{PARAPHRASE}", help="comma-separated data sets"
    )
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--import-rows", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5, help="write rounds (modes alternating)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "SEMANTIC.md")
    parser.add_argument("--skip", default="", help="comma-separated: quality,latency,writes")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a first look: 1,000 memories, no quality, 300 writes and a 2,000-row import in"
        " 3 rounds; prints only (bench/SEMANTIC.md is hand-edited from full runs)",
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.writes, args.import_rows, args.rounds = "1000", 300, 2000, 3
        args.skip = ",".join(filter(None, (args.skip, "quality")))
    if args.worker:
        write_worker(args.worker, args.writes, args.import_rows)
        return
    skip = set(args.skip.split(","))
    load = os.getloadavg()[0]
    quality = {}
    if "quality" not in skip:
        for path in map(Path, args.data.split(",")):
            convs = retrieval.load(path)
            for keying in ("ids", "summary"):
                quality[f"{path.name}, keying {keying}"] = run_quality(convs, keying)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    latency = [] if "latency" in skip else run_latency(sizes)
    writes = {} if "writes" in skip else run_writes(args.writes, args.import_rows, args.rounds)
    text = report(quality, latency, writes, load)
    print(text)
    if not args.quick:
        args.out.write_text("# Semantic ranking (bench/semantic.py)\n\n" + text + "\n")


if __name__ == "__main__":
    main()
