"""SQLite's kept-row check: the pass over the owning tables vs over every table (issue #39).

Usage: .venv/bin/python bench/kept_bound.py [--memories 10000] [--receipts 3000]
       [--fragments 2000] [--rounds 3]

On SQLite the byte scan reads the whole file, and the kept-row check
(``memoryapp.compliance.kept.explained``) used to read every table of it when a found
fragment was not explained at once. It now reads the tables that own erased values
(``kept.OWNING_TABLES``). This fills a fresh SQLite file (bench/out/kept-bound.sqlite3)
with ``--memories`` memories (bench/corpus.py, seed 1234) over two namespaces, and a back
office's history beside them: ``--receipts`` erasure receipts (each listing 100 erased
ids, with its verification text) and as many export records. It then times the check on
``--fragments`` fragments no row holds (the full pass: the residue that stays, the
check's worst case) plus 20 taken from kept memories, bounded and unbounded, alternating,
``--rounds`` times each (bounded first in the first round, then the other way round), and
checks that both give the same answer. Nothing is warmed beforehand: the first round's
first pass reads a cold connection (the OS cache holds the file just written). Figures
are printed and appended to bench/out/kept_bound.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path

from benchlib import code_version, host_info, load_corpus_module  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
DB = OUT / "kept-bound.sqlite3"
SEED = 1234


def setup(url: str) -> None:
    """Django on a fresh, migrated SQLite file."""
    OUT.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(DB) + suffix).unlink()
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def fill(memories: int, receipts: int) -> list[str]:
    """The memories and the back office's records; returns the memories' contents."""
    from memoryapp.models import ErasureReceipt, ExportRecord, Memory

    corpus, _, _ = load_corpus_module().make_corpus(memories, SEED)
    rows = [
        Memory(
            namespace=f"acme/team{i % 2}",
            scope="project",
            type="note",
            key_normalized=f"k{i}",
            title=key[:200],
            content=value,
        )
        for i, (key, value, _tags) in enumerate(corpus)
    ]
    Memory.objects.bulk_create(rows, batch_size=2000)
    rng = random.Random(SEED)
    ErasureReceipt.objects.bulk_create(
        [
            ErasureReceipt(
                target_kind="subject",
                actor="dpo",
                erased_ids={"memories": [f"{rng.getrandbits(128):032x}" for _ in range(100)]},
                verification="SQL: 0 erased row(s) remain; byte scan: 1 file(s), none found",
                details={"outcome": "verified_by_byte_scan"},
                state="complete",
            )
            for _ in range(receipts)
        ],
        batch_size=500,
    )
    ExportRecord.objects.bulk_create(
        [
            ExportRecord(via="api", target_kind="subject", counts={"memories": 12})
            for _ in range(receipts)
        ],
        batch_size=500,
    )
    return [value for _key, value, _tags in corpus]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10000)
    parser.add_argument("--receipts", type=int, default=3000)
    parser.add_argument("--fragments", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup(f"sqlite:///{DB}")
    from django.db import DEFAULT_DB_ALIAS

    from memoryapp.compliance import kept

    contents = fill(args.memories, args.receipts)
    rng = random.Random(SEED + 1)
    absent = [f"zz-{rng.getrandbits(96):024x}".encode() for _ in range(args.fragments)]
    present = [c.encode()[:24] for c in rng.sample(contents, 20) if len(c.encode()) >= 24]
    pieces = absent + present
    times: dict[str, list[float]] = {"bounded": [], "every table": []}
    answers: dict[str, set[int]] = {}
    order = [("every table", True), ("bounded", False)]
    for _ in range(args.rounds):
        order.reverse()  # each goes first every other round: neither always reads a warm cache
        for name, every in order:
            started = time.perf_counter()
            answers[name] = kept.explained(DEFAULT_DB_ALIAS, pieces, (), every_table=every)
            times[name].append(time.perf_counter() - started)
    same = answers["bounded"] == answers["every table"]
    assert same and len(answers["bounded"]) == len(present), answers
    load = os.getloadavg()
    result = {
        "memories": args.memories,
        "receipts": args.receipts,
        "export_records": args.receipts,
        "fragments": len(pieces),
        "explained": len(answers["bounded"]),
        "seconds": {k: [round(t, 3) for t in v] for k, v in times.items()},
        "same_answer": same,
        "file_mib": round(DB.stat().st_size / 2**20, 1),
        "load_average": [round(x, 2) for x in load],
        "code": code_version(),
        "host": host_info(),
    }
    for name, values in times.items():
        print(f"{name:>12}: {min(values):.2f}–{max(values):.2f} s over {args.rounds} rounds")
    print(
        f"{len(pieces):,} fragments ({len(answers['bounded'])} explained) in a "
        f"{result['file_mib']} MiB file of {args.memories:,} memories and "
        f"{args.receipts:,} receipts + export records; same answer: {same}; "
        f"load {load[0]:.2f}"
    )
    with (OUT / "kept_bound.json").open("a") as fh:
        fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
