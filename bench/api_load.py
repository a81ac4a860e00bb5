"""HTTP API load benchmark (issue 7): gunicorn, 2 workers, PostgreSQL, a load client on loopback.

Usage: .venv/bin/python bench/api_load.py [--namespaces 100] [--per-namespace 10000]
       [--duration 60] [--concurrency 4] [--mix-upsert 0.2] [--keep-db] [--quick]
       [--conn-max-age 600] [--recall-cache-mib auto] [--worker-class sync] [--report-only]
       (or ``make bench-api``, ``make bench-api BENCH_API_ARGS=--quick`` for a smoke run)

What one run does, in order:

1. Builds (and caches under bench/out/api_corpus/) the corpus of ``bench/corpus.py``:
   ``make_corpus(per_namespace + tail, seed=1234)``, whose first ``per_namespace`` triples
   are ``make_corpus(per_namespace)``'s corpus (the prefix property, asserted once) and whose
   tail supplies fresh keys for the upserts; its 260 queries (with path hints) drive recall.
2. Creates the PostgreSQL database ``memoryapp_bench_api`` (dropped first; kept and reused
   with ``--keep-db``), runs ``manage.py migrate``, imports ONE namespace through the real
   import path (``manage.py memory import FILE --project bench-api/ns000``), then copies
   those rows into the other namespaces with one ``INSERT … SELECT`` per namespace (fresh
   16-hex-digit ids, as ``memoryapp.models.new_id`` makes; no ``memory_events`` rows; the
   change-counter triggers fire), then ``VACUUM (ANALYZE)`` and ``CHECKPOINT``.
3. Provisions a non-staff client (``manage.py memory client … --grant bench-api/ --write``).
4. Checks the settings the server will run with in a throw-away interpreter (DEBUG off,
   ALLOWED_HOSTS, throttles really off, the recall LRU cap) and measures one namespace's
   index size to decide whether the LRU cap holds every namespace; when it does not, the
   cap is raised through ``MEMORYAPP_RECALL_CACHE_BYTES`` if project/settings.py reads it
   from the environment, else through a generated settings module under bench/out/.
5. Starts ``gunicorn project.wsgi`` (2 sync workers) on 127.0.0.1:<free port>.
6. Warm-up: every namespace is recalled by two concurrent requests (so each sync worker
   builds its own index of it), then verified by more concurrent pairs until both are fast;
   a gunicorn ``post_request`` hook (generated config under bench/out/) reports each
   worker's index build count, so "both workers hold every index" is checked, not assumed.
7. Three timed phases at a fixed concurrency, driven by a stdlib asyncio HTTP/1.1 client in
   this process (no Django imported here): recall only, upsert only (new keys, round robin
   over namespaces), and a mix (``--mix-upsert`` of upserts, the rest recall). Before the
   mix, an untimed catch-up pass (one pair of recalls per namespace) lets every index
   absorb the upsert phase's rows, so the mix starts from current indexes.
8. Writes bench/API_RESULTS.md (generated) and bench/out/api_load.json (raw), stops gunicorn
   and drops the database unless ``--keep-db``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import random
import re
import secrets
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import code_version, host_info, load_corpus_module  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
OUT = ROOT / "bench" / "out"
CORPUS_DIR = OUT / "api_corpus"
SETTINGS_DIR = OUT / "api_settings"
RESULTS_MD = ROOT / "bench" / "API_RESULTS.md"
RESULTS_JSON = OUT / "api_load.json"
GUNICORN_LOG = OUT / "api_gunicorn.log"

PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_BASE_URL = "postgres://postgres@127.0.0.1:5432/"
DB_NAME = "memoryapp_bench_api"
NS_PREFIX = "bench-api/"
CLIENT_NAME = "bench-api-client"
SEED = 1234
TAIL = 2000  # fresh keys per namespace for the upserts; reused with a suffix past that
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024  # memoryapp.conf.recall_cache_bytes()'s default
OVERLAY_MODULE = "bench_api_settings"
REQUEST_TIMEOUT_S = 60.0
ERROR_SAMPLES = 5


def log(message: str) -> None:
    print(message, flush=True)


def ns_name(i: int) -> str:
    return f"{NS_PREFIX}ns{i:03d}"


# ============================================================================ corpus
def prepare_corpus(n: int) -> tuple[Path, dict[str, Any]]:
    """The import file (JSON lines) and {queries, tail} for ``n`` memories per namespace.

    Cached under bench/out/api_corpus/, keyed by a hash of corpus.py and the parameters,
    because generating 12,000 triples takes a few seconds on every run otherwise. A separate
    directory from bench/recall.py's cache: each script wipes stale files in its own.
    """
    module = load_corpus_module()
    stamp = hashlib.sha256(
        Path(module.__file__).read_bytes() + f"seed={SEED} n={n} tail={TAIL}".encode()
    ).hexdigest()[:16]
    jsonl, meta_path = CORPUS_DIR / f"n{n}-{stamp}.jsonl", CORPUS_DIR / f"n{n}-{stamp}.meta.json"
    if jsonl.exists() and meta_path.exists():
        return jsonl, json.loads(meta_path.read_text())
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    for old in CORPUS_DIR.glob(f"n{n}-*"):
        old.unlink()
    started = time.perf_counter()
    log(f"corpus: generating make_corpus({n + TAIL:,}, seed={SEED}) ...")
    big, _, queries = module.make_corpus(n + TAIL, seed=SEED)
    corpus, _, queries_n = module.make_corpus(n, seed=SEED)
    assert [k for k, _, _ in big[:n]] == [k for k, _, _ in corpus], "prefix property"
    assert queries == queries_n, "queries do not depend on n"
    with open(jsonl, "w", encoding="utf-8") as f:
        for key, value, tags in corpus:
            f.write(json.dumps({"key": key, "value": value, "tags": tags}) + "\n")
    meta = {"n": n, "queries": queries, "tail": big[n : n + TAIL]}
    meta_path.write_text(json.dumps(meta))
    log(f"corpus: ready in {time.perf_counter() - started:.1f} s")
    return jsonl, meta


# ============================================================================ database
def pg_connect(url: str = PG_ADMIN_URL, **kwargs: Any) -> Any:
    import psycopg

    return psycopg.connect(url, connect_timeout=5, **kwargs)


def db_url(conn_max_age: int | None = None) -> str:
    url = PG_BASE_URL + DB_NAME
    return f"{url}?conn_max_age={conn_max_age}" if conn_max_age else url


def database_exists() -> bool:
    with pg_connect(autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()


def recreate_database() -> None:
    with pg_connect(autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def drop_database() -> None:
    with contextlib.suppress(Exception), pg_connect(autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def django_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every Django process of the bench (manage.py and gunicorn)."""
    env = os.environ.copy()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": db_url(),
            "DEBUG": "false",
            "MEMORYAPP_LOG_LEVEL": "WARNING",
            "PYTHONHASHSEED": "0",
        }
    )
    env.update(extra or {})
    return env


def manage(*args: str, env: dict[str, str] | None = None) -> str:
    """Run ``manage.py`` with the bench database; its stdout (stderr passes through)."""
    done = subprocess.run(
        [str(PYTHON), "manage.py", *args],
        cwd=ROOT,
        env=env or django_env(),
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return done.stdout


def memory_columns(conn: Any) -> list[str]:
    """The columns of ``memories`` as migrated now (read, not hard-coded: others edit models)."""
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories' "
        "AND table_schema = current_schema() ORDER BY ordinal_position"
    ).fetchall()
    return [r[0] for r in rows]


