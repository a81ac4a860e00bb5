"""End-to-end recall benchmark through ``MemoryManager`` (issue 3, item 5), with Agentao for scale.

Usage: .venv/bin/python bench/recall.py [--sizes 1000,10000,100000] [--vendors sqlite,postgresql]
       [--runs 2] [--agentao-sizes 1000,10000,50000] [--quick]

Every (system, vendor, N, run) is measured in a fresh interpreter (clean peak RSS, cold index):
this file re-runs itself with ``--worker``. SQLite runs use a fresh file under bench/out/ with
project/settings.py's options (WAL, IMMEDIATE transactions); PostgreSQL runs use a fresh
database on postgres://postgres@127.0.0.1:5432, created and dropped here. The corpus is
``bench/corpus.py`` (``make_corpus(n, seed=1234)``), imported by path and cached as JSON
lines under bench/out/corpus/. Figures are medians over the runs; raw figures go to
bench/out/recall.json and the summary to bench/RESULTS.md (the block between the
``analysis`` markers in RESULTS.md is kept when the file is rewritten).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import (  # bench/ is sys.path[0]
    code_version,
    current_rss_mib,
    host_info,
    load_corpus_module,
    messages_for,
    peak_rss_mib,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
CORPUS_DIR = OUT / "corpus"
RESULTS_MD = ROOT / "bench" / "RESULTS.md"
RESULTS_JSON = OUT / "recall.json"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_BASE_URL = "postgres://postgres@127.0.0.1:5432/"

SEED = 1234
WARM_QUERIES = 200
WARM_PASSES = 2  # timed passes over the warm queries, after one untimed pass
WRITE_ROUNDS = 50
UPSERTS = 2000  # new keys upserted through the manager (index warm)
STABLE_REPEATS = 5  # fresh managers, so the stable cache is cold every time
CONCURRENT_QUERIES = 200
CONCURRENT_BUDGET_S = 20.0  # a state of A whose recalls are this slow gets fewer queries
UPSERT_BUDGET_S = 20.0  # fewer than UPSERTS upserts when they are this slow
NS_A = "bench/a"
NS_B = "bench/b"
PARITY_N = 10_000
PARITY_TOP_K = 5
PARITY_SCORE_TOL = 1e-6
TIE_TOL = 1e-9  # two scores this close are a tie (both systems order ties arbitrarily)
DAY = 86400.0
VENDOR_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
ANALYSIS_START = "<!-- analysis:start -->"
ANALYSIS_END = "<!-- analysis:end -->"


# ============================================================================ shared helpers
def log(message: str) -> None:
    print(message, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1e3 * statistics.median(seconds), 3),
        "p95_ms": round(1e3 * percentile(seconds, 0.95), 3),
        "max_ms": round(1e3 * max(seconds), 3),
        "count": len(seconds),
    }


# ============================================================================ corpus cache
def _corpus_stamp(module: Any) -> str:
    source = Path(module.__file__).read_bytes()
    return hashlib.sha256(source + f"seed={SEED} upserts={UPSERTS}".encode()).hexdigest()[:16]


def prepare_corpora(sizes: list[int]) -> None:
    """Write ``n{N}.jsonl`` (the corpus, import format) and ``n{N}.meta.json`` per size.

    meta: the extras, the 260 queries, and ``tail``: ``UPSERTS`` more triples with fresh keys
    (the corpus for a larger n is a prefix, so make_corpus(max + UPSERTS) supplies them).
    """
    module = load_corpus_module()
    stamp = _corpus_stamp(module)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    stamp_file = CORPUS_DIR / "stamp"
    if not stamp_file.exists() or stamp_file.read_text() != stamp:
        for old in CORPUS_DIR.glob("n*"):
            old.unlink()
        stamp_file.write_text(stamp)
    missing = [n for n in sizes if not (CORPUS_DIR / f"n{n}.meta.json").exists()]
    if not missing:
        return
    started = time.perf_counter()
    biggest = max(missing) + UPSERTS
    log(f"corpus: generating make_corpus({biggest:,}) for the upsert keys ...")
    big, _, _ = module.make_corpus(biggest, seed=SEED)
    for n in sorted(missing):
        log(f"corpus: generating make_corpus({n:,}) ...")
        corpus, extras, queries = module.make_corpus(n, seed=SEED)
        assert [k for k, _, _ in big[:n]] == [k for k, _, _ in corpus], "prefix property"
        taken = {module._norm_key(k) for k, _, _ in corpus + extras}
        tail = [t for t in big[n : n + UPSERTS] if module._norm_key(t[0]) not in taken]
        with open(CORPUS_DIR / f"n{n}.jsonl", "w", encoding="utf-8") as f:
            for key, value, tags in corpus:
                f.write(json.dumps({"key": key, "value": value, "tags": tags}) + "\n")
        meta = {"n": n, "extras": extras, "queries": queries, "tail": tail}
        (CORPUS_DIR / f"n{n}.meta.json").write_text(json.dumps(meta))
    log(f"corpus: ready in {time.perf_counter() - started:.1f} s")


def read_meta(n: int) -> dict[str, Any]:
    return json.loads((CORPUS_DIR / f"n{n}.meta.json").read_text())


def read_triples(n: int) -> list[tuple[str, str, list[str]]]:
    out = []
    with open(CORPUS_DIR / f"n{n}.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            out.append((record["key"], record["value"], record["tags"]))
    return out


# ============================================================================ databases
def sqlite_path(tag: str) -> Path:
    return OUT / f"db-{tag}.sqlite3"


def remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()


def pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(sql)


def create_database(vendor: str, tag: str) -> str:
    """A fresh database for one run; returns its DATABASE_URL."""
    if vendor == "sqlite":
        path = sqlite_path(tag)
        remove_sqlite(path)
        return f"sqlite:///{path}"
    name = "memoryapp_bench_" + tag.replace("-", "_")
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')
    return PG_BASE_URL + name


def drop_database(vendor: str, tag: str) -> None:
    if vendor == "sqlite":
        remove_sqlite(sqlite_path(tag))
    else:
        name = "memoryapp_bench_" + tag.replace("-", "_")
        with contextlib.suppress(Exception):
            pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django() -> None:
    """Django with project.settings on the DATABASE_URL the orchestrator set; migrated."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("MEMORYAPP_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    if os.environ.get("MEMORYAPP_BENCH_NO_MIGRATE") != "1":
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def database_versions() -> dict[str, str]:
    versions = {"sqlite": sqlite3.sqlite_version}
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
            versions["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except Exception:
        versions["postgresql"] = "unavailable"
    return versions


# ============================================================================ our worker
class FrozenClock:
    """Stands in for the ``time`` module inside memoryapp.facade: ``time()`` is fixed."""

    def __init__(self, at: float) -> None:
        self.at = at

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def time(self) -> float:
        return self.at


def _manager_modules() -> list[Any]:
    """memoryapp.facade and memoryapp.services with their submodules: the facade, and the
    services it delegates to (recall reads the clock in ``services.prompt``)."""
    import memoryapp.facade
    import memoryapp.services.prompt  # noqa: F401  (imported so that it is in sys.modules)

    packages = (["memoryapp", "facade"], ["memoryapp", "services"])
    names = [name for name in sys.modules if name.split(".")[:2] in packages]
    return [sys.modules[name] for name in names] or [memoryapp.facade]


def freeze_our_clock(at: float | None) -> None:
    """Freeze (or, with None, restore) ``time.time()`` as ``MemoryManager.recall`` sees it.

    Only the manager and services modules' reference to the ``time`` module is replaced, so
    the rest of the process (Django's timestamps, the database) keeps the real clock.
    """
    for module in _manager_modules():
        current = getattr(module, "time", None)
        if current is time or isinstance(current, FrozenClock):
            module.time = time if at is None else FrozenClock(at)


def forget_indexes() -> None:
    """Drop every cached index and stored recall snapshot: the next recall rebuilds.

    After ``spread_timestamps`` a rebuild is required, not merely wanted: it stamps
    rows in the past, and a delta (of a cached index, or of a stored snapshot a
    cold process loads) finds changed rows by their recent ``updated_at`` only.
    """
    from memoryapp.models import RecallSnapshot
    from memoryapp.recall.cache import INDEXES

    INDEXES.clear()
    RecallSnapshot.objects.all().delete()


def index_entry(using: str, namespace: str) -> Any:
    from memoryapp.recall.cache import INDEXES

    return INDEXES._entries.get((using, namespace, "project"))


def import_corpus(mm: Any, n: int) -> tuple[float, float, Any]:
    """Import the cached corpus as `manage.py memory import` does; (wall s, CPU s, report)."""
    from memoryapp.writes.bulk import parse_json_lines

    started, cpu = time.perf_counter(), time.process_time()
    with open(CORPUS_DIR / f"n{n}.jsonl", encoding="utf-8") as f:
        report = mm.import_memories(parse_json_lines(f), actor="bench")
    return time.perf_counter() - started, time.process_time() - cpu, report


def worker_import(args: argparse.Namespace) -> dict[str, Any]:
    """Migrate a fresh database and import the corpus (its own process: its own peak RSS)."""
    started = time.perf_counter()
    setup_django()
    from memoryapp import MemoryManager

    n, label = args.n, f"[ours {args.vendor} N={args.n:,} run {args.run}]"
    result: dict[str, Any] = {"migrate_s": round(time.perf_counter() - started, 2)}
    result["import_load_start"] = round(os.getloadavg()[0], 2)
    # -- bulk import (the path of `manage.py memory import FILE`, JSON lines parsed too)
    elapsed, cpu, report = import_corpus(MemoryManager(project=NS_A), n)
    assert report.created == n, report
    result["import_s"] = round(elapsed, 3)
    result["import_cpu_s"] = round(cpu, 3)
    result["import_rows_per_s"] = round(n / elapsed)
    result["import_peak_rss_mb"] = peak_rss_mib()
    log(
        f"{label} import {n:,} rows in {elapsed:.2f} s ({n / elapsed:,.0f} rows/s, "
        f"CPU {cpu:.1f} s, peak RSS {result['import_peak_rss_mb']:.0f} MiB)"
    )
    return result


def timed(calls: list[tuple[Any, tuple]]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each call."""
    walls, cpus = [], []
    for function, call_args in calls:
        started, cpu = time.perf_counter(), time.process_time()
        function(*call_args)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - started)
    return walls, cpus


def with_cpu(walls: list[float], cpus: list[float]) -> dict[str, float]:
    stats = summary_ms(walls)
    stats["cpu_p50_ms"] = round(1e3 * statistics.median(cpus), 3)
    stats["cpu_p95_ms"] = round(1e3 * percentile(cpus, 0.95), 3)
    return stats


def worker_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement but the import, in a fresh interpreter on the imported database."""
    os.environ["MEMORYAPP_BENCH_NO_MIGRATE"] = "1"
    setup_django()
    from django.db import connection

    from memoryapp import MemoryManager
    from memoryapp.models import Memory
    from memoryapp.recall.cache import INDEXES

    n, label = args.n, f"[ours {args.vendor} N={args.n:,} run {args.run}]"
    meta = read_meta(n)
    queries, extras, tail = meta["queries"], meta["extras"], meta["tail"]
    warm = [(q, messages_for(h)) for q, h in queries[:WARM_QUERIES]]
    result: dict[str, Any] = {"system": "ours", "vendor": args.vendor, "n": n, "run": args.run}
    result["load_start"] = round(os.getloadavg()[0], 2)
    rss_start = current_rss_mib()

    # -- first recall after start: builds the index
    mm = MemoryManager(project=NS_A)
    builds = INDEXES.builds
    started, cpu = time.perf_counter(), time.process_time()
    first = mm.recall(*warm[0])
    result["first_recall_s"] = round(time.perf_counter() - started, 3)
    result["first_recall_cpu_s"] = round(time.process_time() - cpu, 3)
    assert INDEXES.builds == builds + 1 and first, "the first recall should build the index"
    entry = index_entry(connection.alias, NS_A)
    result["index_nbytes_mb"] = round(entry.index.nbytes / 2**20, 1)
    result["rss_after_build_mb"] = current_rss_mib()
    log(f"{label} first recall (index build) {result['first_recall_s']:.2f} s")

    # -- warm recall
    for query, messages in warm:
        mm.recall(query, messages)
    result["warm"] = with_cpu(*timed([(mm.recall, call) for call in warm] * WARM_PASSES))
    warm_stats = result["warm"]
    log(f"{label} warm recall p50 {warm_stats['p50_ms']:.2f} ms p95 {warm_stats['p95_ms']:.2f}")

    # -- write then recall: one new memory (its commit included), then the next query
    builds, deltas = INDEXES.builds, INDEXES.deltas
    rounds, cpus, writes, reads = [], [], [], []
    for j in range(WRITE_ROUNDS):
        key, value, tags = extras[j]
        query, hints = queries[WARM_QUERIES + j]
        started, cpu = time.perf_counter(), time.process_time()
        mm.upsert(key, value, tags)
        middle = time.perf_counter()
        mm.recall(query, messages_for(hints))
        ended = time.perf_counter()
        cpus.append(time.process_time() - cpu)
        rounds.append(ended - started)
        writes.append(middle - started)
        reads.append(ended - middle)
    result["write_recall"] = with_cpu(rounds, cpus)
    result["write_recall_upsert_p50_ms"] = round(1e3 * statistics.median(writes), 3)
    result["write_recall_recall_p50_ms"] = round(1e3 * statistics.median(reads), 3)
    result["write_recall_rebuilds"] = INDEXES.builds - builds
    result["write_recall_deltas"] = INDEXES.deltas - deltas
    log(
        f"{label} write+recall p50 {result['write_recall']['p50_ms']:.2f} ms "
        f"p95 {result['write_recall']['p95_ms']:.2f} (rebuilds {result['write_recall_rebuilds']})"
    )

    # -- stable block: select + render on fresh managers, the process's shared block
    # cache emptied before each (cold), then a fresh manager finding it shared (warm)
    renders, blocks, shared = [], set(), []
    for _ in range(STABLE_REPEATS):
        INDEXES.stable_blocks.clear()
        fresh = MemoryManager(project=NS_A)
        started = time.perf_counter()
        blocks.add(fresh.render_stable_block())
        renders.append(time.perf_counter() - started)
    for _ in range(STABLE_REPEATS):
        fresh = MemoryManager(project=NS_A)
        started = time.perf_counter()
        blocks.add(fresh.render_stable_block())
        shared.append(time.perf_counter() - started)
    entries = []
    for _ in range(3):
        started = time.perf_counter()
        count = len(list(MemoryManager(project=NS_A).get_stable_entries()))
        entries.append(time.perf_counter() - started)
    result["stable_block"] = summary_ms(renders)
    result["stable_block_shared"] = summary_ms(shared)
    result["stable_block_chars"] = len(blocks.pop()) if len(blocks) == 1 else -1
    result["stable_entries"] = summary_ms(entries)
    result["stable_entries_count"] = count
    log(
        f"{label} stable block {result['stable_block']['p50_ms']:.2f} ms; "
        f"get_stable_entries ({count:,} rows) {result['stable_entries']['p50_ms']:.1f} ms"
    )

    # -- recall in A while another OS process writes to B
    if n in args.concurrent_sizes:
        # Spreading needs a rebuild of A, too slow to repeat at the largest size.
        states = ("as_imported", "spread") if n <= PARITY_N else ("as_imported",)
        result["concurrent"] = concurrent_phase(mm, warm, label, states)

    # -- upserts through the manager (new keys, the index of A warm)
    started, cpu, done = time.perf_counter(), time.process_time(), 0
    for key, value, tags in tail:
        mm.upsert(key, value, tags)
        done += 1
        if time.perf_counter() - started > UPSERT_BUDGET_S:
            break
    elapsed = time.perf_counter() - started
    result["upserts"] = done
    result["upserts_per_s"] = round(done / elapsed)
    result["upsert_cpu_ms"] = round(1e3 * (time.process_time() - cpu) / done, 3)
    log(f"{label} {done:,} upserts in {elapsed:.2f} s ({done / elapsed:,.0f}/s)")

    # -- wipe_all
    live = Memory.objects.filter(namespace=NS_A).live().count()
    started, cpu = time.perf_counter(), time.process_time()
    wiped = MemoryManager(project=NS_A).wipe_all()
    result["wipe_all_s"] = round(time.perf_counter() - started, 3)
    result["wipe_all_cpu_s"] = round(time.process_time() - cpu, 3)
    assert wiped.ok and wiped.memories_cleared == live, wiped
    log(f"{label} wipe_all of {live:,} memories {result['wipe_all_s']:.2f} s")

    result["rss_start_mb"] = rss_start
    result["peak_rss_mb"] = peak_rss_mib()
    result["load_end"] = round(os.getloadavg()[0], 2)
    log(f"{label} peak RSS {result['peak_rss_mb']:.0f} MiB")
    return result


def spread_timestamps(namespace: str, days: float, seed: int, at: float) -> int:
    """Set every live row's created_at = updated_at uniformly in ``days`` before ``at``.

    In key order with a seeded RNG, so both vendors and Agentao's copy get the same values;
    one ``executemany`` of values in the field's own storage format (a raw writer, like any
    other process: the triggers move the counter). Returns the number of rows.
    """
    from django.db import connection, transaction

    from memoryapp.models import Memory

    field = Memory._meta.get_field("updated_at")
    rng = random.Random(seed)
    ids = Memory.objects.filter(namespace=namespace).live().order_by("key_normalized")
    params = []
    for memory_id in ids.values_list("id", flat=True):
        stamp = dt.datetime.fromtimestamp(at - rng.uniform(0, days * DAY), dt.UTC)
        value = field.get_db_prep_value(stamp, connection)
        params.append((value, value, memory_id))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            "UPDATE memories SET created_at = %s, updated_at = %s WHERE id = %s", params
        )
    return len(params)


def rows_in_delta_window(namespace: str) -> int:
    """Rows the next delta of A's index re-reads: updated since its watermark minus the slack.

    Reads the cached entry's own ``watermark`` and ``memoryapp.recall.cache.DELTA_SLACK``.
    """
    from django.db import connection

    import memoryapp.recall.cache as indexes
    from memoryapp.models import Memory

    entry = index_entry(connection.alias, namespace)
    if entry is None:
        return -1
    since = entry.watermark - getattr(indexes, "DELTA_SLACK", dt.timedelta(seconds=5))
    return Memory.objects.filter(namespace=namespace, updated_at__gte=since).count()


def concurrent_phase(mm: Any, warm: list, label: str, states: tuple[str, ...]) -> dict[str, Any]:
    """A's recall while a writer process upserts into B as fast as it can.

    Two states of A: ``as_imported`` (A's rows as the import and the write phases stamped
    them: nearly all within the delta slack of the newest one), time-boxed; then ``spread``
    (A's rows re-stamped over the last 30 days, the index rebuilt once before measuring).
    """
    from memoryapp.recall.cache import INDEXES

    out: dict[str, Any] = {}
    stop = Path(tempfile.mkdtemp(prefix="bench-stop-", dir=OUT)) / "stop"
    writer = subprocess.Popen(
        [sys.executable, __file__, "--worker", "writer", "--stop", str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        line = writer.stdout.readline()
        assert line.strip() == "ready", f"writer did not start: {line!r}"
        for state in states:
            if state == "spread":
                spread_timestamps(NS_A, 30.0, 11, time.time())
                forget_indexes()
                mm.recall(*warm[0])  # the one rebuild, outside the measurement
            window_rows = rows_in_delta_window(NS_A)
            builds, deltas = INDEXES.builds, INDEXES.deltas
            counter = mm.change_version()
            timings, began = [], time.perf_counter()
            for query, messages in warm[:CONCURRENT_QUERIES]:
                started = time.perf_counter()
                mm.recall(query, messages)
                timings.append(time.perf_counter() - started)
                if started - began > CONCURRENT_BUDGET_S:
                    break
            stats = summary_ms(timings)
            stats["rows_in_delta_window"] = window_rows
            stats["a_rebuilds"] = INDEXES.builds - builds
            stats["a_deltas"] = INDEXES.deltas - deltas
            stats["counter_moves"] = mm.change_version() - counter
            out[state] = stats
            log(
                f"{label} recall in A while B writes ({state}, {window_rows:,} rows of A within "
                f"the delta slack): {stats['count']} queries, p50 {stats['p50_ms']:.2f} ms, "
                f"p95 {stats['p95_ms']:.2f}; A rebuilds {stats['a_rebuilds']}, deltas "
                f"{stats['a_deltas']}, counter +{stats['counter_moves']}"
            )
    finally:
        stop.touch()
        tail = writer.communicate(timeout=120)[0]
        shutil.rmtree(stop.parent, ignore_errors=True)
    writer_result = json.loads(tail.strip().splitlines()[-1])
    out["writer_upserts"] = writer_result["writes"]
    out["writer_errors"] = writer_result["errors"]
    out["writer_upserts_per_s"] = writer_result["per_s"]
    return out


def worker_writer(args: argparse.Namespace) -> None:
    """Upsert into namespace B until the stop file appears; prints its count as JSON."""
    setup_django()
    from memoryapp import MemoryManager

    mm = MemoryManager(project=NS_B)
    mm.upsert("writer warm up", "The writer process is running.", ["bench"])
    print("ready", flush=True)
    from django.db import OperationalError

    stop = Path(args.stop)
    writes, errors, started = 0, 0, time.perf_counter()
    while not stop.exists():
        try:
            mm.upsert(f"writer key {writes}", f"Value {writes} written by process B.", ["bench"])
        except OperationalError:  # "database is locked" past the busy timeout: try again
            errors += 1
            continue
        writes += 1
    elapsed = time.perf_counter() - started
    print(json.dumps({"writes": writes, "errors": errors, "per_s": round(writes / elapsed)}))


# ============================================================================ Agentao
def load_agentao_store(path: Path, triples: list, stamps: dict[str, tuple[str, str]] | None = None):
    """An Agentao ``SQLiteMemoryStore`` holding ``triples``, classified by Agentao's own guard.

    Rows go in with one ``executemany`` in the store's own schema (as bench/recall_index.py
    does) instead of n upserts. ``stamps``: key_normalized -> (created_at, updated_at) ISO text.
    Returns the store and {id: key_normalized}.
    """
    from agentao.memory.guards import MemoryGuard
    from agentao.memory.storage import SQLiteMemoryStore

    guard = MemoryGuard()
    store = SQLiteMemoryStore(str(path))
    now = dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")  # Agentao's own timestamp format
    rows, keys = [], {}
    for i, (key, value, tags) in enumerate(triples):
        normalized = guard.normalize_key(key)
        title = guard.validate_title(key)
        content = guard.validate_content(value)
        scope = guard.classify_scope(normalized, list(tags))
        scope = "project" if scope == "user" else scope  # no user store: Agentao's downgrade
        created, updated = stamps[normalized] if stamps else (now, now)
        memory_id = f"a{i:07d}"
        keys[memory_id] = normalized
        rows.append(
            (
                memory_id,
                scope,
                guard.classify_type(normalized, list(tags)),
                normalized,
                title,
                content,
                json.dumps(list(tags)),
                json.dumps(guard.extract_keywords(title, list(tags), content)),
                created,
                updated,
            )
        )
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO memories (id, scope, type, key_normalized, title, content, tags_json,"
            " keywords_json, source, confidence, sensitivity, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'explicit', 'explicit_user', 'normal', ?, ?)",
            rows,
        )
    conn.close()
    return store, keys


def freeze_agentao_clock(at: float) -> None:
    import agentao.memory.retriever as retriever

    frozen = dt.datetime.fromtimestamp(at, dt.UTC)

    class FrozenDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen if tz is not None else frozen.replace(tzinfo=None)

    retriever.datetime = FrozenDatetime


def agentao_quiet() -> None:
    import logging

    logging.getLogger("agentao").setLevel(logging.ERROR)


def worker_agentao(args: argparse.Namespace) -> dict[str, Any]:
    agentao_quiet()
    from agentao.memory.manager import MemoryManager
    from agentao.memory.models import SaveMemoryRequest
    from agentao.memory.render import MemoryPromptRenderer
    from agentao.memory.retriever import MemoryRetriever

    n, label = args.n, f"[agentao N={args.n:,} run {args.run}]"
    meta = read_meta(n)
    queries, extras, tail = meta["queries"], meta["extras"], meta["tail"]
    warm_count = WARM_QUERIES if n <= 10_000 else 30
    rounds_count = 20 if n <= 1000 else 5 if n <= 10_000 else 2
    upsert_count = 300
    result: dict[str, Any] = {"system": "agentao", "vendor": "sqlite", "n": n, "run": args.run}
    result["load_start"] = round(os.getloadavg()[0], 2)
    path = OUT / f"agentao-{n}-run{args.run}.db"
    remove_sqlite(path)
    try:
        started = time.perf_counter()
        store, _ = load_agentao_store(path, read_triples(n))
        result["load_s"] = round(time.perf_counter() - started, 3)
        manager = MemoryManager(project_store=store)
        retriever = MemoryRetriever(manager)
        renderer = MemoryPromptRenderer()

        query, hints = queries[0]
        started = time.perf_counter()
        retriever.recall_candidates(query, context_hints=hints)
        result["first_recall_s"] = round(time.perf_counter() - started, 3)
        log(f"{label} first recall (index build) {result['first_recall_s']:.2f} s")

        timings = []
        for query, hints in queries[:warm_count]:
            started = time.perf_counter()
            retriever.recall_candidates(query, context_hints=hints)
            timings.append(time.perf_counter() - started)
        result["warm"] = summary_ms(timings)
        log(f"{label} warm recall p50 {result['warm']['p50_ms']:.1f} ms ({warm_count} queries)")

        rounds = []
        for j in range(rounds_count):
            key, value, tags = extras[j]
            query, hints = queries[WARM_QUERIES + j]
            started = time.perf_counter()
            manager.upsert(SaveMemoryRequest(key=key, value=value, tags=list(tags)))
            retriever.recall_candidates(query, context_hints=hints)
            rounds.append(time.perf_counter() - started)
        result["write_recall"] = summary_ms(rounds)
        log(f"{label} write+recall p50 {result['write_recall']['p50_ms']:.0f} ms ({rounds_count})")

        renders = []
        for _ in range(3):
            started = time.perf_counter()
            records = manager.get_stable_entries()
            session_tail = manager.get_cross_session_tail()
            shown = renderer.fit_stable_records(records, session_tail=session_tail)
            renderer.render_stable_block(shown, session_tail=session_tail)
            renders.append(time.perf_counter() - started)
        result["stable_block"] = summary_ms(renders)
        result["stable_entries_count"] = len(records)
        log(f"{label} stable block {result['stable_block']['p50_ms']:.0f} ms")

        started = time.perf_counter()
        for key, value, tags in tail[:upsert_count]:
            manager.upsert(SaveMemoryRequest(key=key, value=value, tags=list(tags)))
        elapsed = time.perf_counter() - started
        result["upserts"] = upsert_count
        result["upserts_per_s"] = round(upsert_count / elapsed)
        log(f"{label} {upsert_count} upserts: {upsert_count / elapsed:,.0f}/s")

        started = time.perf_counter()
        manager.wipe_all()
        result["wipe_all_s"] = round(time.perf_counter() - started, 3)
        manager.close()
    finally:
        remove_sqlite(path)
    result["peak_rss_mb"] = peak_rss_mib()
    log(f"{label} peak RSS {result['peak_rss_mb']:.0f} MiB")
    return result


# ============================================================================ parity
def worker_parity(args: argparse.Namespace) -> dict[str, Any]:
    """Top-5 of ours vs Agentao on the same corpus, same timestamps, both clocks frozen.

    Regimes: ``imported`` (the timestamps our import wrote, copied into Agentao's store) and
    ``spread`` (updated_at set 0-120 days before the frozen clock, so recency varies and a
    quarter of the memories are stale); both written through raw SQL-level updates before the
    first recall, and the same values given to Agentao.
    """
    setup_django()
    agentao_quiet()
    from agentao.memory.manager import MemoryManager as AgentaoManager
    from agentao.memory.retriever import MemoryRetriever

    from memoryapp import MemoryManager
    from memoryapp.models import Memory

    n, label = args.n, f"[parity {args.vendor} N={args.n:,}]"
    meta = read_meta(n)
    queries = meta["queries"][:WARM_QUERIES]
    triples = read_triples(n)
    import_corpus(MemoryManager(project=NS_A), n)
    out: dict[str, Any] = {"vendor": args.vendor, "n": n, "queries": len(queries), "regimes": {}}
    for regime in args.regimes:
        rows = Memory.objects.filter(namespace=NS_A).live()
        frozen = time.time() + 3600.0
        if regime == "spread":
            spread_timestamps(NS_A, 120.0, 7, frozen)
        stamps, ours_keys = {}, {}
        for memory_id, key, created, updated in rows.values_list(
            "id", "key_normalized", "created_at", "updated_at"
        ):
            stamps[key] = (created.isoformat(), updated.isoformat())
            ours_keys[memory_id] = key
        forget_indexes()
        path = OUT / f"parity-agentao-{args.vendor}-{regime}.db"
        remove_sqlite(path)
        try:
            store, their_keys = load_agentao_store(path, triples, stamps)
            retriever = MemoryRetriever(AgentaoManager(project_store=store))
            freeze_our_clock(frozen)
            freeze_agentao_clock(frozen)
            mm = MemoryManager(project=NS_A)
            compared = []
            for query, hints in queries:
                ours = [
                    (ours_keys[c.memory_id], c.score, tuple(c.reasons))
                    for c in mm.recall(query, messages_for(hints), top_k=PARITY_TOP_K)
                ]
                theirs = [
                    (their_keys[c.memory_id], c.score, tuple(c.reasons))
                    for c in retriever.recall_candidates(query, context_hints=hints, top_k=50)
                ]
                compared.append(compare_top(ours, theirs))
            store.close()
        finally:
            remove_sqlite(path)
            freeze_our_clock(None)
        summary = {
            "match": sum(c["match"] for c in compared),
            "exact_order": sum(c["exact_order"] for c in compared),
            "reasons_match": sum(c["reasons_match"] for c in compared),
            "max_score_diff": max(c["max_score_diff"] for c in compared),
            "queries_with_ties": sum(c["ties"] for c in compared),
            "empty_both": sum(c["empty"] for c in compared),
            "mismatches": [
                {"query": q, **c}
                for (q, _), c in zip(queries, compared, strict=True)
                if not c["match"]
            ][:5],
        }
        out["regimes"][regime] = summary
        log(
            f"{label} {regime}: {summary['match']}/{len(queries)} queries match "
            f"(exact order {summary['exact_order']}, reasons {summary['reasons_match']}, "
            f"max |Δscore| {summary['max_score_diff']:.2e})"
        )
    return out


def _groups(items: list[tuple[str, float, tuple]]) -> list[tuple[float, set[str]]]:
    groups: list[tuple[float, set[str]]] = []
    for key, score, _ in items:
        if groups and abs(groups[-1][0] - score) <= TIE_TOL:
            groups[-1][1].add(key)
        else:
            groups.append((score, {key}))
    return groups


def compare_top(ours: list, theirs_full: list) -> dict[str, Any]:
    """Same memories in the same order, ties aside, scores within 1e-6.

    ``theirs_full`` is Agentao's top 50, so a tie that crosses the 5th place can be checked:
    our members of the last tie group must be among Agentao's members of that group.
    """
    theirs = theirs_full[: len(ours)] if ours else theirs_full[:PARITY_TOP_K]
    diffs = [abs(a[1] - b[1]) for a, b in zip(ours, theirs, strict=False)]
    match = len(ours) == min(PARITY_TOP_K, len(theirs_full))
    match = match and all(d <= PARITY_SCORE_TOL for d in diffs)
    ours_groups, their_groups = _groups(ours), _groups(theirs_full)
    for g, (score, keys) in enumerate(ours_groups):
        if not match:
            break
        if g >= len(their_groups) or abs(their_groups[g][0] - score) > PARITY_SCORE_TOL:
            match = False
        elif g < len(ours_groups) - 1:
            match = keys == their_groups[g][1]
        else:
            match = keys <= their_groups[g][1]
    their_reasons = {key: reasons for key, _, reasons in theirs_full}
    return {
        "match": match,
        "exact_order": [k for k, _, _ in ours] == [k for k, _, _ in theirs],
        "reasons_match": all(their_reasons.get(k) == r for k, _, r in ours),
        "max_score_diff": max(diffs, default=0.0),
        "ties": any(len(keys) > 1 for _, keys in ours_groups)
        or bool(
            ours
            and len(theirs_full) > len(ours)
            and abs(theirs_full[len(ours)][1] - ours[-1][1]) <= TIE_TOL
        ),
        "empty": not ours and not theirs_full,
        "ours": [(k, round(s, 9)) for k, s, _ in ours],
        "theirs": [(k, round(s, 9)) for k, s, _ in theirs_full[: PARITY_TOP_K + 2]],
    }


# ============================================================================ orchestration
def run_worker(kind: str, env: dict[str, str], **params: Any) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(prefix=f"{kind}-", suffix=".json", dir=OUT) as f:
        command = [sys.executable, __file__, "--worker", kind, "--result", f.name]
        for name, value in params.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        subprocess.run(command, env=env, check=True, cwd=ROOT)
        return json.loads(Path(f.name).read_text())


def worker_env(database_url: str | None = None) -> dict[str, str]:
    env = os.environ.copy()
    env["DJANGO_SETTINGS_MODULE"] = "project.settings"
    env["MEMORYAPP_LOG_LEVEL"] = "WARNING"
    env["PYTHONHASHSEED"] = "0"
    if database_url:
        env["DATABASE_URL"] = database_url
    else:
        env.pop("DATABASE_URL", None)
    return env


def machine_info() -> dict[str, Any]:
    import django
    import numpy

    versions = database_versions()
    return {
        **host_info(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "numpy": numpy.__version__,
        "sqlite": versions["sqlite"],
        "postgresql": versions["postgresql"],
        "agentao": _agentao_version(),
    }


def _agentao_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentao")
    except PackageNotFoundError:
        return "not installed"


def median_of(runs: list[dict[str, Any]], path: str) -> float | None:
    values = []
    for run in runs:
        value: Any = run
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            values.append(value)
    return statistics.median(values) if values else None


# (label, path in a run's result, format, unit)
OUR_METRICS = [
    ("load average (1 min) at the import's start", "import_load_start", "{:.1f}"),
    ("bulk import (rows/s)", "import_rows_per_s", "{:,.0f}"),
    ("  bulk import wall / CPU (s)", ("import_s", "import_cpu_s"), "{:.1f}"),
    ("load average (1 min) at the serving run's start", "load_start", "{:.1f}"),
    ("first recall after process start = index build (s)", "first_recall_s", "{:.2f}"),
    ("  its CPU time (s)", "first_recall_cpu_s", "{:.2f}"),
    ("warm recall p50 (ms)", "warm.p50_ms", "{:.2f}"),
    ("warm recall p95 (ms)", "warm.p95_ms", "{:.2f}"),
    ("  CPU time p50 / p95 (ms)", ("warm.cpu_p50_ms", "warm.cpu_p95_ms"), "{:.2f}"),
    ("write+recall p50 (ms)", "write_recall.p50_ms", "{:.2f}"),
    ("write+recall p95 (ms)", "write_recall.p95_ms", "{:.2f}"),
    (
        "  CPU time p50 / p95 (ms)",
        ("write_recall.cpu_p50_ms", "write_recall.cpu_p95_ms"),
        "{:.2f}",
    ),
    ("  of which upsert p50 (ms)", "write_recall_upsert_p50_ms", "{:.2f}"),
    ("  of which recall p50 (ms)", "write_recall_recall_p50_ms", "{:.2f}"),
    ("stable block select+render p50 (ms)", "stable_block.p50_ms", "{:.2f}"),
    ("  max of its runs (ms)", "stable_block.max_ms", "{:.2f}"),
    ("  shared by a fresh manager p50 (ms)", "stable_block_shared.p50_ms", "{:.2f}"),
    ("get_stable_entries p50 (ms)", "stable_entries.p50_ms", "{:.1f}"),
    ("  rows it returns", "stable_entries_count", "{:,.0f}"),
    ("upserts/s (new keys)", "upserts_per_s", "{:,.0f}"),
    ("  upserts done (2,000, or fewer in 20 s)", "upserts", "{:,.0f}"),
    ("  CPU per upsert (ms)", "upsert_cpu_ms", "{:.2f}"),
    ("wipe_all (s)", "wipe_all_s", "{:.2f}"),
    ("  its CPU time (s)", "wipe_all_cpu_s", "{:.2f}"),
    ("index size, nbytes (MiB)", "index_nbytes_mb", "{:.1f}"),
    ("peak RSS, serving process (MiB)", "peak_rss_mb", "{:.0f}"),
    ("  RSS right after the index build (MiB)", "rss_after_build_mb", "{:.0f}"),
    ("peak RSS, import process (MiB)", "import_peak_rss_mb", "{:.0f}"),
    ("A recall while B writes, A spread, p50 (ms)", "concurrent.spread.p50_ms", "{:.2f}"),
    ("A recall while B writes, A spread, p95 (ms)", "concurrent.spread.p95_ms", "{:.2f}"),
    ("  A rebuilds / deltas, all runs and states", None, None),
    (
        "  A rows within the delta slack (spread)",
        "concurrent.spread.rows_in_delta_window",
        "{:,.0f}",
    ),
    ("A recall while B writes, A as imported, p50 (ms)", "concurrent.as_imported.p50_ms", "{:.1f}"),
    ("A recall while B writes, A as imported, p95 (ms)", "concurrent.as_imported.p95_ms", "{:.1f}"),
    ("  queries done in the time box (as imported)", "concurrent.as_imported.count", "{:,.0f}"),
    (
        "  A rows within the delta slack (as imported)",
        "concurrent.as_imported.rows_in_delta_window",
        "{:,.0f}",
    ),
    ("  B writer upserts/s", "concurrent.writer_upserts_per_s", "{:,.0f}"),
]

AGENTAO_METRICS = [
    ("load average (1 min) at the run's start", "load_start", "{:.1f}"),
    ("first recall = index build (s)", "first_recall_s", "{:.2f}"),
    ("warm recall p50 (ms)", "warm.p50_ms", "{:.2f}"),
    ("warm recall p95 (ms)", "warm.p95_ms", "{:.2f}"),
    ("write+recall p50 (ms)", "write_recall.p50_ms", "{:.1f}"),
    ("write+recall p95 (ms)", "write_recall.p95_ms", "{:.1f}"),
    ("stable block select+render p50 (ms)", "stable_block.p50_ms", "{:.1f}"),
    ("upserts/s", "upserts_per_s", "{:,.0f}"),
    ("wipe_all (s)", "wipe_all_s", "{:.2f}"),
    ("peak RSS (MiB)", "peak_rss_mb", "{:.0f}"),
]

RATIO_METRICS = [
    ("warm recall p50", "warm.p50_ms", False),
    ("warm recall p95", "warm.p95_ms", False),
    ("write+recall p50", "write_recall.p50_ms", False),
    ("stable block", "stable_block.p50_ms", False),
    ("upserts/s", "upserts_per_s", True),
    ("peak RSS", "peak_rss_mb", False),
]


def fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def group_runs(results: list[dict[str, Any]], system: str) -> dict[tuple[str, int], list]:
    grouped: dict[tuple[str, int], list] = {}
    for r in results:
        if r["system"] == system:
            grouped.setdefault((r["vendor"], r["n"]), []).append(r)
    return grouped


def our_table(results: list[dict[str, Any]]) -> list[str]:
    grouped = group_runs(results, "ours")
    columns = sorted(grouped, key=lambda c: (c[0] != "sqlite", c[1]))
    header = "| metric (median of runs) | " + " | ".join(
        f"{'SQLite' if v == 'sqlite' else 'PostgreSQL'} {n:,}" for v, n in columns
    )
    lines = [header + " |", "|---|" + "---:|" * len(columns)]
    for label, path, pattern in OUR_METRICS:
        cells = []
        for column in columns:
            runs = grouped[column]
            if path is None:
                states = [
                    state
                    for r in runs
                    for name, state in r.get("concurrent", {}).items()
                    if isinstance(state, dict)
                ]
                rebuilds = sum(state["a_rebuilds"] for state in states)
                deltas = sum(state["a_deltas"] for state in states)
                queries = sum(state["count"] for state in states)
                cells.append(f"{rebuilds} / {deltas} in {queries} recalls" if states else "–")
            elif isinstance(path, tuple):
                cells.append(" / ".join(fmt(median_of(runs, part), pattern) for part in path))
            else:
                cells.append(fmt(median_of(runs, path), pattern))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| runs | " + " | ".join(str(len(grouped[c])) for c in columns) + " |")
    return lines


def agentao_table(results: list[dict[str, Any]]) -> list[str]:
    theirs = group_runs(results, "agentao")
    ours = group_runs(results, "ours")
    columns = sorted(theirs, key=lambda c: c[1])
    if not columns:
        return ["(Agentao not measured)"]
    lines = [
        "| metric (median of runs) | " + " | ".join(f"Agentao {n:,}" for _, n in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for label, path, pattern in AGENTAO_METRICS:
        cells = [fmt(median_of(theirs[c], path), pattern) for c in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| runs | " + " | ".join(str(len(theirs[c])) for c in columns) + " |")
    lines.append(
        "| warm queries / write+recall rounds / upserts | "
        + " | ".join(
            f"{theirs[c][0]['warm']['count']} / {theirs[c][0]['write_recall']['count']} / "
            f"{theirs[c][0]['upserts']}"
            for c in columns
        )
        + " |"
    )
    # Ours at the same N, else at the next larger N (ours is not run at 50,000).
    sqlite_sizes = sorted(n for v, n in ours if v == "sqlite")
    pairs = []
    for column in columns:
        mine = next((m for m in sqlite_sizes if m >= column[1]), None)
        pairs.append((column, ("sqlite", mine) if mine else None))
    lines += [
        "",
        "Ratios, ours (SQLite) / Agentao: a time ratio below 1 means ours is faster; for "
        "upserts/s above 1 means ours is faster. Where ours was not run at Agentao's N, ours at "
        "the next larger N is used (twice the memories):",
        "",
        "| ratio | "
        + " | ".join(
            f"ours {m[1]:,} / Agentao {c[1]:,}" if m else f"Agentao {c[1]:,}" for c, m in pairs
        )
        + " |",
        "|---|" + "---:|" * len(pairs),
    ]
    for label, path, _higher_better in RATIO_METRICS:
        cells = []
        for column, mine_column in pairs:
            mine = median_of(ours.get(mine_column, []), path) if mine_column else None
            their = median_of(theirs[column], path)
            if mine is None or not their:
                cells.append("–")
            else:
                ratio = mine / their
                cells.append(f"{ratio:.4f}" if ratio < 0.1 else f"{ratio:.2f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def parity_lines(parity: list[dict[str, Any]]) -> list[str]:
    if not parity:
        return ["(parity not measured)"]
    lines = [
        "| database | timestamps | queries matching (of 200) | exact same order | same reasons "
        "| queries with ties | max abs score diff |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for p in parity:
        for regime, s in p["regimes"].items():
            lines.append(
                f"| {p['vendor']} | {regime} | {s['match']} | {s['exact_order']} | "
                f"{s['reasons_match']} | {s['queries_with_ties']} | {s['max_score_diff']:.1e} |"
            )
    return lines


def evaluate_targets(
    results: list, parity: list, largest: int
) -> list[tuple[str, str, bool | None]]:
    ours = group_runs(results, "ours")

    def m(vendor: str, path: str, n: int = largest) -> float | None:
        return median_of(ours.get((vendor, n), []), path)

    def check(label: str, value: float | None, limit: float, unit: str, lower: bool = True):
        if value is None:
            return (label, "not measured", None)
        ok = value <= limit if lower else value >= limit
        return (label, f"{value:,.2f} {unit}".replace(".00 ", " "), ok)

    # (label, vendor, metric path, limit, unit, lower is better)
    specs = [
        ("warm recall p50 ≤ 2 ms", "sqlite", "warm.p50_ms", 2, "ms", True),
        ("warm recall p95 ≤ 5 ms", "sqlite", "warm.p95_ms", 5, "ms", True),
        ("warm recall p50 ≤ 3 ms", "postgresql", "warm.p50_ms", 3, "ms", True),
        ("warm recall p95 ≤ 8 ms", "postgresql", "warm.p95_ms", 8, "ms", True),
        ("write+recall p50 ≤ 10 ms", "sqlite", "write_recall.p50_ms", 10, "ms", True),
        ("write+recall p50 ≤ 15 ms", "postgresql", "write_recall.p50_ms", 15, "ms", True),
        ("first recall (index build) ≤ 10 s", "sqlite", "first_recall_s", 10, "s", True),
        ("first recall (index build) ≤ 10 s", "postgresql", "first_recall_s", 10, "s", True),
        ("stable block select+render ≤ 15 ms", "sqlite", "stable_block.p50_ms", 15, "ms", True),
        ("stable block select+render ≤ 15 ms", "postgresql", "stable_block.p50_ms", 15, "ms", True),
        ("≥ 1,000 upserts/s", "sqlite", "upserts_per_s", 1000, "/s", False),
    ]
    rows = [
        check(f"{text}, {VENDOR_NAMES[vendor]} {largest:,}", m(vendor, path), limit, unit, lower)
        for text, vendor, path, limit, unit, lower in specs
    ]
    for vendor in ("sqlite", "postgresql"):
        name = VENDOR_NAMES[vendor]
        lowest = min(
            (median_of(runs, "import_rows_per_s") for (v, _), runs in ours.items() if v == vendor),
            default=None,
        )
        rows.append(
            check(
                f"bulk import ≥ 10,000 rows/s, {name} (slowest N)", lowest, 10000, "rows/s", False
            )
        )
    # 400 MB read as 400·10^6 bytes (381 MiB), the stricter reading.
    for key, what in (("peak_rss_mb", "serving process"), ("import_peak_rss_mb", "import process")):
        peaks = [r[key] for r in results if r["system"] == "ours" and key in r]
        rows.append(
            check(
                f"peak RSS ≤ 400 MB (381 MiB), {what}, every run",
                max(peaks, default=None),
                381.5,
                "MiB",
            )
        )
    rebuilds = [
        state["a_rebuilds"]
        for r in results
        if r["system"] == "ours"
        for state in r.get("concurrent", {}).values()
        if isinstance(state, dict)
    ]
    rows.append(
        (
            "namespace A's index never rebuilt while B writes",
            f"{sum(rebuilds)} rebuilds in {len(rebuilds)} phases" if rebuilds else "not measured",
            (sum(rebuilds) == 0) if rebuilds else None,
        )
    )
    for p in parity:
        for regime, s in p["regimes"].items():
            rows.append(
                (
                    f"parity with Agentao, 200 queries at {p['n']:,} ({p['vendor']}, {regime})",
                    f"{s['match']}/{p['queries']}",
                    s["match"] == p["queries"],
                )
            )
    return rows


def write_results(report: dict[str, Any]) -> None:
    machine = report["machine"]
    results, parity = report["runs"], report["parity"]
    analysis = ""
    if RESULTS_MD.exists():
        text = RESULTS_MD.read_text()
        if ANALYSIS_START in text and ANALYSIS_END in text:
            analysis = text[
                text.index(ANALYSIS_START) : text.index(ANALYSIS_END) + len(ANALYSIS_END)
            ]
    if not analysis:
        analysis = f"{ANALYSIS_START}\n(no analysis yet)\n{ANALYSIS_END}"
    targets = evaluate_targets(results, parity, max(report["sizes"]))
    lines = [
        "# Recall benchmark: `bench/recall.py`",
        "",
        f"Generated {report['date']} by `make bench` (`bench/recall.py`), "
        f"wall time {report['wall_s'] / 60:.1f} min. Every figure is the median over "
        f"{report['runs_requested']} runs, each run a fresh interpreter on a fresh database.",
        "",
        "## Machine",
        "",
        f"- CPU: {machine['cpu']}, {machine['cores']} vCPUs; RAM {machine['ram_gib']} GiB; "
        f"{machine['os']}",
        f"- Python {machine['python']}, Django {machine['django']}, numpy {machine['numpy']}, "
        f"SQLite {machine['sqlite']}, PostgreSQL {machine['postgresql']}, "
        f"Agentao {machine['agentao']}",
        f"- load average at start {report['load_start']}, at end {report['load_end']} "
        "(a shared machine: other test suites run beside it)",
        f"- code: commit `{report['code']['commit']}`"
        + (
            f", with uncommitted changes in {len(report['code']['uncommitted'])} file(s) under "
            "memoryapp/ or project/ (work in progress by others, measured as found): "
            + ", ".join(
                f"`{line.split(maxsplit=1)[-1]}`" for line in report["code"]["uncommitted"][:12]
            )
            if report["code"]["uncommitted"]
            else ""
        ),
        "",
        "## What is measured",
        "",
        "- Corpus: `bench/corpus.py`, `make_corpus(N, seed=1234)`, all in one project "
        f"namespace (`{NS_A}`), no user scope; imported with `MemoryManager.import_memories` "
        "from JSON lines (the `manage.py memory import FILE` path, JSON parsing included).",
        "- Queries: the corpus's 200 warm queries, each with its path hints as one user message "
        "(`[{'role': 'user', 'content': ' '.join(hints)}]`); Agentao gets the same hints as "
        "`context_hints`. Warm recall: one untimed pass, then "
        f"{WARM_PASSES} timed passes (p50/p95 over {WARM_PASSES * WARM_QUERIES} calls).",
        "- All our timings are end to end through `MemoryManager` on the Django stack: the "
        "counter check and the fetch of the returned rows are inside `recall`; the upsert's "
        "commit is inside write+recall.",
        f"- Write+recall: {WRITE_ROUNDS} rounds of `upsert(extras[j])` then "
        "`recall(queries[200+j])`.",
        f"- Stable block: `render_stable_block()` on {STABLE_REPEATS} fresh managers, each with "
        "the process's shared block cache (`INDEXES.stable_blocks`) emptied first, so each one "
        f"selects and renders (cold); then {STABLE_REPEATS} more fresh managers that find the "
        "block shared (one counter read); `get_stable_entries()` timed separately (3 calls). "
        "Agentao: `get_stable_entries()` + "
        "`get_cross_session_tail()` + `fit_stable_records` + `render_stable_block`, as its prompt "
        "builder does.",
        f"- Upserts/s: {UPSERTS:,} `upsert` calls with new keys (from `make_corpus(N + "
        f"{UPSERTS:,})`'s tail) into the N-memory namespace, index warm, one commit each; "
        f"stopped after {UPSERT_BUDGET_S:.0f} s when slower.",
        "- A while B writes (10,000 and 100,000): a second OS process upserts into namespace "
        f"`{NS_B}` as fast as it can while A runs the 200 warm queries (stopped after "
        f"{CONCURRENT_BUDGET_S:.0f} s when slower). Two states of A: `as imported` (A's rows as "
        "the import and the write phases stamped them), then, at 10,000 only, `spread` (A's "
        "`updated_at` re-stamped over the last 30 days by one raw `executemany`, A's index "
        "rebuilt once before measuring). Rebuilds and deltas: "
        "`memoryapp.recall.cache.INDEXES.builds` "
        "/ `.deltas` in A's process; \"rows within the delta slack\": A's rows with `updated_at` "
        "at or after the index entry's watermark minus `DELTA_SLACK`, i.e. what one delta "
        "re-reads.",
        "- Processes: the import runs in its own interpreter (migrate + import, its own peak "
        "RSS); every other measurement of ours runs in a second, fresh interpreter on the "
        "imported database, so its first recall is a true first recall after a process start. "
        "Peak RSS: `getrusage(RUSAGE_SELF).ru_maxrss` of each process at its end, in MiB.",
        "- CPU time (`time.process_time`) is shown beside wall time for the phases where the "
        "machine's load matters most; it includes SQLite's work (in process) but not "
        "PostgreSQL's (a server process).",
        "- Agentao 0.5.17: its `SQLiteMemoryStore` (a fresh file), `MemoryManager` and "
        "`MemoryRetriever`; the corpus goes in with one `executemany` in its schema, classified "
        "and keyworded by its own `MemoryGuard` (as bench/recall_index.py does), the rest through "
        "its API. Fewer queries and rounds where it is slow (see its table).",
        "",
        "## Ours, through `MemoryManager`",
        "",
        *our_table(results),
        "",
        "## Agentao 0.5.17 (SQLite) and ratios",
        "",
        *agentao_table(results),
        "",
        "## Parity with Agentao",
        "",
        f"Top {PARITY_TOP_K} of `MemoryManager.recall` vs Agentao's `recall_candidates` for the "
        f"200 warm queries at {PARITY_N:,}, matched by normalised key: the same memories in the "
        f"same order with scores within {PARITY_SCORE_TOL:g}; inside a tie (scores within "
        f"{TIE_TOL:g}) any order, and a tie across 5th place may pick different members of it. "
        "Both clocks are frozen at the same instant (ours: `memoryapp.facade.time` replaced by a "
        "frozen stand-in; Agentao: `agentao.memory.retriever.datetime.now`), and Agentao's rows "
        "carry exactly our timestamps. `imported`: the timestamps our import wrote; `spread`: "
        "`updated_at` set uniformly 0–120 days before the frozen clock (recency varies, ~25 % "
        "stale) before the first recall.",
        "",
        *parity_lines(parity),
        "",
        "## Targets (issue 3)",
        "",
        "| target | measured | met |",
        "|---|---:|:---:|",
        *[
            f"| {label} | {value} | {'yes' if ok else 'no' if ok is not None else '–'} |"
            for label, value, ok in targets
        ],
        "",
        "Not measured here: the bound of the multi-namespace LRU (`MEMORYAPP_RECALL_CACHE_BYTES`); "
        "`tests/recall/test_indexes.py` checks it, and `bench/API_RESULTS.md` measures 100 "
        "namespaces "
        "of 10,000 under the default cap and a raised one.",
        "",
        "## Analysis",
        "",
        analysis,
        "",
    ]
    RESULTS_MD.write_text("\n".join(lines))


def save_partial(report: dict[str, Any]) -> None:
    """The figures so far, so that an interrupted bench still leaves its raw data."""
    RESULTS_JSON.write_text(json.dumps({**report, "partial": True}, indent=2) + "\n")


def orchestrate(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    vendors = [v for v in args.vendors.split(",") if v]
    if "postgresql" in vendors and not pg_available():
        log("!!! PostgreSQL is unreachable at 127.0.0.1:5432: skipping the PostgreSQL runs")
        vendors.remove("postgresql")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    agentao_sizes = [int(s) for s in args.agentao_sizes.split(",") if s]
    prepare_corpora(sorted(set(sizes + agentao_sizes + [PARITY_N])))
    report: dict[str, Any] = {
        "benchmark": "recall (end to end through MemoryManager)",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "code": code_version(),
        "load_start": [round(x, 2) for x in os.getloadavg()],
        "sizes": sizes,
        "vendors": vendors,
        "runs_requested": args.runs,
        "runs": [],
        "parity": [],
    }
    concurrent = ",".join(str(n) for n in sizes if n >= 10_000) or str(min(sizes))
    for run in range(1, args.runs + 1):
        for vendor in vendors:
            for n in sizes:
                tag = f"{vendor}-{n}-run{run}"
                url = create_database(vendor, tag)
                try:
                    params = {"vendor": vendor, "n": n, "run": run}
                    imported = run_worker("import", worker_env(url), **params)
                    result = run_worker(
                        "ours", worker_env(url), **params, concurrent_sizes=concurrent
                    )
                    report["runs"].append({**imported, **result})
                finally:
                    drop_database(vendor, tag)
                save_partial(report)
        for n in agentao_sizes:
            report["runs"].append(run_worker("agentao", worker_env(), n=n, run=run))
            save_partial(report)
        log(f"--- run {run} of {args.runs} done at {(time.perf_counter() - began) / 60:.1f} min")
    if not args.no_parity:
        for vendor in vendors:
            tag = f"{vendor}-parity"
            url = create_database(vendor, tag)
            regimes = "imported,spread" if vendor == "sqlite" else "spread"
            try:
                report["parity"].append(
                    run_worker(
                        "parity", worker_env(url), vendor=vendor, n=PARITY_N, regimes=regimes
                    )
                )
            finally:
                drop_database(vendor, tag)
    report["load_end"] = [round(x, 2) for x in os.getloadavg()]
    report["wall_s"] = round(time.perf_counter() - began, 1)
    RESULTS_JSON.write_text(json.dumps(report, indent=2) + "\n")
    report_results(report)


def report_results(report: dict[str, Any]) -> None:
    """Write bench/RESULTS.md and print the tables and the target verdicts."""
    sizes = report["sizes"]
    write_results(report)
    log("")
    for line in our_table(report["runs"]):
        log(line)
    log("")
    for line in agentao_table(report["runs"]):
        log(line)
    log("")
    for line in parity_lines(report["parity"]):
        log(line)
    log("")
    for label, value, ok in evaluate_targets(report["runs"], report["parity"], max(sizes)):
        log(f"{'MET   ' if ok else 'MISSED' if ok is not None else '  –   '} {label}: {value}")
    log(f"\nwrote {RESULTS_JSON} and {RESULTS_MD} in {report['wall_s'] / 60:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--vendors", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--agentao-sizes", default="1000,10000,50000")
    parser.add_argument("--no-parity", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1,000 only, one run (a smoke test)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite bench/RESULTS.md from bench/out/recall.json without measuring",
    )
    # worker mode (internal)
    parser.add_argument("--worker", choices=["import", "ours", "agentao", "parity", "writer"])
    parser.add_argument("--result")
    parser.add_argument("--vendor", default="sqlite")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--concurrent-sizes", default="10000")
    parser.add_argument("--regimes", default="imported,spread")
    parser.add_argument("--stop")
    args = parser.parse_args()
    if args.report_only:
        report_results(json.loads(RESULTS_JSON.read_text()))
        return
    if args.worker is None:
        if args.quick:
            args.sizes, args.runs, args.agentao_sizes = "1000", 1, "1000"
        orchestrate(args)
        return
    args.concurrent_sizes = {int(s) for s in args.concurrent_sizes.split(",") if s}
    args.regimes = [r for r in args.regimes.split(",") if r]
    if args.worker == "writer":
        worker_writer(args)
        return
    worker = {
        "import": worker_import,
        "ours": worker_ours,
        "agentao": worker_agentao,
        "parity": worker_parity,
    }
    result = worker[args.worker](args)
    Path(args.result).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
