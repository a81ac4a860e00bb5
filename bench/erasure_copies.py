"""An erasure's time to *verified on every copy*, with one replica (bench/ERASURE_COPIES.md).

    python bench/erasure_copies.py [--quick] [--namespaces N] [--memories M] [--erasures K]

1. A database ``bench_copies`` on the local primary (127.0.0.1:5432), migrated, with ``N``
   namespaces x ``M`` memories (each a few hundred bytes, so the scan has pages to read).
2. A hot standby of the cluster (``scripts/pg_standby.sh start PORT``), waited for until it
   has replayed the seed; ``DATABASE_REPLICA_URLS`` names it (alias ``replica_1``).
3. ``K`` namespace erasures, one after another, each timed from the call to the receipt
   verified on every copy (``details["outcome"] == "verified_by_byte_scan"`` with both
   servers listed): the call's wall time, and per server the time from the receipt's
   creation to its check (``memory_erasure_copy_checks.checked_at``). The replica is read
   by the worker's own path: its files here (same machine), the primary's too.
4. The standby dropped, the database dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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

DB = "bench_copies"
SCRIPT = ROOT / "scripts" / "pg_standby.sh"


def log(message: str) -> None:
    print(f"[erasure_copies] {message}", file=sys.stderr, flush=True)


def pg(port: int = 5432, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(
        host="127.0.0.1", port=port, user="postgres", dbname=dbname, autocommit=True
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def standby(action: str, port: int) -> None:
    env = {**os.environ, "PG_STANDBY_OWNER": str(os.getpid())}
    subprocess.run([str(SCRIPT), action, str(port)], check=True, env=env)


def wait_replayed(port: int) -> float:
    with pg() as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    started = time.perf_counter()
    while True:
        with pg(port) as conn:
            ok = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0", [lsn]
            ).fetchone()[0]
        if ok:
            return time.perf_counter() - started
        if time.perf_counter() - started > 600:
            raise SystemExit("the standby did not replay the seed")
        time.sleep(0.2)


_RUN = r"""
import json, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from memoryapp.compliance import erase
from memoryapp.models import CopyCheck
out = []
for ns in json.loads(sys.argv[1]):
    began = time.perf_counter()
    r = erase(namespace=ns)
    wall = time.perf_counter() - began
    rows = {c.server: c for c in CopyCheck.objects.filter(receipt=r)}
    out.append({
        "namespace": ns,
        "wall_s": round(wall, 3),
        "outcome": r.details.get("outcome"),
        "copies": [[c["server"], c["outcome"]] for c in r.details.get("copies", [])],
        "after_s": {
            s: round((c.checked_at - r.created_at).total_seconds(), 3)
            for s, c in rows.items() if c.checked_at
        },
        "replica_bytes": rows["replica_1"].facts.get("bytes") if "replica_1" in rows else None,
        "primary_bytes": rows["default"].facts.get("bytes") if "default" in rows else None,
    })
print(json.dumps(out))
"""

_SEED = r"""
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from memoryapp import MemoryManager
namespaces, memories = int(sys.argv[1]), int(sys.argv[2])
for i in range(namespaces):
    mm = MemoryManager(project=f"bench/copies-{i}")
    for j in range(memories):
        mm.save_memory(f"fact {j}", f"namespace {i} fact {j}: " + "erasable words " * 20)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (small)")
    parser.add_argument("--namespaces", type=int, default=6)
    parser.add_argument("--memories", type=int, default=300, help="per namespace")
    parser.add_argument("--erasures", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "ERASURE_COPIES.md"))
    args = parser.parse_args()
    if args.quick:
        args.namespaces, args.memories, args.erasures = 3, 60, 2
    env = {**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB}"}
    env["MEMORYAPP_ERASURE_PURGE_TIMEOUT"] = "300"  # a shared machine: others' transactions
    env.pop("DJANGO_SETTINGS_MODULE", None)
    report: dict[str, Any] = {
        "args": vars(args),
        "host": benchlib.host_info(),
        "code": benchlib.code_version(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    with pg() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB}"')
    port = free_port()
    try:
        log("migrating and seeding")
        run = {"cwd": ROOT, "env": env, "check": True}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], **run)
        subprocess.run(
            [sys.executable, "-c", _SEED, str(args.namespaces), str(args.memories)], **run
        )
        log(f"standby on {port}")
        standby("start", port)
        report["replayed_seed_s"] = round(wait_replayed(port), 1)
        env["DATABASE_REPLICA_URLS"] = f"postgres://postgres@127.0.0.1:{port}/{DB}"
        targets = [f"bench/copies-{i}" for i in range(args.erasures)]
        log(f"{len(targets)} erasures")
        done = subprocess.run(
            [sys.executable, "-c", _RUN, json.dumps(targets)],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        report["erasures"] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            standby("stop", port)
        with contextlib.suppress(psycopg.Error), pg() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    print(json.dumps(report, indent=2))
    Path(args.out).write_text(render(report), encoding="utf-8")
    log(f"written {args.out}")


def render(r: dict[str, Any]) -> str:
    a, rows = r["args"], r["erasures"]
    lines = [
        "# An erasure's time to verified on every copy (one streaming replica)",
        "",
        f"`python bench/erasure_copies.py` ({a}), {r['started']}, commit "
        f"{r['code']['commit']}; {r['host']['cpu']}, {r['host']['cores']} cores. Primary: the "
        "local PostgreSQL 15 cluster; replica: a hot standby of it on the same machine "
        "(`scripts/pg_standby.sh`). Other work shared the machine's cores at the time (a "
        "load average well above the core count): the figures are noisy, an order of "
        "magnitude, not a baseline.",
        "",
        f"Data: {a['namespaces']} namespaces x {a['memories']} memories; the standby had "
        f"replayed the seed {r['replayed_seed_s']} s after it was made. Each erasure: one "
        "namespace, `erase(namespace=…)` with `DATABASE_REPLICA_URLS` set, which purges and "
        "verifies the primary, then waits for the replica to replay the erasure's WAL "
        "position and byte-scans its files (here: read directly, same machine).",
        "",
        "| namespace | call s | primary checked after s | replica checked after s "
        "| bytes scanned primary / replica | receipt outcome | copies |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for e in rows:
        copies = "; ".join(f"{s}: {o}" for s, o in e["copies"])
        lines.append(
            f"| {e['namespace']} | {e['wall_s']} | {e['after_s'].get('default', '')} | "
            f"{e['after_s'].get('replica_1', '')} | {e['primary_bytes']} / "
            f"{e['replica_bytes']} | {e['outcome']} | {copies} |"
        )
    walls = [e["wall_s"] for e in rows]
    lines += [
        "",
        f"Median call (to verified on every copy): {statistics.median(walls):.2f} s over "
        f"{len(walls)} erasures. The replica's check adds its replay wait and one scan of "
        "the same relations on the standby; the purge (a rewrite of the namespace's "
        "partitions, a checkpoint) is most of the rest.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
