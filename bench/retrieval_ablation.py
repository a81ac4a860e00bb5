"""Why ``hybrid`` trailed BM25 on conversations: its found@5 with each of its choices undone,
one at a time, on the shipped retrieval sets (issue #42, item 4).

Usage: python bench/retrieval_ablation.py [--data PATH ...] [--keying ids]

Each row changes one module-level setting of :mod:`memoryapp.recall.core.hybrid` for the run
(restored after): no stemming, question words as terms, ``b`` 0.75 (BM25's usual), no
recency term, no tag bonus. The BM25 baselines of bench/retrieval.py are run beside, in the
same process.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import retrieval  # noqa: E402

from memoryapp.recall.core import hybrid, stemming  # noqa: E402


@contextmanager
def _patched(target, name: str, value):
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


VARIANTS = [
    ("hybrid as shipped", None, None, None),
    ("no stemming (a word matches itself only)", stemming.StemForms, "forms",
     lambda self, token: (token,)),
    ("question words are terms", hybrid, "QUESTION_WORDS", frozenset()),
    ("b 0.75 (BM25's usual)", hybrid, "B", 0.75),
    ("no recency term", hybrid, "RECENCY", 0.0),
    ("no tag bonus", hybrid, "TAG_BONUS", 0.0),
]  # fmt: skip


def table(name: str, convs: list[dict], keying: str = "ids") -> str:
    """A markdown table: found@5 of each variant, then of the baselines, on one set."""
    lines = [f"#### {name} (keying {keying})", "", "| variant | found@5 |", "|---|---|"]
    for label, target, attr, value in VARIANTS:
        if target is None:
            found = retrieval.run_quality(convs, [keying], ["hybrid"])
        else:
            with _patched(target, attr, value):
                found = retrieval.run_quality(convs, [keying], ["hybrid"])
        lines.append(f"| {label} | {found[(keying, 'hybrid')]['all']['found@5']:.3f} |")
    base = retrieval.run_quality(convs, [keying], ["bm25", "bm25-stem"])
    for b in ("bm25", "bm25-stem"):
        lines.append(f"| baseline {b} | {base[(keying, b)]['all']['found@5']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    """Print one table per set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append")
    parser.add_argument("--keying", default="ids")
    args = parser.parse_args()
    for path in args.data or retrieval.SETS:
        print(table(path.stem, retrieval.load(path), args.keying), "\n")


if __name__ == "__main__":
    main()
