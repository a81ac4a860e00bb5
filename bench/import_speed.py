"""Bulk-import speed: ``MemoryManager.import_memories`` over the JSON lines of the bench corpus.

Usage: .venv/bin/python bench/import_speed.py [--sizes 20000,100000]
       [--vendors sqlite,postgresql] [--runs 1] [--label after] [--profile] [--reimport]

The path measured is the one of ``manage.py memory import FILE``: the file is read line by
line through ``memoryapp.writes.bulk.parse_json_lines`` and imported into a fresh, migrated
database (a file under bench/out/ for SQLite, with project/settings.py's options; a fresh
database on postgres://postgres@127.0.0.1:5432 for PostgreSQL). Each (vendor, N, run) runs
in its own interpreter. The corpus is ``bench/corpus.py`` ``make_corpus(n,
seed=1234)``, cached as JSON lines (the format of bench/recall.py) under
bench/out/import_corpus/. Prints the figures and writes them to bench/out/import_speed.json
(one entry per label, so a "before" and an "after" run sit side by side). ``--profile``
runs the import under cProfile and prints the top functions instead of timing it cleanly;
``--reimport`` then imports the same file again (every row an update) and times that too.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import load_corpus_module  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
CORPUS_DIR = OUT / "import_corpus"
RESULTS_JSON = OUT / "import_speed.json"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_BASE_URL = "postgres://postgres@127.0.0.1:5432/"
SEED = 1234
NAMESPACE = "bench/import"


def log(message: str) -> None:
    print(message, flush=True)


def corpus_file(n: int) -> Path:
    return CORPUS_DIR / f"n{n}.jsonl"


def prepare_corpora(sizes: list[int]) -> None:
    """Write ``n{N}.jsonl`` per size (a smaller corpus is a prefix of a larger one)."""
    missing = [n for n in sizes if not corpus_file(n).exists()]
    if not missing:
        return
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    corpus, _, _ = load_corpus_module().make_corpus(max(missing), seed=SEED)
    for n in missing:
        tmp = corpus_file(n).with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for key, value, tags in corpus[:n]:
                f.write(json.dumps({"key": key, "value": value, "tags": tags}) + "\n")
        tmp.rename(corpus_file(n))
    elapsed = time.perf_counter() - started
    log(f"corpus: {', '.join(map(str, missing))} rows ready in {elapsed:.1f} s")


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def sqlite_path(tag: str) -> Path:
    return OUT / f"import-{tag}.sqlite3"


def pg_name(tag: str) -> str:
    return "memoryapp_import_" + tag.replace("-", "_")


def create_database(vendor: str, tag: str) -> str:
    """A fresh database for one run; returns its DATABASE_URL."""
    if vendor == "sqlite":
        drop_database(vendor, tag)
        return f"sqlite:///{sqlite_path(tag)}"
    name = pg_name(tag)
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')
    return PG_BASE_URL + name


def drop_database(vendor: str, tag: str) -> None:
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(sqlite_path(tag)) + suffix).unlink()
    else:
        with contextlib.suppress(Exception):
            pg_admin(f'DROP DATABASE IF EXISTS "{pg_name(tag)}" WITH (FORCE)')


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Migrate the fresh database, then import the corpus once (timed or profiled)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("MEMORYAPP_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from django.db import connection

    from memoryapp import MemoryManager
    from memoryapp.writes.bulk import parse_json_lines

    mm = MemoryManager(project=NAMESPACE)
    profiler = cProfile.Profile() if args.profile else None
    load = os.getloadavg()[0]
    server = _server_process(connection)
    server_cpu = _process_cpu(server)
    started, cpu = time.perf_counter(), time.process_time()
    with open(corpus_file(args.n), encoding="utf-8") as f:
        if profiler is not None:
            profiler.enable()
        report = mm.import_memories(parse_json_lines(f), actor="bench")
        if profiler is not None:
            profiler.disable()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    server_cpu = _process_cpu(server) - server_cpu
    assert report.created == args.n and not report.invalid, report
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM memories")
        (rows,) = cursor.fetchone()
        cursor.execute("SELECT COUNT(*) FROM memory_events")
        (events,) = cursor.fetchone()
    assert rows == events == args.n, (rows, events)
    reimport: dict[str, Any] = {}
    if args.reimport:  # the same file again: every row an update of a live row
        started, cpu_again = time.perf_counter(), time.process_time()
        with open(corpus_file(args.n), encoding="utf-8") as f:
            again = mm.import_memories(parse_json_lines(f), actor="bench")
        wall_again = time.perf_counter() - started
        cpu_again = time.process_time() - cpu_again
        assert again.updated == args.n, again
        reimport = {
            "reimport_wall_s": round(wall_again, 3),
            "reimport_rows_per_s": round(args.n / wall_again),
            "reimport_cpu_us_per_row": round(1e6 * cpu_again / args.n, 1),
        }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(35)
        log(text.getvalue())
    return {
        "wall_s": round(elapsed, 3),
        "cpu_s": round(cpu, 3),
        "rows_per_s": round(args.n / elapsed),
        "cpu_us_per_row": round(1e6 * cpu / args.n, 1),
        # The database server's process too (PostgreSQL; SQLite runs in this one): on a
        # loaded machine the CPU per row says more than the wall clock.
        "server_cpu_s": round(server_cpu, 3),
        "total_cpu_us_per_row": round(1e6 * (cpu + server_cpu) / args.n, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_start": round(load, 2),
        "load_end": round(os.getloadavg()[0], 2),
        **reimport,
    }


def _server_process(connection) -> int | None:
    """The PostgreSQL backend serving ``connection`` (a local server), else None."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    return pid if Path(f"/proc/{pid}/stat").exists() else None


