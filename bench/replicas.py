"""Recall from a streaming replica against recall from the primary, in one run (bench/REPLICAS.md).

    python bench/replicas.py [--quick] [--namespaces N] [--memories M] [--seconds S]

1. A database ``bench_replicas`` on the local primary (127.0.0.1:5432), migrated, with
   ``N`` namespaces x ``M`` memories imported through ``MemoryManager.import_memories``.
2. A hot standby of the cluster (``scripts/pg_standby.sh start PORT``), waited for until
   it has replayed the seed.
3. Latency, one process with ``DATABASE_REPLICA_URLS`` set to the standby: the same
   recalls alternately from the primary (``primary_reads()``) and from the replica, warm
   (every namespace's index built first, so a recall reads the slice counters and the
   hits' shown columns) and cold (the index dropped before each recall and snapshots off,
   so each recall rebuilds it from rows). p50/p99 of each.
4. Load, 4 worker processes recalling cold (index rebuilt from rows every time) for ``S``
   seconds, first with the replica configured, then without: the primary's and the
   standby's ``pg_stat_database`` counters for the bench database over each phase
   (transactions, rows returned, blocks read or hit), and recalls per second.
5. Erasure with the replica configured: ``E`` namespaces (seeded beside the others,
   ``--erase-memories`` each) erased one after another with ``erase(namespace=...)``,
   each timed from the call to the receipt *verified on every copy*
   (``details["outcome"] == "verified_by_byte_scan"``, the primary and ``replica_1``
   both byte-scanned), with each server's check time after the receipt's creation.
6. The standby dropped, the database dropped. The machine's load average is recorded
   before and after each phase.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402 - bench/ on sys.path first

DB = "bench_replicas"
PRIMARY = f"postgres://postgres@127.0.0.1:5432/{DB}"
SCRIPT = ROOT / "scripts" / "pg_standby.sh"
STATS = ("xact_commit", "tup_returned", "tup_fetched", "blks_hit", "blks_read")


def log(message: str) -> None:
    print(f"[replicas {time.strftime('%H:%M:%S')}] {message}", flush=True)


def namespace(i: int) -> str:
    return f"bench/tenant-{i:03d}"


def erased_namespace(i: int) -> str:
    return f"bench/erased-{i:03d}"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def pg(port: int = 5432, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(
        host="127.0.0.1", port=port, user="postgres", dbname=dbname, autocommit=True
    )


def django_env(replica_port: int | None, **extra: str) -> None:
    os.environ["DATABASE_URL"] = PRIMARY
    os.environ["DATABASE_REPLICA_URLS"] = (
        f"postgres://postgres@127.0.0.1:{replica_port}/{DB}" if replica_port else ""
    )
    os.environ["MEMORYAPP_REPLICA_MAX_LAG"] = "30"
    os.environ["MEMORYAPP_LOG_LEVEL"] = "WARNING"
    os.environ.update(extra)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


# ============================================================================ phases
def seed(args: argparse.Namespace) -> None:
    """Create, migrate and fill the bench database (a child process: Django once)."""
    with pg() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    benchlib.migrated_django(PRIMARY)
    from memoryapp import MemoryManager

    corpus = benchlib.load_corpus_module()
    for i in range(args.namespaces):
        triples, _, _ = corpus.make_corpus(args.memories, seed=1000 + i, n_extras=0)
        records = [{"key": k, "value": v, "tags": t} for k, v, t in triples]
        report = MemoryManager(project=namespace(i)).import_memories(
            enumerate(records, start=1), actor="bench-replicas"
        )
        assert report.created == len(records), report
    for i in range(args.erasures):  # erased in the last phase, never read before
        triples, _, _ = corpus.make_corpus(args.erase_memories, seed=5000 + i, n_extras=0)
        records = [{"key": k, "value": v, "tags": t} for k, v, t in triples]
        report = MemoryManager(project=erased_namespace(i)).import_memories(
            enumerate(records, start=1), actor="bench-replicas"
        )
        assert report.created == len(records), report


def _queries(count: int) -> list[tuple[str, list[str]]]:
    queries = benchlib.load_corpus_module().make_queries(seed=1234)
    return [(q, hints) for q, hints in queries[:count]]


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
    }


def latency(args: argparse.Namespace, port: int, out: Any) -> None:
    """Recall p50/p99 from the primary and from the replica, paired, in one process."""
    django_env(port, MEMORYAPP_RECALL_SNAPSHOTS="false")
    from django.db import connections

    from memoryapp import MemoryManager
    from memoryapp.db import read_your_writes
    from memoryapp.recall.cache import INDEXES

    counted = {"default": 0, "replica_1": 0}

    def counter(alias):
        def wrap(execute, sql, params, many, context):
            counted[alias] += 1
            return execute(sql, params, many, context)

        return wrap

    for alias in counted:
        connections[alias].execute_wrappers.append(counter(alias))
    managers = [MemoryManager(project=namespace(i)) for i in range(args.namespaces)]
    queries = _queries(args.queries)
    modes = {"primary": read_your_writes.primary_reads, "replica": contextlib.nullcontext}
    result: dict[str, Any] = {}
    for phase in ("warm", "cold"):
        samples: dict[str, list[float]] = {mode: [] for mode in modes}
        for mm in managers:  # every index built once (warm); the cold phase drops them
            mm.recall("warm up")
        before = dict(counted)
        for n, (query, hints) in enumerate(queries):
            mm = managers[n % len(managers)]
            order = list(modes) if n % 2 == 0 else list(reversed(modes))
            for mode in order:
                if phase == "cold":
                    INDEXES.clear()
                with modes[mode]():
                    started = time.perf_counter()
                    mm.recall(query, messages=benchlib.messages_for(hints))
                    samples[mode].append(time.perf_counter() - started)
        result[phase] = {mode: _percentiles(s) for mode, s in samples.items()}
        result[phase]["statements"] = {a: counted[a] - before[a] for a in counted}
    out.put(result)


def _worker(port: int | None, seconds: float, namespaces: int, seed_: int, out: Any) -> None:
    django_env(port, MEMORYAPP_RECALL_SNAPSHOTS="false")
    from memoryapp import MemoryManager
    from memoryapp.recall.cache import INDEXES

    queries = _queries(200)
    managers = [MemoryManager(project=namespace(i)) for i in range(namespaces)]
    done, n = 0, seed_
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        INDEXES.clear()  # cold: each recall rebuilds its namespace's index from rows
        query, hints = queries[n % len(queries)]
        managers[n % len(managers)].recall(query, messages=benchlib.messages_for(hints))
        done += 1
        n += 7
    out.put(done)


def erasures(args: argparse.Namespace, port: int, out: Any) -> None:
    """Each erasure's time to verified on every copy, the replica configured."""
    django_env(port, MEMORYAPP_ERASURE_PURGE_TIMEOUT="300", MEMORYAPP_REPLICA_REPLAY_WAIT="120")
    from memoryapp.compliance import erase
    from memoryapp.models import CopyCheck

    found = []
    for i in range(args.erasures):
        began = time.perf_counter()
        r = erase(namespace=erased_namespace(i), actor="bench-replicas")
        wall = time.perf_counter() - began
        rows = {c.server: c for c in CopyCheck.objects.filter(receipt=r)}
        found.append(
            {
                "namespace": erased_namespace(i),
                "counts": dict(r.counts or {}),
                "wall_s": round(wall, 3),
                "outcome": (r.details or {}).get("outcome"),
                "copies": [[c["server"], c["outcome"]] for c in r.details.get("copies", [])],
                "after_s": {
                    server: round((c.checked_at - r.created_at).total_seconds(), 3)
                    for server, c in rows.items()
                    if c.checked_at
                },
                "bytes": {server: c.facts.get("bytes") for server, c in rows.items()},
                "method": {server: c.method for server, c in rows.items()},
            }
        )
    out.put(found)