def seed(jsonl: Path, namespaces: int, per_ns: int) -> dict[str, Any]:
    """Migrate, import namespace 0 through ``memory import``, copy it into the others by SQL."""
    out: dict[str, Any] = {}
    started = time.perf_counter()
    manage("migrate", "--noinput", "-v", "0")
    out["migrate_s"] = round(time.perf_counter() - started, 1)

    # The real import path: JSON lines parsed, guarded, classified, one transaction, events.
    started = time.perf_counter()
    printed = manage("memory", "import", str(jsonl), "--project", ns_name(0)).strip()
    out["import_s"] = round(time.perf_counter() - started, 1)
    out["import_rows_per_s"] = round(per_ns / (time.perf_counter() - started))
    out["import_output"] = printed.splitlines()[-1] if printed else ""
    log(f"seed: {out['import_output']} in {out['import_s']} s ({out['import_rows_per_s']:,}/s)")

    # The other namespaces: one INSERT … SELECT each. Fresh random 16-hex-digit ids like
    # new_id(); the source id goes into the hash so two rows never share an md5 input.
    # Timestamps are copied, so every namespace scores exactly like namespace 0.
    started = time.perf_counter()
    with pg_connect(PG_BASE_URL + DB_NAME) as conn:
        columns = memory_columns(conn)
        rest = [c for c in columns if c not in ("id", "namespace")]
        select = ", ".join(f"m.{c}" for c in rest)
        sql = (
            f"INSERT INTO memories (id, namespace, {', '.join(rest)}) "
            f"SELECT left(md5(random()::text || clock_timestamp()::text || m.id), 16), %s, "
            f"{select} FROM memories m WHERE m.namespace = %s AND m.deleted_at IS NULL"
        )
        for i in range(1, namespaces):
            copied = conn.execute(sql, [ns_name(i), ns_name(0)]).rowcount
            conn.commit()
            assert copied == per_ns, (ns_name(i), copied)
        out["copy_s"] = round(time.perf_counter() - started, 1)
        log(f"seed: copied {namespaces - 1} namespaces by SQL in {out['copy_s']} s")
        # VACUUM as well as ANALYZE: a million fresh rows would otherwise make autovacuum
        # (insert threshold) start in the middle of a measured phase; ANALYZE gives the
        # planner the statistics the import's own ANALYZE took before the copies.
        started = time.perf_counter()
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE) memories")
        conn.execute("ANALYZE")
        # The seed wrote ~1 GB of WAL: checkpoint now rather than in a measured phase.
        conn.execute("CHECKPOINT")
        out["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
        counts = conn.execute(
            "SELECT namespace, count(*) FROM memories WHERE deleted_at IS NULL "
            "GROUP BY namespace ORDER BY namespace"
        ).fetchall()
        out["events_rows"] = conn.execute("SELECT count(*) FROM memory_events").fetchone()[0]
        out["triggers"] = [
            r[0]
            for r in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'memories'::regclass "
                "AND NOT tgisinternal ORDER BY tgname"
            ).fetchall()
        ]
        out["counter"] = int(
            conn.execute("SELECT value FROM schema_meta WHERE key = 'memories_change'").fetchone()[
                0
            ]
        )
        conn.execute(
            "CREATE TABLE bench_api_seed (namespaces int, per_ns int, corpus text, "
            "seeded_at timestamptz DEFAULT now())"
        )
        conn.execute(
            "INSERT INTO bench_api_seed (namespaces, per_ns, corpus) VALUES (%s, %s, %s)",
            [namespaces, per_ns, jsonl.name],
        )
    expected = [(ns_name(i), per_ns) for i in range(namespaces)]
    assert counts == expected, f"unexpected row counts: {counts[:3]} …"
    out["rows"] = sum(c for _, c in counts)
    log(f"seed: {out['rows']:,} live memories; VACUUM (ANALYZE) {out['vacuum_analyze_s']} s")
    return out


def reuse_seeded(jsonl: Path, namespaces: int, per_ns: int) -> dict[str, Any] | None:
    """With --keep-db: the seeded database back to its seeded state, or None to seed anew.

    The previous run's upserts (rows created after the seed) are deleted, so that this
    run's upserts are new keys again (201), not updates.
    """
    if not database_exists():
        return None
    try:
        with pg_connect(PG_BASE_URL + DB_NAME) as conn:
            row = conn.execute(
                "SELECT namespaces, per_ns, corpus, seeded_at FROM bench_api_seed"
            ).fetchone()
            if row is None or tuple(row[:3]) != (namespaces, per_ns, jsonl.name):
                return None
            removed = conn.execute("DELETE FROM memories WHERE created_at > %s", [row[3]]).rowcount
            conn.commit()
            conn.autocommit = True
            conn.execute("VACUUM (ANALYZE) memories")
            conn.execute("CHECKPOINT")
    except Exception as exc:  # no seed table, another schema: seed from scratch
        log(f"seed: cannot reuse {DB_NAME} ({type(exc).__name__}); recreating it")
        return None
    manage("migrate", "--noinput", "-v", "0")  # the code may have gained a migration
    log(f"seed: reusing {DB_NAME} (--keep-db); removed {removed:,} rows of the last run")
    return {"reused": True, "removed_rows": removed, "seeded_at": row[3].isoformat()}


# ============================================================================ server checks
PREFLIGHT = r"""
import json, os, resource, sys, time
import django
django.setup()
from django.conf import settings
from rest_framework.settings import api_settings
from memoryapp import conf
out = {
    "settings_module": os.environ["DJANGO_SETTINGS_MODULE"],
    "debug": settings.DEBUG,
    "allowed_hosts": list(settings.ALLOWED_HOSTS),
    "throttle_rates": dict(api_settings.DEFAULT_THROTTLE_RATES),
    "recall_cache_bytes": conf.recall_cache_bytes(),
    "conn_max_age": settings.DATABASES["default"].get("CONN_MAX_AGE", 0),
}
if len(sys.argv) > 1:
    from memoryapp.db.meta import read_change_counter
    from memoryapp.recall.cache import INDEXES
    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
    before, started = rss(), time.perf_counter()
    index = INDEXES.get("default", sys.argv[1], "project", read_change_counter("default"))
    out["index_build_s"] = round(time.perf_counter() - started, 2)
    out["index_nbytes"] = index.nbytes
    out["index_rows"] = len(index)
    out["index_rss_growth_mib"] = round(rss() - before, 1)
print(json.dumps(out))
"""


