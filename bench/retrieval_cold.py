"""A cold worker over many tenants, hybrid ranking (part of bench/retrieval.py).

Usage: python bench/retrieval_cold.py [--tenants 300] [--memories 1000]

The parent builds ``--tenants`` namespaces of ``--memories`` memories each (bench/corpus.py,
seed 1000 + tenant: every tenant its own texts and queries), dumps each index as the recall
snapshot the store keeps (:func:`memoryapp.recall.core.snapshot.dump`) into a temporary
directory, then starts a **fresh Python process** that:

1. imports the code and reads every snapshot's bytes into memory (what was warm: the
   modules, and the bytes, which a worker fetches from ``memory_recall_snapshots``: that
   fetch is not timed here; bench/TENANTS.md measures it through the database);
2. for each tenant in turn, times its **first recall**: loading its index from the
   snapshot bytes, then ``hybrid.query`` of the tenant's first query with its path hints
   (top_k 5). Nothing of that tenant was in memory; the process-wide stem cache is
   warmed only by the tenants before it, as in a real worker;
3. then takes one tenant (the first) **warm**: its 200 queries once untimed, then 3 timed
   passes; p50 / p95 / p99.

It prints JSON: the cold p50 / p99 and the warm p50 / p99, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from memoryapp.recall.core import hybrid, snapshot  # noqa: E402
from memoryapp.recall.core.index import RecallIndex  # noqa: E402
from memoryapp.recall.core.scoring import IndexRecord  # noqa: E402
from memoryapp.recall.core.tokens import path_hints, query_tokens  # noqa: E402
from memoryapp.rules.classify import extract_keywords  # noqa: E402
from memoryapp.rules.guard import MemoryGuard  # noqa: E402

_GUARD = MemoryGuard()


def _pct(times: list[float], q: float) -> float:
    times = sorted(times)
    return times[max(int(q * len(times)) - 1, 0)] * 1e3


def _build(tenant: int, memories: int, now: float) -> tuple[RecallIndex, list]:
    import corpus as corpus_module

    corpus, _, queries = corpus_module.make_corpus(memories, seed=1000 + tenant)
    records = []
    for i, (key, value, tags) in enumerate(corpus):
        title = _GUARD.check(key, value)[1]
        records.append(
            IndexRecord(
                id=f"t{tenant}m{i:05d}",
                title=title,
                content=value,
                tags=tuple(tags),
                keywords=tuple(extract_keywords(title, value, tags)),
                updated_at=now - 3600.0 * (i % 2400),
            )
        )
    return RecallIndex(records), queries[:200]


def _prepared(queries: list) -> list:
    messages = lambda h: [{"role": "user", "content": " ".join(h)}] if h else None  # noqa: E731
    return [(query_tokens(q), path_hints(messages(h))) for q, h in queries]


def parent(tenants: int, memories: int) -> dict:
    """Build and dump the tenants, run the fresh child, return its figures."""
    now = time.time()
    with tempfile.TemporaryDirectory(prefix="retrieval-cold-") as tmp:
        for t in range(tenants):
            index, queries = _build(t, memories, now)
            data = snapshot.dump(index)
            if data is None:
                raise RuntimeError(f"tenant {t}: the index has no snapshot")
            Path(tmp, f"t{t:04d}.snap").write_bytes(data)
            Path(tmp, f"t{t:04d}.json").write_text(json.dumps(queries))
        out = subprocess.run(
            [sys.executable, __file__, "--child", tmp, "--now", repr(now)],
            check=True,
            capture_output=True,
            text=True,
        )
    result = json.loads(out.stdout)
    result.update(tenants=tenants, memories=memories)
    return result


def child(folder: Path, now: float) -> dict:
    """The fresh process: first recall per tenant, then one tenant warm."""
    blobs = [p.read_bytes() for p in sorted(folder.glob("t*.snap"))]
    queries = [json.loads(p.read_text()) for p in sorted(folder.glob("t*.json"))]
    first = [_prepared(q[:1])[0] for q in queries]  # tokenised outside the timing
    cold, indexes = [], []
    for blob, (qtokens, hints) in zip(blobs, first, strict=True):
        started = time.perf_counter()
        index = snapshot.load(blob)
        hybrid.query(index, qtokens, hints, 5, (), now)
        cold.append(time.perf_counter() - started)
        indexes.append(index)
    warm_index, prepared = indexes[0], _prepared(queries[0])
    for qtokens, hints in prepared:
        hybrid.query(warm_index, qtokens, hints, 5, (), now)
    warm = []
    for _ in range(3):
        for qtokens, hints in prepared:
            started = time.perf_counter()
            hybrid.query(warm_index, qtokens, hints, 5, (), now)
            warm.append(time.perf_counter() - started)
    return {
        "cold_p50_ms": statistics.median(cold) * 1e3,
        "cold_p99_ms": _pct(cold, 0.99),
        "warm_p50_ms": statistics.median(warm) * 1e3,
        "warm_p99_ms": _pct(warm, 0.99),
        "ratio_p99": _pct(cold, 0.99) / _pct(warm, 0.99),
        "snapshot_bytes_mean": statistics.mean(map(len, blobs)),
    }


def main() -> None:
    """Parent or child, by the arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=300)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--now", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.now)))
    else:
        print(json.dumps(parent(args.tenants, args.memories), indent=1))


if __name__ == "__main__":
    main()