def db_stats(port: int) -> dict[str, int]:
    with pg(port) as conn:
        row = conn.execute(
            f"SELECT {', '.join(STATS)} FROM pg_stat_database WHERE datname = %s", [DB]
        ).fetchone()
    return dict(zip(STATS, (int(v) for v in row), strict=True))


def load(args: argparse.Namespace, port: int, use_replica: bool) -> dict[str, Any]:
    """4 workers recalling cold for ``args.seconds``; both servers' counters over the phase."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    before = {"primary": db_stats(5432), "standby": db_stats(port)}
    workers = [
        ctx.Process(
            target=_worker,
            args=(port if use_replica else None, args.seconds, args.namespaces, i, out),
        )
        for i in range(args.workers)
    ]
    started = time.perf_counter()
    for w in workers:
        w.start()
    recalls = 0
    for _ in workers:
        try:
            recalls += out.get(timeout=args.seconds + 300)
        except queue.Empty:
            raise SystemExit("a load worker failed (its traceback is above)") from None
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    time.sleep(1.5)  # backends report their counters at exit, at most once a second
    after = {"primary": db_stats(5432), "standby": db_stats(port)}
    return {
        "recalls": recalls,
        "recalls_per_s": round(recalls / args.seconds, 1),
        "elapsed_s": round(elapsed, 1),
        "per_s": {
            server: {k: round((after[server][k] - before[server][k]) / elapsed) for k in STATS}
            for server in before
        },
    }


# ====================================================================== orchestration
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def standby(action: str, port: int) -> None:
    env = {**os.environ, "PG_STANDBY_OWNER": str(os.getpid())}
    subprocess.run([str(SCRIPT), action, str(port)], check=True, env=env)


def wait_replayed(port: int) -> None:
    with pg() as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    deadline = time.monotonic() + 600
    while True:
        with pg(port) as conn:
            ok = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0", [lsn]
            ).fetchone()[0]
        if ok:
            return
        if time.monotonic() > deadline:
            raise SystemExit("the standby did not replay the seed")
        time.sleep(0.2)


def child(target, *args) -> Any:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=target, args=(*args, out))
    process.start()
    while True:  # a child that died (its traceback printed) must not leave us waiting
        with contextlib.suppress(queue.Empty):
            result = out.get(timeout=1)
            break
        if not process.is_alive():
            raise SystemExit(f"{target.__name__} failed (exit code {process.exitcode})")
    process.join()
    return result


def _seed_child(args, out) -> None:
    seed(args)
    out.put(True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (small, short)")
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--memories", type=int, default=2000, help="per namespace")
    parser.add_argument("--queries", type=int, default=200, help="paired recalls per phase")
    parser.add_argument("--seconds", type=float, default=20.0, help="each load phase")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--erasures", type=int, default=3, help="namespaces erased")
    parser.add_argument("--erase-memories", type=int, default=300, help="per erased namespace")
    parser.add_argument("--out", default=str(ROOT / "bench" / "REPLICAS.md"))
    args = parser.parse_args()
    if args.quick:
        args.namespaces, args.memories, args.queries, args.seconds = 4, 300, 40, 5.0
        args.erasures, args.erase_memories = 2, 100
    report: dict[str, Any] = {
        "args": vars(args),
        "host": benchlib.host_info(),
        "code": benchlib.code_version(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    log(f"seeding {args.namespaces} x {args.memories:,} memories")
    started = time.perf_counter()
    child(_seed_child, args)
    report["seed_s"] = round(time.perf_counter() - started, 1)
    port = free_port()
    log(f"standby on {port}")
    started = time.perf_counter()
    standby("start", port)
    try:
        wait_replayed(port)
        report["standby_s"] = round(time.perf_counter() - started, 1)
        loads = report["load_average"] = {"start": load_average()}
        log("latency: paired recalls, primary vs replica")
        report["latency"] = child(latency, args, port)
        loads["after latency"] = load_average()
        log(f"load: {args.workers} workers from the replica")
        report["load_replica"] = load(args, port, use_replica=True)
        loads["after load from the replica"] = load_average()
        log(f"load: {args.workers} workers from the primary")
        report["load_primary"] = load(args, port, use_replica=False)
        loads["after load from the primary"] = load_average()
        log(f"erasures: {args.erasures}, the replica configured")
        report["erasures"] = child(erasures, args, port)
        loads["after erasures"] = load_average()
    finally:
        standby("stop", port)
        with contextlib.suppress(psycopg.Error), pg() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    print(json.dumps(report, indent=2))
    Path(args.out).write_text(render(report), encoding="utf-8")
    log(f"written {args.out}")


def render(r: dict[str, Any]) -> str:
    a, lat = r["args"], r["latency"]
    lines = [
        "# Recall from a streaming replica vs from the primary",
        "",
        "What was warmed: in the **warm** latency rows, every namespace's recall index was "
        "built in the process before timing; the servers' caches were warm from the seed "
        "(imported just before) and the standby's from replaying it. Nothing was warmed for "
        "the **cold** rows or the load phases (every recall rebuilt its index from rows), "
        "nor for the erasures (their namespaces were never read before).",
        "",
        f"`make bench-replicas` (`bench/replicas.py{' --quick' if a.get('quick') else ''}`), "
        f"{r['started']}, commit "
        f"{r['code']['commit']}; {r['host']['cpu']}, {r['host']['cores']} cores. Primary: the "
        "local PostgreSQL 15 cluster; replica: a hot standby of it on the same machine "
        "(`scripts/pg_standby.sh`, streaming). Both servers share the machine's 2 cores with "
        "the benchmark, and with other work running on the machine at the time: figures "
        "are noisy, compare the two columns of one run rather than across runs.",
        "",
        f"Data: {a['namespaces']} namespaces x {a['memories']:,} memories (imported through "
        f"`MemoryManager.import_memories`, {r['seed_s']} s); the standby was made and had "
        f"replayed the seed after {r['standby_s']} s.",
        "",
        "## Recall latency, paired (one process, the same recalls)",
        "",
        "Each recall runs twice in a row, once reading the primary (`primary_reads()`) and "
        "once reading the replica, alternating which goes first. **Warm**: every "
        "namespace's index was built before timing (one recall per namespace), so a "
        "recall reads the slice counters and the hits' shown columns. **Cold**: the "
        "process's indexes are dropped before each recall and stored snapshots are off, "
        "so each recall rebuilds its namespace's index from rows.",
        "",
        "| phase | read from | recalls | p50 ms | p99 ms |",
        "|---|---|---:|---:|---:|",
    ]
    for phase in ("warm", "cold"):
        for mode in ("primary", "replica"):
            s = lat[phase][mode]
            lines.append(f"| {phase} | {mode} | {s['n']} | {s['p50_ms']} | {s['p99_ms']} |")
    lines += [
        "",
        "Statements per server over each phase (both modes): "
        + "; ".join(
            f"{phase}: primary {lat[phase]['statements']['default']:,}, replica "
            f"{lat[phase]['statements']['replica_1']:,}"
            for phase in ("warm", "cold")
        )
        + ". The primary's share in replica mode is the lag measurement "
        "(`pg_current_wal_lsn()`, at most once a second) and the primary-mode recalls.",
        "",
        f"## The primary's load while {a['workers']} workers recall",
        "",
        f"{a['workers']} processes recall cold (each recall rebuilds an index from rows) for "
        f"{a['seconds']:g} s, first with the replica configured, then without. Per second, "
        "from `pg_stat_database` of the bench database on each server:",
        "",
        "| workers read | recalls/s | server | xact_commit/s | tup_returned/s "
        "| tup_fetched/s | blks_hit/s | blks_read/s |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("load_replica", "the replica"), ("load_primary", "the primary")):
        phase = r[key]
        for server in ("primary", "standby"):
            p = phase["per_s"][server]
            lines.append(
                f"| {label} | {phase['recalls_per_s']} | {server} | {p['xact_commit']:,} | "
                f"{p['tup_returned']:,} | {p['tup_fetched']:,} | {p['blks_hit']:,} | "
                f"{p['blks_read']:,} |"
            )
    lines += render_erasures(r)
    lines += [
        "",
        "## Machine load",
        "",
        "Load average (1, 5, 15 min) of the 2-core machine at each point of the run: "
        + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in r["load_average"].items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def render_erasures(r: dict[str, Any]) -> list[str]:
    a = r["args"]
    lines = [
        "",
        "## Erasure: time to verified on every copy (one replica)",
        "",
        f"{a['erasures']} namespaces of {a['erase_memories']:,} memories each (seeded with "
        "the others, never read before), erased one after another with "
        "`erase(namespace=...)` while `DATABASE_REPLICA_URLS` names the standby. The call "
        "purges, byte-scans the primary, waits for the standby to replay the purge and "
        "byte-scans it; it returns with every copy's result. Each server's scan method is "
        "the one recorded on its copy check: `files` read its data directory from this "
        "machine (the bench runs beside both servers, as root), `sql` through "
        "`pg_read_binary_file`. **Verified on every copy** is "
        '`details["outcome"] == "verified_by_byte_scan"`.',
        "",
        "| namespace | call s | outcome | primary checked after s | replica checked after s "
        "| bytes scanned (primary / replica) | method (primary / replica) |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for e in r["erasures"]:
        after, scanned = e["after_s"], e["bytes"]
        lines.append(
            f"| {e['namespace']} | {e['wall_s']} | {e['outcome']} | {after.get('default', '-')} "
            f"| {after.get('replica_1', '-')} | {scanned.get('default')} / "
            f"{scanned.get('replica_1')} | {e['method'].get('default') or '-'} / "
            f"{e['method'].get('replica_1') or '-'} |"
        )
    walls = [e["wall_s"] for e in r["erasures"] if e["outcome"] == "verified_by_byte_scan"]
    if walls:
        lines += [
            "",
            f"Verified on every copy: {len(walls)} of {len(r['erasures'])}; time to verified "
            f"on every copy, median {statistics.median(walls):.2f} s, max {max(walls):.2f} s.",
        ]
    gaps = [
        e["after_s"]["replica_1"] - e["after_s"]["default"]
        for e in r["erasures"]
        if {"default", "replica_1"} <= set(e["after_s"])
    ]
    if gaps:
        lines.append(
            f"The replica's check was recorded a median {statistics.median(gaps):.2f} s after "
            "the primary's: the rest of the time is the primary's purge and its own check."
        )
    return lines


if __name__ == "__main__":
    main()