def preflight(env: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
    """The settings a server started with ``env`` would run with; optionally one index built."""
    args = [str(PYTHON), "-c", PREFLIGHT] + ([namespace] if namespace else [])
    done = subprocess.run(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True
    ).stdout
    return json.loads(done.strip().splitlines()[-1])


GUNICORN_HOOKS = """\
\"\"\"Generated by bench/api_load.py: each worker's recall-index counters, for the bench.

Read-only: a daemon thread per worker (started by its first request) writes the
counters to worker-<pid>.json beside this file every FLUSH_S seconds when they changed.
Not after every request: at ~50 requests/s per worker a file write and rename per
request was ~10 % of a worker's time in a py-spy profile, bench overhead the measured
latency should not carry. worker_index_stats() waits longer than FLUSH_S before reading.
\"\"\"
import json
import os
import threading
import time

_DIR = {directory!r}
FLUSH_S = 0.25
_started = []


def _flush_forever():
    from memoryapp.recall.cache import INDEXES

    last = None
    while True:
        time.sleep(FLUSH_S)
        try:
            entries, nbytes = INDEXES.usage()  # under the LRU's lock
            key = (INDEXES.builds, getattr(INDEXES, "deltas", -1), entries, INDEXES.loads, nbytes)
            if key == last:
                continue
            last = key
            stats = {{
                "pid": os.getpid(),
                "builds": key[0],
                "deltas": key[1],
                "entries": key[2],
                "loads": key[3],
                "nbytes": key[4],
                "at": time.time(),
            }}
            path = os.path.join(_DIR, f"worker-{{os.getpid()}}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(stats, f)
            os.replace(path + ".tmp", path)
        except Exception:  # never let the bench's bookkeeping stop
            pass


def post_request(worker, req, environ, resp):
    if not _started:
        _started.append(threading.Thread(target=_flush_forever, daemon=True))
        _started[0].start()
"""


def write_gunicorn_hooks() -> Path:
    """The gunicorn config file with the post_request hook above; its path.

    It tells, exactly and per worker, how many indexes were built and are held (the LRU
    must hold every namespace; no measured request may build one) without touching
    memoryapp/: the hook only reads ``memoryapp.recall.cache.INDEXES``.
    """
    SETTINGS_DIR.mkdir(parents=True, exist_ok=True)
    for old in SETTINGS_DIR.glob("worker-*.json"):
        old.unlink()
    path = SETTINGS_DIR / "bench_api_gunicorn.py"
    path.write_text(GUNICORN_HOOKS.format(directory=str(SETTINGS_DIR)))
    return path


def worker_index_stats(pids: list[int]) -> dict[int, dict[str, Any]]:
    """The last counters each worker wrote (see GUNICORN_HOOKS); {} for a silent worker."""
    time.sleep(0.6)  # > the hook's FLUSH_S: the counters of the last requests are written
    out = {}
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            out[pid] = json.loads((SETTINGS_DIR / f"worker-{pid}.json").read_text())
    return out


def write_overlay(cache_bytes: int) -> None:
    """A settings module that is project.settings plus the recall LRU cap.

    project/settings.py does not read MEMORYAPP_RECALL_CACHE_BYTES from the environment, and
    this bench must not edit it; a generated module in the git-ignored bench/out/ is the only
    way to raise the cap for the bench's server without touching anyone's file.
    """
    SETTINGS_DIR.mkdir(parents=True, exist_ok=True)
    (SETTINGS_DIR / f"{OVERLAY_MODULE}.py").write_text(
        '"""Generated by bench/api_load.py: project.settings with a bench recall LRU cap."""\n'
        "from project.settings import *  # noqa: F401,F403\n\n"
        f"MEMORYAPP_RECALL_CACHE_BYTES = {cache_bytes}\n"
    )


# ============================================================================ gunicorn
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (the gunicorn workers of the master)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may contain spaces, so split after ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of a process, in MiB."""
    out = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    return proc_cpu_and_start(pid)[0]


def proc_cpu_and_start(pid: int) -> tuple[float, int]:
    """User + system CPU seconds of a process so far, and its start time (clock ticks
    since boot: with the pid, what tells one process from a later one of the same pid)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[19])


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def process_table() -> dict[int, tuple[float, str, int]]:
    """Every process's CPU seconds so far, a label (its command line, shortened) and its
    start time (:func:`proc_cpu_and_start`)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pid = int(entry.name)
        cpu, started = proc_cpu_and_start(pid)
        out[pid] = (cpu, cmdline.strip() or f"[{pid}]", started)
    return out


PG_CLUSTER_PREFIX = re.compile(r"^postgres: (?:[^\s:]+: )?")
PG_BACKEND_TITLE = re.compile(
    r"^postgres: (?:[^\s:]+: )?(?P<user>\S+) (?P<db>\S+) (?:\S+\(\d+\)|\[local\])"
)


def process_label(cmdline: str) -> str:
    """A group for "other" CPU: PostgreSQL processes by role and database, else the program."""
    if cmdline.startswith("postgres: "):
        # Backends title themselves "postgres: [CLUSTER: ]USER DB HOST(PORT) STATE", the
        # server's helpers "postgres: [CLUSTER: ]ROLE".
        backend = PG_BACKEND_TITLE.match(cmdline)
        if backend:
            return f"postgres backends, database {backend['db']}"
        return "postgres " + PG_CLUSTER_PREFIX.sub("", cmdline).strip()[:40]
    words = cmdline.split()
    program = Path(words[0]).name if words else "?"
    if program.startswith("python") and len(words) > 1:
        script = next((w for w in words[1:] if not w.startswith("-")), "")
        return f"{program} {Path(script).name if '/' in script else script}"[:60]
    return program[:60]


class CpuMeter:
    """Where the machine's CPU went during a phase: workers, PostgreSQL, this client, the rest.

    The machine is shared (2 vCPUs, other test suites run beside the bench), so the
    split says whether a phase was limited by the app, by the database, or by neighbours.
    PostgreSQL's share counts the bench database's backends alive at both ends of the
    phase (with persistent connections, the workers' two); per-request connections
    (``--conn-max-age 0``) come and go, and their CPU lands in "other", as does that of
    every process that started and ended within the phase. "other" is broken down by
    process group, from the processes alive at both ends.
    """

    def __init__(self, workers: list[int]) -> None:
        self.workers = workers
        self.started = time.perf_counter()
        self.busy = machine_busy()
        self.client = time.process_time()
        self.table = process_table()
        # Clock ticks since boot now: processes started later began within the phase.
        self.boot_ticks = int(
            float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")
        )

    def read(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.started
        busy = machine_busy()
        table = process_table()
        cpus = os.cpu_count() or 1
        machine = (busy[0] - self.busy[0]) / max(1, busy[1] - self.busy[1]) * cpus
        # A process is the same one when its pid and start time are (a PostgreSQL
        # backend retitles itself with every statement); one born during the phase
        # spent all its CPU in it (the cold workers' backends connect on their first
        # request).
        same = {
            pid
            for pid, (_, _, started) in table.items()
            if self.table.get(pid, (0, "", -1))[2] == started
        }
        used = {
            pid: cpu - self.table[pid][0] if pid in same else cpu
            for pid, (cpu, _, started) in table.items()
            if pid in same or started >= self.boot_ticks  # or a new process (a reused pid too)
        }
        workers = sum(used.get(p, 0.0) for p in self.workers) / wall
        bench_pg = f"postgres backends, database {DB_NAME}"
        groups: dict[str, float] = {}
        for pid, seconds in used.items():
            if pid in self.workers or pid == os.getpid() or seconds <= 0:
                continue
            label = process_label(table[pid][1])
            groups[label] = groups.get(label, 0.0) + seconds / wall
        pg = groups.pop(bench_pg, 0.0)
        client = (time.process_time() - self.client) / wall
        top = sorted(groups.items(), key=lambda kv: -kv[1])[:4]
        return {
            "machine_busy_cpus": round(machine, 2),
            "workers_cpus": round(workers, 2),
            "postgres_cpus": round(pg, 2),
            "client_cpus": round(client, 2),
            "other_cpus": round(max(0.0, machine - workers - pg - client), 2),
            "other_top": [[label, round(c, 2)] for label, c in top if c >= 0.01],
        }


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    command: list[str]
    workers: list[int] = field(default_factory=list)


def start_gunicorn(env: dict[str, str], args: argparse.Namespace, workers: int = 0) -> Server:
    port = free_port()
    command = [
        str(GUNICORN),
        "project.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers or args.workers),
        "--worker-class",
        args.worker_class,
        # A first recall builds a namespace's index; never let a slow one kill a worker.
        "--timeout",
        "300",
        "--graceful-timeout",
        "10",
        "--log-level",
        "warning",
        "--error-logfile",
        str(GUNICORN_LOG),
        "--config",
        str(write_gunicorn_hooks()),
        "--pythonpath",
        f"{ROOT},{SETTINGS_DIR}",
    ]
    if args.worker_class == "gthread":
        command += ["--threads", str(args.threads)]
    GUNICORN_LOG.unlink(missing_ok=True)
    process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    return Server(process, port, command)


def stop_gunicorn(server: Server | None) -> None:
    if server is None or server.process.poll() is not None:
        return
    server.process.send_signal(signal.SIGTERM)  # graceful: the master stops its workers
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


# ============================================================================ HTTP client
class HttpError(Exception):
    """The server's answer could not be read as HTTP/1.1."""


class Connection:
    """One HTTP/1.1 client connection over asyncio streams, reopened when the server closes.

    Gunicorn's sync workers answer ``Connection: close`` (they do not keep connections
    alive), so with them every request pays a loopback connect, which is part of what a
    client of that deployment pays; with keep-alive servers the connection is reused.
    """

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.head = (
            f"Host: 127.0.0.1:{port}\r\nAuthorization: Token {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        reused = self.writer is not None
        try:
            return await self._request(method, path, body)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            await self.close()
            # A kept-alive connection the server closed while idle fails before any byte of
            # the answer: retry once on a fresh one. Anything else is an error.
            if reused and isinstance(exc, asyncio.IncompleteReadError) and not exc.partial:
                return await self._request(method, path, body)
            raise

    async def _request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write(
            f"{method} {path} HTTP/1.1\r\n".encode()
            + self.head
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            data = b"".join(c[:-2] for c in chunks)
        else:
            data = await self.reader.read()
            headers["connection"] = "close"
        if headers.get("connection", "").lower() == "close" or parts[0] == "HTTP/1.0":
            await self.close()
        return status, data


@dataclass
class Sample:
    kind: str  # "recall" or "upsert"
    start: float  # seconds since the phase began
    latency: float  # seconds, connect to last byte
    status: int  # 0: no HTTP answer (connection error, timeout)
    candidates: int = -1  # recall: how many candidates came back


@dataclass
class PhaseLog:
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the first few, with their bodies
    empty_queries: dict[int, list[int]] = field(default_factory=dict)  # query -> [empty, full]


class Workload:
    """Request bodies: recall queries with their path hints, and upserts of new keys."""

    def __init__(self, meta: dict[str, Any], namespaces: int) -> None:
        self.namespaces = namespaces
        self.tail = meta["tail"]
        self.recalls = []
        for query, hints in meta["queries"]:
            body: dict[str, Any] = {"query": query, "top_k": 5}
            if hints:  # the path hints arrive as one user message naming them (bench/recall.py)
                body["messages"] = [{"role": "user", "content": " ".join(hints)}]
            self.recalls.append(body)
        self.upserts = 0

    def recall(self, rng: random.Random, namespace: int | None = None) -> tuple[int, bytes]:
        q = rng.randrange(len(self.recalls))
        ns = rng.randrange(self.namespaces) if namespace is None else namespace
        return q, json.dumps({"project": ns_name(ns), **self.recalls[q]}).encode()

    def upsert(self) -> bytes:
        """The next new (namespace, key): round robin over namespaces, then over tail keys.

        Past namespaces × tail upserts a suffix keeps the keys new (never reached at the
        default sizes and durations).
        """
        i, self.upserts = self.upserts, self.upserts + 1
        ns, j = i % self.namespaces, i // self.namespaces
        key, value, tags = self.tail[j % len(self.tail)]
        if j >= len(self.tail):
            key = f"{key} round {j // len(self.tail)}"
        body = {"project": ns_name(ns), "key": key, "value": value, "tags": tags}
        return json.dumps(body).encode()


async def timed_request(
    conn: Connection, kind: str, body: bytes, began: float, plog: PhaseLog, query: int = -1
) -> Sample:
    """One request, recorded in ``plog``: latency from connect to the last byte of the body."""
    path = "/api/recall/" if kind == "recall" else "/api/memories/"
    started = time.perf_counter()
    candidates = -1
    try:
        status, data = await asyncio.wait_for(
            conn.request("POST", path, body), timeout=REQUEST_TIMEOUT_S
        )
    except Exception as exc:  # connection refused/reset, timeout, garbage: all errors
        await conn.close()
        status, data = 0, f"{type(exc).__name__}: {exc}".encode()
    latency = time.perf_counter() - started
    if 200 <= status < 300 and kind == "recall":
        try:
            candidates = len(json.loads(data)["candidates"])
        except (ValueError, KeyError, TypeError):
            status, data = -1, b"unreadable recall body: " + data[:200]
    if not 200 <= status < 300:
        if len(plog.errors) < ERROR_SAMPLES:
            plog.errors.append(f"{kind} -> {status}: {data[:500].decode('utf-8', 'replace')}")
    elif query >= 0:
        plog.empty_queries.setdefault(query, [0, 0])[candidates > 0] += 1
    sample = Sample(kind, started - began, latency, status, candidates)
    plog.samples.append(sample)
    return sample


async def run_phase(
    port: int,
    token: str,
    workload: Workload,
    duration: float,
    concurrency: int,
    upsert_share: float,
    seed: int,
) -> tuple[PhaseLog, float]:
    """``concurrency`` closed-loop clients for ``duration`` seconds; (log, elapsed seconds).

    Each client sends its next request as soon as its previous one is answered. No request
    starts after the deadline; those in flight are waited for and counted.
    """
    plog = PhaseLog()
    began = time.perf_counter()
    deadline = began + duration

    async def client(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        conn = Connection(port, token)
        try:
            while time.perf_counter() < deadline:
                if rng.random() < upsert_share:
                    await timed_request(conn, "upsert", workload.upsert(), began, plog)
                else:
                    query, body = workload.recall(rng)
                    await timed_request(conn, "recall", body, began, plog, query)
        finally:
            await conn.close()

    await asyncio.gather(*(client(k) for k in range(concurrency)))
    return plog, time.perf_counter() - began


async def wait_ready(port: int, token: str, timeout: float = 120.0, workers: int = 2) -> float:
    """Seconds until both workers answer: pairs of concurrent cheap requests, all fast.

    Sync workers import Django each at boot; a 404 under /api/ (no database, no auth) is the
    cheapest answer that proves a worker is serving.
    """
    began = time.perf_counter()
    fast = 0
    while time.perf_counter() - began < timeout:
        results = await asyncio.gather(
            *(_probe(port, token) for _ in range(workers)), return_exceptions=True
        )
        if all(isinstance(r, float) and r < 0.05 for r in results):
            fast += 1
            if fast >= 3:
                return time.perf_counter() - began
        else:
            fast = 0
            await asyncio.sleep(0.2)
    raise RuntimeError(f"gunicorn did not become ready in {timeout:.0f} s (see {GUNICORN_LOG})")


async def _probe(port: int, token: str) -> float:
    conn = Connection(port, token)
    started = time.perf_counter()
    try:
        status, _ = await asyncio.wait_for(conn.request("GET", "/api/bench-ready/"), 5)
    finally:
        await conn.close()
    if status != 404:
        raise HttpError(f"probe answered {status}")
    return time.perf_counter() - started


async def warm_up(
    port: int,
    token: str,
    workload: Workload,
    threshold_s: float,
    max_rounds: int,
    label: str = "warm-up",
) -> dict[str, Any]:
    """Each namespace's index built (or caught up) in both workers before a measured phase.

    A sync worker serves one request at a time, so two concurrent requests for one
    namespace go to the two workers: while one builds, only the other can accept. Then
    verification pairs per namespace until both answers are faster than ``threshold_s``
    (a build takes ~1 s at 10,000 rows, a warm recall tens of ms), ``max_rounds`` at most
    (0: no verification, as for the catch-up after a write phase).
    """
    rng = random.Random(SEED)
    plog = PhaseLog()
    began = time.perf_counter()

    async def pair(ns: int) -> list[Sample]:
        conns = [Connection(port, token) for _ in range(2)]
        try:
            bodies = [workload.recall(rng, ns) for _ in conns]
            return await asyncio.gather(
                *(
                    timed_request(c, "recall", b, began, plog, q)
                    for c, (q, b) in zip(conns, bodies, strict=True)
                )
            )
        finally:
            for c in conns:
                await c.close()

    first = {}
    for ns in range(workload.namespaces):
        first[ns] = await pair(ns)
        if ns % 10 == 9:
            log(f"{label}: {ns + 1} namespaces, {time.perf_counter() - began:.0f} s")
    build_done = time.perf_counter() - began
    rounds_needed: dict[int, int] = {}
    unverified = []
    for ns in range(workload.namespaces):
        for attempt in range(1, max_rounds + 1):
            samples = await pair(ns)
            if all(s.status == 200 and s.latency < threshold_s for s in samples):
                rounds_needed[ns] = attempt
                break
        else:
            unverified.append(ns_name(ns))
    total = time.perf_counter() - began
    firsts = [s.latency for pair_ in first.values() for s in pair_]
    return {
        "total_s": round(total, 1),
        "build_pass_s": round(build_done, 1),
        "verify_pass_s": round(total - build_done, 1),
        "first_pair_latency_ms": summarize(firsts),
        "requests": len(plog.samples),
        "errors": sum(1 for s in plog.samples if not 200 <= s.status < 300),
        "error_samples": plog.errors,
        "namespaces_needing_more_than_one_verify_round": sum(
            1 for r in rounds_needed.values() if r > 1
        ),
        "unverified_namespaces": unverified,
        "verify_threshold_ms": round(threshold_s * 1e3),
    }


# ============================================================================ figures
def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: the value of a real request)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def summarize(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {}
    return {
        "p50": round(1e3 * statistics.median(seconds), 2),
        "p90": round(1e3 * percentile(seconds, 0.90), 2),
        "p99": round(1e3 * percentile(seconds, 0.99), 2),
        "max": round(1e3 * max(seconds), 2),
        "min": round(1e3 * min(seconds), 2),
        "mean": round(1e3 * statistics.fmean(seconds), 2),
    }


def phase_figures(plog: PhaseLog, elapsed: float) -> dict[str, Any]:
    """Per request kind and overall: counts, req/s, latency percentiles, errors."""
    out: dict[str, Any] = {"elapsed_s": round(elapsed, 2)}
    kinds = sorted({s.kind for s in plog.samples})
    for kind in [*kinds, "all"]:
        samples = [s for s in plog.samples if kind in ("all", s.kind)]
        ok = [s for s in samples if 200 <= s.status < 300]
        statuses: dict[str, int] = {}
        for s in samples:
            statuses[str(s.status)] = statuses.get(str(s.status), 0) + 1
        out[kind] = {
            "requests": len(samples),
            "throughput_rps": round(len(samples) / elapsed, 1),
            "errors": len(samples) - len(ok),
            "statuses": statuses,
            "latency_ms": summarize([s.latency for s in samples]),
        }
        if kind == "recall":
            out[kind]["empty_candidates"] = sum(1 for s in ok if s.candidates == 0)
    # Throughput per 10-second window shows stalls that an average hides.
    windows: dict[int, int] = {}
    for s in plog.samples:
        window = int((s.start + s.latency) // 10)
        windows[window] = windows.get(window, 0) + 1
    full = [windows.get(w, 0) / 10 for w in range(int(elapsed // 10))]
    out["rps_per_10s_window"] = full
    # A query that matched in one response and not in another (same rows in every
    # namespace) would mean a recall that silently returned [] (recall swallows DB errors).
    out["inconsistent_empty_queries"] = sorted(
        q for q, (empty, full_) in plog.empty_queries.items() if empty and full_
    )
    out["error_samples"] = plog.errors
    return out


def versions() -> dict[str, str]:
    names = ["django", "djangorestframework", "gunicorn", "psycopg", "numpy"]
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        with pg_connect() as conn:
            out["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
            for name in ("autovacuum", "shared_buffers", "max_connections"):
                out[f"pg_{name}"] = conn.execute(f"SHOW {name}").fetchone()[0]
    except Exception:
        out["postgresql"] = "unavailable"
    return out


def machine_info() -> dict[str, Any]:
    info = host_info()
    info["cpus"] = info.pop("cores")  # the key bench/API_RESULTS.md has always used
    return info


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ============================================================================ report
def fmt_ms(latency: dict[str, float], key: str) -> str:
    return f"{latency[key]:,.1f}" if key in latency else "–"


def phase_rows(phases: dict[str, Any]) -> list[str]:
    rows = [
        "| phase | requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, figures in phases.items():
        kinds = [k for k in ("recall", "upsert") if k in figures]
        for kind in [*kinds, "all"] if len(kinds) > 1 else kinds:
            f = figures[kind]
            lat = f["latency_ms"]
            label = name if kind == "all" or len(kinds) == 1 else f"{name}: {kind}"
            rows.append(
                f"| {label} | {f['requests']:,} | {f['throughput_rps']:,.1f} | "
                f"{fmt_ms(lat, 'p50')} | {fmt_ms(lat, 'p90')} | {fmt_ms(lat, 'p99')} | "
                f"{fmt_ms(lat, 'max')} | {f['errors']} |"
            )
    return rows


def no_build_check(report: dict[str, Any]) -> str:
    """Did both workers hold every namespace's index, and did any measured request build one?

    Exact when the gunicorn hook reported each worker's counters (``index_stats``); the
    warm-up's pairs alone are a heuristic (a worker that answers fast may take both
    requests of a pair).
    """
    stats = report.get("index_stats", {})
    warm = stats.get("after warm-up", {})
    pids = [int(p) for p in report.get("workers", {})] or sorted(int(p) for p in warm)
    if len(warm) < 2:
        return "The workers did not report their index counters (see GUNICORN_HOOKS)."
    namespaces = report["config"]["namespaces"]
    parts = []
    for pid in pids:
        w = warm.get(pid) or warm.get(str(pid)) or {}
        parts.append(
            f"worker {pid}: {w.get('builds')} builds, {w.get('entries')} indexes held "
            f"({w.get('nbytes', 0) / 2**20:,.0f} MiB by the LRU's count)"
        )
    phase_builds = {}
    previous = warm
    for name in report["phases"]:
        # A catch-up pass before the phase is not the phase: count from its end.
        previous = report.get("catch_up", {}).get(name, {}).get("stats_after", previous)
        now = stats.get(name, {})
        phase_builds[name] = sum(
            (now.get(k) or {}).get("builds", 0) - (previous.get(k) or {}).get("builds", 0)
            for k in now
        )
        previous = now
    held = all(
        (warm.get(pid) or warm.get(str(pid)) or {}).get("entries") == namespaces for pid in pids
    )
    built = sum(phase_builds.values())
    verdict = (
        f"both workers held all {namespaces} indexes, and no measured request built one"
        if held and built == 0
        else f"**not every index was held or some were built during the phases** "
        f"(builds per phase: {phase_builds})"
    )
    return f"After the warm-up, {'; '.join(parts)}: {verdict}."


def write_markdown(report: dict[str, Any]) -> None:
    m, v, cfg, seed_, warm = (
        report["machine"],
        report["versions"],
        report["config"],
        report["seed"],
        report["warm_up"],
    )
    code = report["code"]
    cache = report["recall_cache"]
    dirty = code["uncommitted"]
    errors = sum(p["all"]["errors"] for p in report["phases"].values())
    lines = [
        "# HTTP API load benchmark: `bench/api_load.py`",
        "",
        f"Generated {report['date']} by `.venv/bin/{report['command']}` (`make bench-api` "
        "runs it), wall time "
        f"{report['wall_s'] / 60:.1f} min. Raw figures: `bench/out/api_load.json` (git-ignored).",
        "",
        f"**{errors} errors** in {sum(p['all']['requests'] for p in report['phases'].values()):,}"
        f" measured requests; warm-up {warm['errors']} errors in {warm['requests']:,}"
        + "".join(
            f"; catch-up before {n} {c['errors']} errors in {c['requests']:,}"
            for n, c in report.get("catch_up", {}).items()
        )
        + ".",
        "",
        "## Machine and code",
        "",
        f"- CPU: {m['cpu']}, {m['cpus']} vCPUs (shared with PostgreSQL and the load client, "
        f"and with other work on this machine); RAM {m['ram_gib']} GiB; {m['os']}",
        f"- Python {v['python']}, Django {v['django']}, DRF {v['djangorestframework']}, "
        f"gunicorn {v['gunicorn']}, psycopg {v['psycopg']}, numpy {v['numpy']}, "
        f"PostgreSQL {v['postgresql']} (shared_buffers {v.get('pg_shared_buffers')}, "
        f"autovacuum {v.get('pg_autovacuum')}: shared with other people's test databases)",
        f"- load average (1, 5, 15 min) before {report['load_before']}, after "
        f"{report['load_after']}",
        f"- code: commit `{code['commit']}`"
        + (
            f", with uncommitted changes under memoryapp/ or project/ (others' work in "
            f"progress, measured as found): {', '.join(f'`{d[3:]}`' for d in dirty[:12])}"
            if dirty
            else " (clean under memoryapp/ and project/)"
        )
        + (
            f"; HEAD moved to `{report['code_end']['commit']}` during the run (the workers "
            "had loaded the code at their start)"
            if report["code_end"]["commit"] != code["commit"]
            else ""
        ),
        "",
        "## Configuration",
        "",
        f"- Server: `gunicorn project.wsgi:application --workers 2 --worker-class "
        f"{cfg['worker_class']}` on 127.0.0.1, DEBUG off, `SECRET_KEY` random per run, "
        f"`ALLOWED_HOSTS` {report['server_settings']['allowed_hosts']}; throttles off "
        "(`API_THROTTLE_WRITE`, `API_THROTTLE_RECALL`, `API_THROTTLE_ERASE` set empty; the "
        f"server's rates read back as {report['server_settings']['throttle_rates']}).",
        f"- Database: PostgreSQL `{DB_NAME}`, `DATABASE_URL` with "
        + (
            f"`?conn_max_age={cfg['conn_max_age']}` (persistent connections per worker, as a "
            "deployment would set; `--conn-max-age 0` measures a new database connection per "
            "request, the project's default)"
            if cfg["conn_max_age"]
            else "no `conn_max_age` (the project's default: a new database connection per request)"
        )
        + ".",
        f"- Data: {cfg['namespaces']} namespaces × {cfg['per_namespace']:,} memories "
        f"({seed_.get('rows', cfg['namespaces'] * cfg['per_namespace']):,} rows), project scope, "
        "no user namespace.",
        f"- Load: {cfg['concurrency']} concurrent closed-loop clients (each sends its next "
        "request when the previous one is answered), one Python asyncio process on the same "
        f"machine, stdlib HTTP/1.1 over loopback; {cfg['duration']:.0f} s per phase. Latency is "
        "connect to last byte, so it includes the wait in gunicorn's listen queue (with 2 "
        "sync workers, up to "
        f"{max(cfg['concurrency'] - 2, 0)} requests wait while 2 are served) and the loopback "
        "connect that sync workers (no keep-alive) impose on every request.",
        "- Recall requests: `POST /api/recall/` `{project, query, messages, top_k: 5}` with a "
        "uniformly random namespace and one of the corpus's 260 queries; its path hints are "
        "one user message naming them. Every answer carries the candidates, the stable block "
        "and the context block.",
        "- Upsert requests: `POST /api/memories/` `{project, key, value, tags}` with new keys "
        f"(the tail of `make_corpus({cfg['per_namespace'] + TAIL:,})`, unused in the corpus), "
        "round robin over the namespaces; every one answered 201 when it created a row.",
        f"- Mix: each request is an upsert with probability {cfg['mix_upsert']:.0%}, else a "
        "recall.",
        "- Errors: any answer that is not 2xx, any connection error or timeout "
        f"({REQUEST_TIMEOUT_S:.0f} s), and a 2xx recall whose body is not a recall result.",
        "",
        "## Seeding",
        "",
    ]
    if seed_.get("reused"):
        lines.append(
            f"Reused the database seeded at {seed_['seeded_at']} (`--keep-db`); the last "
            f"run's {seed_['removed_rows']:,} upserted rows were deleted first."
        )
    else:
        lines += [
            f"- `manage.py migrate`: {seed_['migrate_s']} s.",
            f"- Namespace `{ns_name(0)}` through the real import path, `manage.py memory import "
            f"FILE --project {ns_name(0)}` (JSON lines: parsed, guarded, classified, one "
            f"transaction, `memory_events` rows): {seed_['import_s']} s, "
            f'{seed_["import_rows_per_s"]:,} rows/s ("{seed_["import_output"]}").',
            f"- The other {cfg['namespaces'] - 1} namespaces: copies of those rows with one SQL "
            "`INSERT INTO memories … SELECT … FROM memories WHERE namespace = "
            f"'{ns_name(0)}'` per namespace (new ids, `left(md5(random() || clock_timestamp() "
            "|| id), 16)`: 16 hex digits like `memoryapp.models.new_id()`; every other column "
            "copied, timestamps included, so every namespace scores like the first): "
            f"{seed_['copy_s']} s. No `memory_events` rows for the copies "
            f"({seed_['events_rows']:,} events in all, the import's); the change-counter "
            "triggers on `memories` fired for every copy ("
            + ", ".join(f"`{t}`" for t in seed_["triggers"])
            + f"; `memories_change` = {seed_['counter']} after the seed).",
            "- Then `VACUUM (ANALYZE) memories`, `ANALYZE` and `CHECKPOINT`: "
            f"{seed_['vacuum_analyze_s']} s (VACUUM too: this server runs with autovacuum "
            f"{v.get('pg_autovacuum')}, and where it is on, its insert threshold would start a "
            "vacuum of the new rows during a measured phase; CHECKPOINT so that the seed's WAL "
            "is not flushed in one).",
        ]
    lines += [
        "",
        "## Recall index LRU (`MEMORYAPP_RECALL_CACHE_BYTES`)",
        "",
        f"One namespace's index ({cache['index_rows']:,} rows), built in a separate "
        f"interpreter: {cache['index_nbytes'] / 2**20:.1f} MiB by its own estimate (`nbytes`, "
        f"what the LRU counts), RSS +{cache['index_rss_growth_mib']} MiB, "
        f"{cache['index_build_s']} s. {cfg['namespaces']} namespaces need "
        f"{cache['needed_bytes'] / 2**20:,.0f} MiB per worker; the default cap is "
        f"{DEFAULT_CACHE_BYTES / 2**20:.0f} MiB. {cache['note']}",
        "",
        "## Warm-up",
        "",
        f"{warm['total_s']} s in all: {warm['build_pass_s']} s for one pair of concurrent "
        f"recalls per namespace (each worker builds the namespace's index; first-pair latency "
        f"p50 {warm['first_pair_latency_ms'].get('p50', 0):,.0f} ms, max "
        f"{warm['first_pair_latency_ms'].get('max', 0):,.0f} ms), then {warm['verify_pass_s']} "
        f"s verifying: a pair per namespace until both answer in under "
        f"{warm['verify_threshold_ms']} ms ({warm['namespaces_needing_more_than_one_verify_round']}"
        f" namespaces needed more than one pair; unverified: "
        f"{', '.join(warm['unverified_namespaces']) or 'none'}). Not part of the phases below. "
        + no_build_check(report),
        "",
        *[
            f"Catch-up before the {name} phase (untimed): the upsert phase left each index "
            f"{report['phases']['upsert']['upsert']['requests'] / cfg['namespaces']:,.0f} rows "
            f"behind per namespace; one pair of recalls per namespace took {c['total_s']} s, "
            f"first recall per namespace and worker p50 "
            f"{c['first_pair_latency_ms'].get('p50', 0):,.0f} ms, p99 "
            f"{c['first_pair_latency_ms'].get('p99', 0):,.0f} ms, max "
            f"{c['first_pair_latency_ms'].get('max', 0):,.0f} ms (deltas per worker "
            f"{c['deltas_per_worker']}, builds {c['builds']}, errors {c['errors']})."
            for name, c in report.get("catch_up", {}).items()
        ],
        "",
        "## Results",
        "",
        *phase_rows(report["phases"]),
        "",
        "Reading the table: the clients are closed-loop, so by Little's law mean latency ≈ "
        "concurrency / throughput, and with 2 sync workers the time a worker spends per "
        "request ≈ 2 / throughput: "
        + "; ".join(
            f"{name} {1e3 * 2 / p['all']['throughput_rps']:.1f} ms per request per worker "
            f"(mean latency {p['all']['latency_ms'].get('mean', 0):.1f} ms)"
            for name, p in report["phases"].items()
            if p["all"]["throughput_rps"]
        )
        + ". The rest of each latency is the wait for a free worker.",
        "",
        "Throttles really off: "
        + "; ".join(
            f"{name} {p['all']['throughput_rps'] * 60:,.0f} requests/min"
            for name, p in report["phases"].items()
        )
        + " from one client token, above the default rates (write 1200/min, recall 2400/min), "
        "and no 429.",
        "",
        "Throughput per 10-second window, lowest–highest (req/s, all kinds): "
        + "; ".join(
            f"{name} {min(p['rps_per_10s_window']):.1f}–{max(p['rps_per_10s_window']):.1f}"
            if p["rps_per_10s_window"]
            else f"{name} (phase shorter than 10 s)"
            for name, p in report["phases"].items()
        )
        + ".",
        "",
        "CPU during each phase, in CPUs busy on average (2.00 = both vCPUs all the time):",
        "",
        "| phase | machine | gunicorn workers | PostgreSQL (bench backends) | load client "
        "| other |",
        "|---|---:|---:|---:|---:|---:|",
        *[
            f"| {name} | {c['machine_busy_cpus']:.2f} | {c['workers_cpus']:.2f} | "
            f"{c['postgres_cpus']:.2f} | {c['client_cpus']:.2f} | {c['other_cpus']:.2f} |"
            for name, c in ((n, p["cpu"]) for n, p in report["phases"].items())
        ],
        "",
        '"other" is everything else on the machine (other people\'s test suites run beside the '
        "bench). Its largest groups among processes alive for the whole phase: "
        + "; ".join(
            f"{name}: "
            + (", ".join(f"{label} {c:.2f}" for label, c in p["cpu"]["other_top"]) or "none")
            for name, p in report["phases"].items()
        )
        + ". Short-lived processes (a test run's many interpreters, per-request database "
        'connections) are in "other" but in none of these groups.',
        "",
        "Answer statuses: "
        + "; ".join(
            f"{name}: "
            + ", ".join(
                f"{kind} " + ", ".join(f"{st} × {n:,}" for st, n in p[kind]["statuses"].items())
                for kind in ("recall", "upsert")
                if kind in p
            )
            for name, p in report["phases"].items()
        )
        + ".",
        "",
        "Recall answers with no candidate at all: "
        + "; ".join(
            f"{name} {p['recall']['empty_candidates']:,} of {p['recall']['requests']:,}"
            for name, p in report["phases"].items()
            if "recall" in p
        )
        + " (queries whose words match no memory; a query that matched in one answer and not "
        "in another would be flagged: "
        + (
            ", ".join(
                f"{name}: {p['inconsistent_empty_queries']}"
                for name, p in report["phases"].items()
                if p["inconsistent_empty_queries"]
            )
            or "none"
        )
        + ").",
        "",
        "## Gunicorn workers",
        "",
        "| worker pid | RSS after warm-up (MiB) | RSS at the end (MiB) | peak RSS, VmHWM (MiB) |",
        "|---|---:|---:|---:|",
        *[
            f"| {pid} | {w['after_warm_up'].get('VmRSS', '–')} | {w['end'].get('VmRSS', '–')} | "
            f"{w['end'].get('VmHWM', '–')} |"
            for pid, w in report["workers"].items()
        ],
        "",
        "Worker pids were the same at the start and the end (no worker restarted)."
        if report["workers_restarted"] is False
        else f"**Workers changed during the run**: {report['workers_restarted']} "
        f"(see bench/out/{GUNICORN_LOG.name}).",
        "",
    ]
    errors_lines = [
        f"- {name}: {sample}"
        for name, p in report["phases"].items()
        for sample in p["error_samples"]
    ] + [f"- warm-up: {sample}" for sample in warm["error_samples"]]
    if errors_lines:
        lines += ["## First error bodies", "", *errors_lines, ""]
    RESULTS_MD.write_text("\n".join(lines))


# ============================================================================ main
def decide_cache(args: argparse.Namespace, base_env: dict[str, str]) -> tuple[dict, dict]:
    """Measure one index; raise the LRU cap when the namespaces do not fit under it.

    Returns (environment additions for the server, the facts for the report).
    """
    probe = preflight(
        django_env({**base_env, "MEMORYAPP_RECALL_CACHE_BYTES": "1234567"}), ns_name(0)
    )
    env_supported = probe["recall_cache_bytes"] == 1234567
    needed = probe["index_nbytes"] * args.namespaces
    facts = {
        "index_nbytes": probe["index_nbytes"],
        "index_rows": probe["index_rows"],
        "index_build_s": probe["index_build_s"],
        "index_rss_growth_mib": probe["index_rss_growth_mib"],
        "needed_bytes": needed,
        "settings_reads_env": env_supported,
    }
    if args.recall_cache_mib == "auto":
        # Room for the upserts' growth and the estimate's error: 1.5×, in 64 MiB steps.
        cap = max(DEFAULT_CACHE_BYTES, math.ceil(1.5 * needed / 2**26) * 2**26)
    else:
        cap = int(args.recall_cache_mib) * 2**20 if int(args.recall_cache_mib) else 0
    facts["fits"] = needed <= (cap or DEFAULT_CACHE_BYTES)
    if not cap or cap == DEFAULT_CACHE_BYTES:
        facts["cap_bytes"] = DEFAULT_CACHE_BYTES
        facts["mechanism"] = "default"
        fits = needed <= DEFAULT_CACHE_BYTES
        facts["note"] = (
            "They fit: the default cap is kept."
            if fits
            else "**They do not fit, and the default cap was kept (`--recall-cache-mib 0`)**: "
            "the least recently used indexes are dropped and rebuilt on their next recall."
        )
        return {}, facts
    facts["cap_bytes"] = cap
    (SETTINGS_DIR / f"{OVERLAY_MODULE}.py").unlink(missing_ok=True)  # a previous run's
    if env_supported:
        facts["mechanism"] = "env"
        facts["note"] = (
            f"The bench raised it to {cap / 2**20:,.0f} MiB through the environment "
            "(`MEMORYAPP_RECALL_CACHE_BYTES`, which project/settings.py reads)."
        )
        return {"MEMORYAPP_RECALL_CACHE_BYTES": str(cap)}, facts
    write_overlay(cap)
    facts["mechanism"] = "overlay settings module"
    facts["note"] = (
        f"project/settings.py does not read `MEMORYAPP_RECALL_CACHE_BYTES` from the environment, "
        f"so the bench raised it to {cap / 2**20:,.0f} MiB with a generated settings module, "
        f"`bench/out/api_settings/{OVERLAY_MODULE}.py` (`from project.settings import *` plus "
        "the cap; `DJANGO_SETTINGS_MODULE` points at it). The one-line change that would let "
        "an environment variable do it: `MEMORYAPP_RECALL_CACHE_BYTES = env.int("
        '"MEMORYAPP_RECALL_CACHE_BYTES", default=256 * 1024 * 1024)` in project/settings.py.'
    )
    return {"DJANGO_SETTINGS_MODULE": OVERLAY_MODULE}, facts


def check_server_settings(env: dict[str, str], cache: dict[str, Any]) -> dict[str, Any]:
    """The settings the server will run with, checked before it starts."""
    found = preflight({**env, "PYTHONPATH": f"{ROOT}:{SETTINGS_DIR}"})
    problems = []
    if found["debug"]:
        problems.append("DEBUG is on")
    if "127.0.0.1" not in found["allowed_hosts"] and "*" not in found["allowed_hosts"]:
        problems.append(f"ALLOWED_HOSTS {found['allowed_hosts']} refuses 127.0.0.1")
    if any(found["throttle_rates"].get(s) for s in ("write", "recall", "erase")):
        problems.append(f"throttles still on: {found['throttle_rates']}")
    if found["recall_cache_bytes"] != cache["cap_bytes"]:
        problems.append(f"recall cache {found['recall_cache_bytes']} != {cache['cap_bytes']}")
    if problems:
        raise SystemExit("server settings are not what the bench needs: " + "; ".join(problems))
    return found


def worker_snapshot(pids: list[int]) -> dict[int, dict[str, float]]:
    return {pid: proc_status(pid) for pid in pids}


class TenantWorkload(Workload):
    """Recall bodies over the namespaces of a database seeded by bench/tenants.py.

    Tenant ``t`` (``tenants/t00000`` …) holds ``make_corpus(M, seed=1234 + t % K)``
    (``K``: ``--tenants-copies``, the distinct corpora; the others are SQL copies), so
    its queries are those of seed ``1234 + t % K``. Recall only: no upserts.
    """

    def __init__(self, tenants: int, copies: int) -> None:
        module = load_corpus_module()
        self.namespaces = tenants
        self.copies = copies or tenants
        self.tail, self.upserts = [], 0
        self.by_source = []
        for source in range(self.copies):
            bodies = []
            for query, hints in module.make_queries(SEED + source):
                body: dict[str, Any] = {"query": query, "top_k": 5}
                if hints:
                    body["messages"] = [{"role": "user", "content": " ".join(hints)}]
                bodies.append(body)
            self.by_source.append(bodies)
        self.recalls = self.by_source[0]

    def recall(self, rng: random.Random, namespace: int | None = None) -> tuple[int, bytes]:
        t = rng.randrange(self.namespaces) if namespace is None else namespace
        bodies = self.by_source[t % self.copies]
        q = rng.randrange(len(bodies))
        return q, json.dumps({"project": f"tenants/t{t:05d}", **bodies[q]}).encode()


def cold_phase(
    env: dict[str, str], args: argparse.Namespace, token: str, workload: Workload
) -> tuple[Server, dict[str, Any]]:
    """Fresh gunicorn (``--cold-workers``), no warm-up: uniform recalls from the first request.

    Every worker starts with no index at all; what a request needs it builds, or loads
    from the stored recall snapshots (``MEMORYAPP_RECALL_SNAPSHOTS``, on by default).
    Returns the running server (the caller stops it) and the phase's figures.
    """
    name = f"cold recall ({args.cold_workers} workers restarted, no warm-up, uniform)"
    server = start_gunicorn(env, args, workers=args.cold_workers)
    ready_s = asyncio.run(wait_ready(server.port, token, workers=args.cold_workers))
    server.workers = children_of(server.process.pid)
    assert len(server.workers) == args.cold_workers, server.workers
    log(f"cold: gunicorn restarted, workers {server.workers}, ready in {ready_s:.1f} s")
    start = worker_snapshot(server.workers)
    meter = CpuMeter(server.workers)
    load_start = load()
    plog, elapsed = asyncio.run(
        run_phase(
            server.port, token, workload, args.duration, args.concurrency, 0.0, seed=SEED + 15
        )
    )
    figures = phase_figures(plog, elapsed)
    figures["cpu"] = meter.read()
    figures["raw"] = [
        [round(s.start, 4), s.kind, round(s.latency * 1e3, 3), s.status] for s in plog.samples
    ]
    # The first and the last ten seconds apart: the cold start is the first, the state
    # after a minute of uniform traffic the last.
    for label, keep in (
        ("first_10s", lambda s: s.start < 10),
        ("last_10s", lambda s: s.start >= elapsed - 10),
    ):
        window = [s.latency for s in plog.samples if keep(s)]
        figures[label] = {"requests": len(window), "latency_ms": summarize(window)}
    a = figures["all"]
    log(
        f"cold: {a['requests']:,} requests, {a['throughput_rps']:.1f} req/s, p50 "
        f"{a['latency_ms'].get('p50', 0):.1f} ms, p99 {a['latency_ms'].get('p99', 0):.1f} ms, "
        f"{a['errors']} errors"
    )
    for sample in plog.errors:
        log(f"  error: {sample}")
    return server, {
        "name": name,
        "workers": args.cold_workers,
        "ready_s": round(ready_s, 1),
        "load_start": load_start,
        "load_end": load(),
        "index_stats": worker_index_stats(server.workers),
        "workers_start": {str(k): v for k, v in start.items()},
        "workers_end": {str(k): v for k, v in worker_snapshot(server.workers).items()},
        "figures": figures,
    }


def run_tenants_cold(args: argparse.Namespace) -> None:
    """Only the cold phase, against a database kept by ``bench/tenants.py --keep-db``.

    Writes bench/out/api_cold.json (bench/tenants.py renders it into bench/TENANTS.md);
    never bench/API_RESULTS.md, whose figures are another workload's.
    """
    global DB_NAME
    DB_NAME = args.tenants_db
    began = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "HTTP API, cold workers over many tenants (issue 15)",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "bench/api_load.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "versions": versions(),
        "load_before": load(),
        "config": {
            "database": args.tenants_db,
            "tenants": args.tenants,
            "copies": args.tenants_copies,
            "duration": args.duration,
            "concurrency": args.concurrency,
            "cold_workers": args.cold_workers,
            "worker_class": args.worker_class,
            "conn_max_age": args.conn_max_age,
            "recall_cache_mib": args.recall_cache_mib,
        },
    }
    with pg_connect(PG_BASE_URL + DB_NAME) as conn:
        report["database"] = {
            "rows": conn.execute("SELECT count(*) FROM memories").fetchone()[0],
            "namespaces": conn.execute("SELECT count(*) FROM memory_slice_changes").fetchone()[0],
            "snapshots": conn.execute(
                "SELECT count(*), coalesce(sum(length(payload)), 0) FROM memory_recall_snapshots"
            ).fetchone(),
            "bytes": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0],
        }
    log(f"cold: database {DB_NAME}: {report['database']}")
    workload = TenantWorkload(args.tenants, args.tenants_copies)
    token = manage("memory", "client", CLIENT_NAME, "--grant", "tenants/", "--write", "--rotate")
    token = token.strip().splitlines()[-1]
    base = {
        "API_THROTTLE_WRITE": "",
        "API_THROTTLE_RECALL": "",
        "API_THROTTLE_ERASE": "",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    cap = int(args.recall_cache_mib) * 2**20 if args.recall_cache_mib not in ("auto", "0") else 0
    extra = {"MEMORYAPP_RECALL_CACHE_BYTES": str(cap)} if cap else {}
    env = django_env({**base, **extra, "DATABASE_URL": db_url(args.conn_max_age)})
    found = preflight({**env, "PYTHONPATH": f"{ROOT}:{SETTINGS_DIR}"})
    assert not found["debug"] and not any(found["throttle_rates"].get(k) for k in ("recall",))
    report["server_settings"] = found
    report["code"] = code_version()
    server = None
    try:
        server, report["cold"] = cold_phase(env, args, token, workload)
        report["gunicorn_command"] = shlex.join(server.command)
    finally:
        stop_gunicorn(server)
    report["code_end"] = code_version()
    report["load_after"] = load()
    report["wall_s"] = round(time.perf_counter() - began, 1)
    path = OUT / "api_cold.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    c = report["cold"]["figures"]
    log("")
    for line in phase_rows({report["cold"]["name"]: c}):
        log(line)
    for pid, w in report["cold"]["workers_end"].items():
        stats = report["cold"]["index_stats"].get(int(pid), {})
        log(
            f"  worker {pid}: VmRSS {w.get('VmRSS')} MiB, VmHWM {w.get('VmHWM')} MiB, builds "
            f"{stats.get('builds')}, loads {stats.get('loads')}, indexes held "
            f"{stats.get('entries')} ({stats.get('nbytes', 0) / 2**20:,.0f} MiB)"
        )
    log(f"wrote {path.relative_to(ROOT)} in {report['wall_s'] / 60:.1f} min")


def run(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "HTTP API load (issue 7)",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "bench/api_load.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "versions": versions(),
        "load_before": load(),
        "config": {
            "namespaces": args.namespaces,
            "per_namespace": args.per_namespace,
            "duration": args.duration,
            "concurrency": args.concurrency,
            "mix_upsert": args.mix_upsert,
            "worker_class": args.worker_class,
            "threads": args.threads if args.worker_class == "gthread" else 1,
            "conn_max_age": args.conn_max_age,
            "keep_db": args.keep_db,
        },
    }
    jsonl, meta = prepare_corpus(args.per_namespace)
    workload = Workload(meta, args.namespaces)

    server = None
    try:
        seeded = reuse_seeded(jsonl, args.namespaces, args.per_namespace) if args.keep_db else None
        if seeded is None:
            recreate_database()
            seeded = seed(jsonl, args.namespaces, args.per_namespace)
        report["seed"] = seeded
        token = manage("memory", "client", CLIENT_NAME, "--grant", NS_PREFIX, "--write", "--rotate")
        token = token.strip().splitlines()[-1]

        # Empty rates switch throttling off (settings.py: `env(...) or None`); checked below.
        base = {
            "API_THROTTLE_WRITE": "",
            "API_THROTTLE_RECALL": "",
            "API_THROTTLE_ERASE": "",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
        }
        cache_env, report["recall_cache"] = decide_cache(args, base)
        log(f"recall LRU: {report['recall_cache']['note']}")
        env = django_env({**base, **cache_env, "DATABASE_URL": db_url(args.conn_max_age)})
        report["server_settings"] = check_server_settings(env, report["recall_cache"])
        report["code"] = code_version()

        server = start_gunicorn(env, args)
        report["gunicorn_command"] = shlex.join(server.command)
        ready_s = asyncio.run(wait_ready(server.port, token, workers=args.workers))
        server.workers = children_of(server.process.pid)
        log(f"gunicorn: port {server.port}, workers {server.workers}, ready in {ready_s:.1f} s")
        assert len(server.workers) == args.workers, f"expected {args.workers}, {server.workers}"

        log(f"warm-up: {args.namespaces} namespaces ...")
        report["warm_up"] = asyncio.run(
            # Verifying cannot succeed when the LRU drops indexes: one round then.
            warm_up(
                server.port,
                token,
                workload,
                args.warm_threshold_ms / 1e3,
                5 if report["recall_cache"]["fits"] else 1,
            )
        )
        report["warm_up"]["ready_s"] = round(ready_s, 1)
        log(f"warm-up: {report['warm_up']['total_s']} s, {report['warm_up']['errors']} errors")
        after_warm = worker_snapshot(server.workers)
        report["index_stats"] = {"after warm-up": worker_index_stats(server.workers)}

        report["phases"], report["catch_up"] = {}, {}
        plan = [("recall", 0.0), ("upsert", 1.0), (f"mix {args.mix_upsert:.0%} upsert", None)]
        wrote = False
        for number, (name, share) in enumerate(plan, start=1):
            share = args.mix_upsert if share is None else share
            if wrote:
                # The upsert phase leaves every index behind by its rows; the first recall
                # of each namespace in each worker then catches up (a delta). That one-off
                # backlog is measured here, so that the next phase starts from current
                # indexes like the first one did.
                before = worker_index_stats(server.workers)
                catch_up = asyncio.run(
                    warm_up(server.port, token, workload, 0, 0, label="catch-up")
                )
                after = worker_index_stats(server.workers)
                catch_up["deltas_per_worker"] = {
                    str(p): after.get(p, {}).get("deltas", 0) - before.get(p, {}).get("deltas", 0)
                    for p in server.workers
                }
                catch_up["builds"] = sum(
                    after.get(p, {}).get("builds", 0) - before.get(p, {}).get("builds", 0)
                    for p in server.workers
                )
                catch_up["stats_after"] = after
                report["catch_up"][name] = catch_up
                log(
                    f"catch-up before {name}: {catch_up['total_s']} s, first recall per "
                    f"namespace p50 {catch_up['first_pair_latency_ms'].get('p50', 0):.0f} ms, "
                    f"deltas {catch_up['deltas_per_worker']}"
                )
            wrote = share > 0
            log(f"phase {name}: {args.duration:.0f} s at concurrency {args.concurrency} ...")
            meter = CpuMeter(server.workers)
            plog, elapsed = asyncio.run(
                run_phase(
                    server.port,
                    token,
                    workload,
                    args.duration,
                    args.concurrency,
                    share,
                    seed=number,
                )
            )
            cpu = meter.read()
            figures = phase_figures(plog, elapsed)
            figures["cpu"] = cpu
            figures["raw"] = [
                [round(s.start, 4), s.kind, round(s.latency * 1e3, 3), s.status]
                for s in plog.samples
            ]
            report["phases"][name] = figures
            report["index_stats"][name] = worker_index_stats(server.workers)
            a = figures["all"]
            log(
                f"phase {name}: {a['requests']:,} requests, {a['throughput_rps']:.1f} req/s, "
                f"p50 {a['latency_ms'].get('p50', 0):.1f} ms, p99 "
                f"{a['latency_ms'].get('p99', 0):.1f} ms, {a['errors']} errors"
            )
            for sample in plog.errors:
                log(f"  error: {sample}")

        if args.cold_phase:
            ended = worker_snapshot(server.workers)
            stop_gunicorn(server)
            server, report["cold"] = cold_phase(env, args, token, workload)
            report["cold"]["warm_server_end"] = {str(k): v for k, v in ended.items()}
            report["phases"][report["cold"]["name"]] = report["cold"].pop("figures")
        end = worker_snapshot(server.workers)
        now_workers = children_of(server.process.pid)
        report["workers_restarted"] = (
            False
            if now_workers == server.workers
            else {"start": server.workers, "end": now_workers}
        )
        report["workers"] = {
            str(pid): {"after_warm_up": after_warm.get(pid, {}), "end": end.get(pid, {})}
            for pid in server.workers
        }
        report["code_end"] = code_version()
    finally:
        stop_gunicorn(server)
        if not args.keep_db:
            drop_database()
    report["load_after"] = load()
    report["wall_s"] = round(time.perf_counter() - began, 1)
    RESULTS_JSON.write_text(json.dumps(report, indent=1) + "\n")
    write_markdown(report)
    print_table(report)


def print_table(report: dict[str, Any]) -> None:
    log("")
    for line in phase_rows(report["phases"]):
        log(line)
    warm = report["warm_up"]
    log(f"\n{no_build_check(report)}")
    log(f"warm-up {warm['total_s']} s ({warm['errors']} errors); worker RSS at the end:")
    for pid, w in report["workers"].items():
        log(f"  worker {pid}: VmRSS {w['end'].get('VmRSS')} MiB, VmHWM {w['end'].get('VmHWM')} MiB")
    total = sum(p["all"]["errors"] for p in report["phases"].values()) + warm["errors"]
    total += sum(c["errors"] for c in report.get("catch_up", {}).values())
    log(
        f"\n{total} errors; wrote {RESULTS_MD.relative_to(ROOT)} and "
        f"{RESULTS_JSON.relative_to(ROOT)} in {report['wall_s'] / 60:.1f} min"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--per-namespace", type=int, default=10_000)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--concurrency", type=int, default=4, help="concurrent clients")
    parser.add_argument("--mix-upsert", type=float, default=0.2, help="upsert share of the mix")
    parser.add_argument("--keep-db", action="store_true", help="reuse and keep the database")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 4 namespaces × 1,000, 5 s phases"
    )
    parser.add_argument(
        "--conn-max-age",
        type=int,
        default=600,
        help="DATABASE_URL conn_max_age of the server (0: a connection per request)",
    )
    parser.add_argument(
        "--recall-cache-mib",
        default="auto",
        help="recall LRU cap for the server: auto (fit every namespace), N MiB, 0 (default)",
    )
    parser.add_argument("--worker-class", choices=["sync", "gthread"], default="sync")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (warm phases)")
    parser.add_argument(
        "--cold-phase",
        action="store_true",
        help="end with a cold phase: gunicorn restarted with --cold-workers, no warm-up, "
        "uniform recalls",
    )
    parser.add_argument("--cold-workers", type=int, default=4, help="gunicorn workers, cold")
    parser.add_argument(
        "--tenants-db",
        default="",
        help="only the cold phase, on this database kept by bench/tenants.py --keep-db "
        "(tenants/t00000 …); writes bench/out/api_cold.json",
    )
    parser.add_argument("--tenants", type=int, default=1000, help="with --tenants-db")
    parser.add_argument(
        "--tenants-copies",
        type=int,
        default=0,
        help="with --tenants-db: its --seed-sql-copies K (tenant t holds seed 1234 + t %% K)",
    )
    parser.add_argument("--threads", type=int, default=2, help="threads per gthread worker")
    parser.add_argument(
        "--warm-threshold-ms",
        type=float,
        default=150.0,
        help="a warm-up pair faster than this means both workers hold the index",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite bench/API_RESULTS.md from bench/out/api_load.json without measuring",
    )
    args = parser.parse_args()
    if args.report_only:
        report = json.loads(RESULTS_JSON.read_text())
        write_markdown(report)
        print_table(report)
        return
    if args.tenants_db:
        run_tenants_cold(args)
        return
    if args.quick:
        args.namespaces, args.per_namespace, args.duration = 4, 1000, 5.0
    if args.namespaces > 1000:
        parser.error("at most 1000 namespaces (names are ns000 … ns999)")
    run(args)


if __name__ == "__main__":
    main()
