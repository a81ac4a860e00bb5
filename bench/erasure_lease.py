"""Issue #38's judged repro: API erasures with a polling worker, counted on PostgreSQL.

Usage: ``.venv/bin/python bench/erasure_lease.py [--erasures 100] [--rows 2]``

1. Recreates the database ``memoryapp_bench_lease`` on 127.0.0.1:5432, migrates it.
2. Provisions an API client (``memory client … --write --erase``) and writes ``--rows``
   memories into each of ``--erasures`` namespaces through ``POST /api/memories/``.
3. Starts ``gunicorn project.wsgi`` (2 sync workers, loopback, a free port) with
   ``MEMORYAPP_ERASURE_WORKER=true`` and ``manage.py memory worker --poll 1`` beside it:
   the request deletes and answers 202, the worker purges and verifies.
4. Sends one ``POST /api/erasures/ {"namespace": …}`` per namespace, 4 at a time, while
   the worker polls every second — the race of issue #38 (a worker that claimed a
   receipt inside the request's delete transaction overwrote its counts with zeros).
5. Waits for the worker to complete every receipt (or a deadline), then counts, from the
   database: receipts whose ``counts`` say 0 memories while the namespace's rows are gone
   (the bug's signature: must be 0), receipts with fewer erased ids than rows, and
   receipts complete and verified by a byte scan.
6. Prints the figures, writes bench/out/erasure_lease.json, stops gunicorn and the
   worker, drops the database.

What it measures is correctness under the race, not speed; the timings it prints are
of a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
OUT = ROOT / "bench" / "out"
RESULTS_JSON = OUT / "erasure_lease.json"
PG = "postgres://postgres@127.0.0.1:5432/"
DB_NAME = "memoryapp_bench_lease"
PREFIX = "benchlease/"


def log(message: str) -> None:
    print(message, flush=True)


def pg(dbname: str = "postgres"):
    import psycopg

    return psycopg.connect(PG + dbname, autocommit=True, connect_timeout=5)


def env() -> dict[str, str]:
    out = os.environ.copy()
    out.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": PG + DB_NAME,
            "DEBUG": "false",
            "MEMORYAPP_ERASURE_WORKER": "true",
            "MEMORYAPP_ERASURE_PURGE_TIMEOUT": "120",
            "API_THROTTLE_ERASE": "",  # 100 erasures in a minute: not throttled here
            "API_THROTTLE_WRITE": "",
        }
    )
    return out


def manage(*args: str) -> str:
    done = subprocess.run(
        [str(PYTHON), "manage.py", *args],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, token: str, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read()[:200].decode(errors="replace")}


def wait_up(base: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(base + "/healthz", timeout=2)
            return
        time.sleep(0.3)
    raise SystemExit("gunicorn did not come up")


def count(receipt_ids: list[str], rows: int) -> dict:
    """The figures, read from the database once the worker is done (or the deadline)."""
    with pg(DB_NAME) as conn:
        found = conn.execute(
            "SELECT id, state, verified, counts, erased_ids, verification "
            "FROM memory_erasure_receipts WHERE id = ANY(%s)",
            [receipt_ids],
        ).fetchall()
        left = conn.execute(
            "SELECT count(*) FROM memories WHERE namespace LIKE %s", [PREFIX + "%"]
        ).fetchone()[0]
    zero = short = complete = scanned = 0
    for _id, state, verified, counts, erased, verification in found:
        n = (counts or {}).get("memories", 0)
        zero += n == 0
        short += len((erased or {}).get("memories", [])) < rows
        complete += state == "complete" and bool(verified)
        scanned += "fragment(s) of erased values: none found" in (verification or "")
    return {
        "receipts": len(found),
        "rows_left": left,
        "zero_counts_while_rows_deleted": zero if left == 0 else None,
        "erased_ids_incomplete": short,
        "complete_and_verified": complete,
        "verified_by_byte_scan": scanned,
    }


def run(erasures: int, rows: int, wait_s: float) -> dict:
    with pg() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    manage("migrate", "--noinput", "-v", "0")
    token = manage("memory", "client", "bench-lease", "--grant", PREFIX, "--write", "--erase")
    token = token.strip().splitlines()[-1].strip()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    OUT.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [str(GUNICORN), "project.wsgi", "-w", "2", "-b", f"127.0.0.1:{port}", "--timeout", "300"],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=(OUT / "erasure_lease_gunicorn.log").open("w"),
    )
    worker_log = OUT / "erasure_lease_worker.log"
    worker = subprocess.Popen(
        [str(PYTHON), "manage.py", "memory", "worker", "--poll", "1"],
        cwd=ROOT,
        env=env(),
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_up(base, time.monotonic() + 60)
        namespaces = [f"{PREFIX}ns{i:03d}" for i in range(erasures)]
        for ns in namespaces:
            for r in range(rows):
                body = {"project": ns, "key": f"fact {r}", "value": f"leasemarker{ns}x{r} words"}
                status, answer = call(base, token, "/api/memories/", body)
                assert status == 201, (status, answer)
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(
                    lambda ns: call(base, token, "/api/erasures/", {"namespace": ns}), namespaces
                )
            )
        sent_s = time.monotonic() - started
        refused = [a for a in answers if a[0] not in (201, 202)]
        ids = [a[1]["id"] for a in answers if a[0] in (201, 202)]
        deadline = time.monotonic() + wait_s
        figures = count(ids, rows)
        while figures["complete_and_verified"] < len(ids) and time.monotonic() < deadline:
            time.sleep(2)
            figures = count(ids, rows)
        figures.update(
            {
                "erasures_sent": erasures,
                "rows_per_namespace": rows,
                "refused": len(refused),
                "erasures_sent_s": round(sent_s, 1),
                "until_all_verified_s": round(time.monotonic() - started, 1),
                "worker_lines_was_requested": worker_log.read_text().count("(was requested)"),
            }
        )
        return figures
    finally:
        for proc in (server, worker):
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
            if proc.poll() is None:
                proc.kill()
        with contextlib.suppress(Exception), pg() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--erasures", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--wait", type=float, default=900.0, help="seconds to wait for the worker")
    args = parser.parse_args()
    figures = run(args.erasures, args.rows, args.wait)
    RESULTS_JSON.write_text(json.dumps(figures, indent=2) + "\n")
    log(json.dumps(figures, indent=2))
    bad = figures["zero_counts_while_rows_deleted"]
    log(
        f"receipts whose counts are 0 while their rows were deleted: {bad} of "
        f"{figures['receipts']} (written to {RESULTS_JSON.relative_to(ROOT)})"
    )
    return 0 if bad == 0 and not figures["erased_ids_incomplete"] else 1


if __name__ == "__main__":
    sys.exit(main())