def _process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 without one)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_worker(vendor: str, n: int, run: int, profile: bool, reimport: bool) -> dict[str, Any]:
    tag = f"{vendor}-{n}-{run}-{os.getpid()}"
    env = dict(os.environ, DATABASE_URL=create_database(vendor, tag))
    try:
        with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
            command = [sys.executable, __file__, "--worker", "--n", str(n), "--result", f.name]
            command += ["--profile"] if profile else []
            command += ["--reimport"] if reimport else []
            subprocess.run(command, env=env, check=True, cwd=ROOT)
            return json.loads(Path(f.name).read_text())
    finally:
        drop_database(vendor, tag)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--vendors", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--label", default="current")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--reimport", action="store_true", help="then import the file again")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        Path(args.result).write_text(json.dumps(worker(args)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    vendors = args.vendors.split(",")
    prepare_corpora(sizes)
    figures: dict[str, Any] = {}
    for vendor in vendors:
        for n in sizes:
            runs = [
                run_worker(vendor, n, run, args.profile, args.reimport) for run in range(args.runs)
            ]
            best = min(runs, key=lambda r: r["wall_s"])
            figures[f"{vendor}/{n}"] = {"best": best, "runs": runs}
            log(
                f"[{args.label}] {vendor:10} N={n:>7,}: {best['rows_per_s']:>6,} rows/s "
                f"(wall {best['wall_s']:.2f} s, CPU {best['cpu_s']:.2f} s = "
                f"{best['cpu_us_per_row']:.0f} µs/row, with the server's "
                f"{best['total_cpu_us_per_row']:.0f} µs/row, RSS {best['peak_rss_mb']:.0f} MiB, "
                f"load {best['load_start']:.1f})"
            )
            if args.reimport:
                log(
                    f"[{args.label}] {vendor:10} N={n:>7,}: re-import (updates) "
                    f"{best['reimport_rows_per_s']:>6,} rows/s "
                    f"(CPU {best['reimport_cpu_us_per_row']:.0f} µs/row)"
                )
    if args.profile:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    results = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}
    results[args.label] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(),
        "figures": figures,
    }
    RESULTS_JSON.write_text(json.dumps(results, indent=2) + "\n")
    log(f"written to {RESULTS_JSON.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
