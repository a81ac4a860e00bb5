"""The other tenants' process during an erasure: recalls and upserts, every latency recorded.

Run by bench/erasure.py and bench/purge_methods.py as
``python bench/erasure_load.py OUT.json STOP_FILE NS [NS …]`` with ``DATABASE_URL`` set.
It warms each namespace (one recall builds or loads its recall index), writes a
``ready`` line to standard output, then loops until ``STOP_FILE`` exists: a recall
(``MemoryManager(project=ns).recall(query)``) and a ``save_memory`` in a namespace drawn
at random from ``NS``. Every operation is recorded as ``[start, seconds, kind, ok]``
(``start`` on ``time.time()``, so the parent can cut the list into its phases); ``ok`` is
False when ``save_memory`` reports an error or the recall counted one.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    out, stop, *namespaces = sys.argv[1:]
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from erasure_seed import queries

    from memoryapp import MemoryManager

    words = queries()
    managers = {ns: MemoryManager(project=ns) for ns in namespaces}
    for mm in managers.values():  # warm-up: each namespace's recall index is built once
        mm.recall(words[0])
    print("ready", flush=True)
    rng = random.Random(7)
    ops: list[list] = []
    n = 0
    parent = os.getppid()
    while not os.path.exists(stop) and os.getppid() == parent:  # never outlive the bench
        mm = managers[rng.choice(namespaces)]
        query = words[n % len(words)]
        errors = mm.recall_error_count
        started = time.time()
        t0 = time.perf_counter()
        mm.recall(query)
        ops.append([started, time.perf_counter() - t0, "recall", mm.recall_error_count == errors])
        started = time.time()
        t0 = time.perf_counter()
        said = mm.save_memory(f"load note {n % 500}", f"{query} — written by the load, turn {n}")
        ok = said.startswith("Saved memory")
        ops.append([started, time.perf_counter() - t0, "upsert", ok])
        n += 1
    Path(out).write_text(json.dumps(ops))


class Load:
    """The load process as a context manager: started and warmed on entry, stopped on exit.

    ``ops`` holds its operations once the block has ended.
    """

    def __init__(self, url: str, namespaces: list[str], workdir: Path) -> None:
        self.url, self.namespaces, self.workdir = url, namespaces, workdir
        self.ops: list[list] = []

    def __enter__(self) -> Load:
        import subprocess

        self.out = self.workdir / "load-ops.json"
        self.stop = self.workdir / "load-stop"
        for path in (self.out, self.stop):
            path.unlink(missing_ok=True)
        env = {**os.environ, "DATABASE_URL": self.url}
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(self.out), str(self.stop), *self.namespaces],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"load process failed to start: {line!r}")
        time.sleep(1.0)  # a second of steady state before the measured work
        return self

    def __exit__(self, *exc) -> None:
        import subprocess

        time.sleep(1.0)
        self.stop.write_text("stop")
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self.ops = json.loads(self.out.read_text()) if self.out.exists() else []


def summarize(ops: list[list], start: float | None = None, end: float | None = None) -> dict:
    """Longest operation, p99, count and errors of the operations started in [start, end)."""
    chosen = [
        op for op in ops if (start is None or op[0] >= start) and (end is None or op[0] < end)
    ]
    # An operation running when the window opened counts too: it is the one that stalls.
    if start is not None:
        chosen += [op for op in ops if op[0] < start < op[0] + op[1]]
    if not chosen:
        return {"ops": 0, "errors": 0, "max_ms": None, "p99_ms": None}
    durations = sorted(op[1] for op in chosen)
    p99 = durations[min(len(durations) - 1, int(round(0.99 * (len(durations) - 1))))]
    return {
        "ops": len(chosen),
        "errors": sum(1 for op in chosen if not op[3]),
        "max_ms": round(durations[-1] * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
    }


if __name__ == "__main__":
    main()
