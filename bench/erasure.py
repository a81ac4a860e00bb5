"""Erasure at scale while other tenants work: delete, purge and verify, before and after 14.2.

Usage: .venv/bin/python bench/erasure.py [--vendor sqlite|postgresql|both]
       [--sqlite-namespaces 1000] [--pg-namespaces 10000] [--per 1000] [--keep-db]
       [--quick]   (or ``make bench-erasure``; BENCH_ARGS="--quick" for a smoke run)

Per vendor, one fresh database (SQLite: bench/out/erasure.sqlite3; PostgreSQL:
``memoryapp_bench_erasure`` on 127.0.0.1:5432, dropped and created here) is seeded with
plain SQL (bench/erasure_seed.py: ``namespaces × per`` memories of tenants that share a
quarter of their content, one event each, and two users of 100 memories). Then, while a
second process (bench/erasure_load.py) recalls and upserts in 20 other namespaces:

  1. "before": SQLite ``MEMORYAPP_ERASURE_PURGE_METHOD = "rewrite"`` (VACUUM of the whole
     file, the method before issue 14.2); PostgreSQL the tables as they were before
     partitioning (``--pg-before plain``, the default: one plain table each, rewritten
     whole by pg_repack) or the ``"rewrite"`` method (``--pg-before rewrite``: VACUUM FULL
     of each partition); one namespace of ``per`` rows is erased, then one user of 100 rows;
  2. the one-time conversion, timed on its own: SQLite to ``auto_vacuum=INCREMENTAL`` (the
     first purge under the new method does it); PostgreSQL, after ``--pg-before plain``,
     migration 0008's partitioning of the seeded tables (64 hash partitions by namespace);
  3. "after": the default ``"auto"`` (SQLite incremental_vacuum; PostgreSQL pg_repack of
     the partitions that held the erased rows), another namespace and the other user.

Each erasure goes through ``memoryapp.compliance.erase``; its phases are timed by wrapping
the vendor purge and the verification (delete = until the purge starts; verify = the SQL
check, structure check, byte scan and kept-row check). The other process's longest
operation, p99 and errors are taken over the erasure and over its purge alone. Raw
results: bench/out/erasure.json; the tables between the ``results`` markers of
bench/ERASURE.md are rewritten (``--quick``: bench/out/ERASURE-quick.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import erasure_seed as seed
from benchlib import code_version, host_info, migrated_django  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
REPORT = ROOT / "bench" / "ERASURE.md"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_NAME = "memoryapp_bench_erasure"
SUBJECT_ROWS = 100
LOAD_NAMESPACES = 20
BEGIN, END = "<!-- results -->", "<!-- /results -->"
PURGE_TIMEOUT = 60.0  # set by --purge-timeout


def log(message: str) -> None:
    print(message, flush=True)


# ----------------------------------------------------------------- databases
def sqlite_path() -> Path:
    return OUT / "erasure.sqlite3"


def fresh_database(vendor: str) -> str:
    """Drop and create the benchmark database; returns its URL."""
    OUT.mkdir(parents=True, exist_ok=True)
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{sqlite_path()}{suffix}").unlink()
        return f"sqlite:///{sqlite_path()}"
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_NAME}"')
    return f"postgres://postgres@127.0.0.1:5432/{PG_NAME}"


def drop_database(vendor: str) -> None:
    if vendor == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{sqlite_path()}{suffix}").unlink()
        return
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')


def database_bytes(vendor: str) -> int:
    from django.db import connection

    if vendor == "sqlite":
        return sum(
            os.path.getsize(f"{sqlite_path()}{s}")
            for s in ("", "-wal")
            if os.path.exists(f"{sqlite_path()}{s}")
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


# ----------------------------------------------------------------- one erasure
class Phases:
    """Wraps the vendor purge and the verification to time the phases of each erasure."""

    def __init__(self) -> None:
        from memoryapp.compliance import purging
        from memoryapp.db.purge import scan as byte_scan
        from memoryapp.db.purge.vendors import VENDORS

        self.marks: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        for vendor in VENDORS.values():
            self._wrap_purge(type(vendor))
        # Looked up as module globals at each call, so wrapping them times them.
        purging._verify = self._timed("verify", purging._verify)
        purging._in_kept_rows = self._timed("kept_rows", purging._in_kept_rows)
        byte_scan.scan = self._timed("scan", byte_scan.scan)

    def _timed(self, name: str, function):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

        return timed

    def _wrap_purge(self, cls) -> None:
        original = cls.purge
        marks = self.marks

        def timed_purge(vendor, *args, **kwargs):
            marks["purge_start"] = time.time()
            try:
                return original(vendor, *args, **kwargs)
            finally:
                marks["purge_end"] = time.time()

        cls.purge = timed_purge


def erase_once(phases: Phases, load_ops_since, **target) -> dict:
    """One ``erase`` with its phase times and the receipt's verdict."""
    from memoryapp.compliance import erase

    phases.marks.clear()
    phases.seconds.clear()
    started = time.time()
    receipt = erase(actor="bench", **target)
    ended = time.time()
    marks = phases.marks
    alias = receipt.details["aliases"]["default"]
    facts = alias.get("verification", {})
    purge = alias.get("purge", {})
    return {
        "target": next(iter(target)),
        "rows": receipt.counts.get("memories"),
        "events": receipt.counts.get("memory_events"),
        "window": [started, ended],
        "purge_window": [marks.get("purge_start"), marks.get("purge_end")],
        "delete_s": round(marks.get("purge_start", ended) - started, 3),
        "purge_s": round(marks.get("purge_end", ended) - marks.get("purge_start", ended), 3),
        "verify_s": round(phases.seconds.get("verify", 0.0), 3),
        "scan_s": round(phases.seconds.get("scan", 0.0), 3),
        "kept_rows_s": round(phases.seconds.get("kept_rows", 0.0), 3),
        "total_s": round(ended - started, 3),
        "rewrite": purge.get("rewrite") or purge.get("reclaim"),
        "rewrite_s": purge.get("rewrite_seconds"),
        "bytes_scanned": (facts.get("scan") or {}).get("bytes"),
        "fragments": (facts.get("scan") or {}).get("fragments"),
        "found_in_kept_rows": (facts.get("scan") or {}).get("found_in_kept_rows"),
        "purge_status": receipt.purge_status,
        "verified": receipt.verified,
        "verification": receipt.verification,
        "caveats_extra": [c for c in purge.get("caveats", [])],
    }


def run_method(vendor: str, method: str, phases: Phases, namespace: str, subject: str, url):
    """Erase ``namespace`` then ``subject`` under ``method`` while the load runs."""
    from django.conf import settings
    from erasure_load import Load, summarize

    settings.MEMORYAPP_ERASURE_PURGE_METHOD = method
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = PURGE_TIMEOUT
    load_ns = [seed.namespace(t) for t in range(500, 500 + LOAD_NAMESPACES)]
    layout = table_layout(vendor)
    results = []
    with Load(url, load_ns, OUT) as load:
        for target in ({"namespace": namespace}, {"subject": subject}):
            results.append(erase_once(phases, None, **target))
            log(f"  {vendor} {method} {target}: {short(results[-1])}")
            time.sleep(1.0)
    for result in results:
        result["load"] = summarize(load.ops, *result["window"])
        if result["purge_window"][0]:
            result["load_purge"] = summarize(load.ops, *result["purge_window"])
    before = [op for op in load.ops if op[0] < results[0]["window"][0]]
    for result in results:
        result["layout"] = layout
    return {"method": method, "erasures": results, "load_baseline": summarize(before)}


def table_layout(vendor: str) -> str:
    """ "64 partitions" or "plain tables" (PostgreSQL's ``memories``); "one file" (SQLite)."""
    from django.db import connection

    from memoryapp.db import partitioning

    if vendor == "sqlite":
        return "one file"
    with connection.cursor() as cursor:
        if partitioning.is_partitioned(cursor, "memories"):
            return f"{len(partitioning.leaves(cursor, 'memories'))} partitions"
    return "plain tables"


def set_partitioned(partitioned: bool) -> dict:
    """Rebuild PostgreSQL's personal-data tables partitioned (migration 0008) or plain; timed."""
    from django.db import connection

    from memoryapp.db import partitioning

    change = partitioning.partition_table if partitioned else partitioning.unpartition_table
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for name in partitioning.TABLES:
            change(cursor, name)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "status": "partitioned" if partitioned else "plain",
    }


def short(result: dict) -> str:
    return (
        f"delete {result['delete_s']} s, purge {result['purge_s']} s, verify "
        f"{result['verify_s']} s (scan {result['scan_s']} s, kept rows "
        f"{result['kept_rows_s']} s), total {result['total_s']} s, "
        f"verified={result['verified']} {result['purge_status'][:80]}"
    )


def convert_sqlite(phases: Phases) -> dict:
    """The one-time conversion to auto_vacuum=INCREMENTAL, timed on its own."""
    from django.conf import settings
    from django.db import connection

    settings.MEMORYAPP_ERASURE_PURGE_METHOD = "auto"
    from memoryapp.db.purge.vendors import for_connection

    started = time.perf_counter()
    outcome = for_connection(connection).purge(connection, ["memories"], token={}, timeout=60)
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "status": outcome.status,
        "reclaim": outcome.details.get("reclaim"),
    }


def run_vendor(args, vendor: str) -> dict:
    """Seed, then both methods, in this process (the load runs in another one)."""
    namespaces = args.sqlite_namespaces if vendor == "sqlite" else args.pg_namespaces
    url = fresh_database(vendor)
    migrated_django(url)
    plain_first = vendor == "postgresql" and args.pg_before == "plain"
    if plain_first:  # the layout before migration 0008, on the still empty tables
        set_partitioned(False)
    started = time.perf_counter()
    if vendor == "sqlite":
        counts = seed.seed_sqlite(
            str(sqlite_path()), namespaces, args.per, SUBJECT_ROWS, subjects=2, log=log
        )
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            counts = seed.seed_postgres(
                conn, namespaces, args.per, SUBJECT_ROWS, subjects=2, log=log
            )
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
    report: dict = {
        "vendor": vendor,
        "namespaces": namespaces,
        "per": args.per,
        "rows": counts,
        "seed_seconds": round(time.perf_counter() - started, 1),
        "purge_timeout": PURGE_TIMEOUT,
        "database_bytes": database_bytes(vendor),
        "versions": versions(vendor),
    }
    log(f"{vendor}: seeded {counts} in {report['seed_seconds']} s")
    phases = Phases()
    report["before"] = run_method(
        vendor,
        "auto" if plain_first else "rewrite",
        phases,
        seed.namespace(namespaces // 3),
        seed.subject(0),
        url,
    )
    if vendor == "sqlite":
        report["conversion"] = convert_sqlite(phases)
        log(f"  sqlite conversion: {report['conversion']}")
    elif plain_first:
        report["conversion"] = set_partitioned(True)
        log(f"  postgresql partitioning: {report['conversion']}")
    report["after"] = run_method(
        vendor, "auto", phases, seed.namespace(2 * namespaces // 3), seed.subject(1), url
    )
    report["database_bytes_after"] = database_bytes(vendor)
    report["load_average"] = os.getloadavg()
    return report


def versions(vendor: str) -> dict:
    import sqlite3

    from django.db import connection

    if vendor == "sqlite":
        return {"sqlite": sqlite3.sqlite_version}
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
    try:
        repack = subprocess.run(["pg_repack", "--version"], capture_output=True, text=True)
        client = repack.stdout.strip()
    except OSError:
        client = "not installed"
    return {"postgresql": server, "pg_repack": client}


# ----------------------------------------------------------------- report
def table(report: dict) -> list[str]:
    """The side-by-side table of one vendor."""
    rows = [
        "| erasure | method | rows (events) | delete | purge | verify (byte scan, kept rows) "
        "| total | other process: longest / p99, whole erasure (purge alone) | its errors "
        "| bytes scanned | receipt |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in ("before", "after"):
        for e in report[label]["erasures"]:
            load, during = e["load"], e.get("load_purge") or {}
            verdict = "verified" if e["verified"] else e["purge_status"][:70]
            rows.append(
                f"| {e['target']} | {label}: {e['rewrite']}, {e.get('layout', '')} "
                f"| {e['rows']:,} ({e['events']:,}) "
                f"| {e['delete_s']:.2f} s | {e['purge_s']:.2f} s | {e['verify_s']:.2f} s "
                f"({e['scan_s']:.1f} s, {e['kept_rows_s']:.1f} s) | **{e['total_s']:.2f} s** "
                f"| {load['max_ms']} / {load['p99_ms']} ms ({during.get('max_ms')} / "
                f"{during.get('p99_ms')} ms) | {load['errors']} of {load['ops']} "
                f"| {e['bytes_scanned'] or 0:,} | {verdict} |"
            )
    return rows


def markdown(runs: list[dict], quick: bool) -> str:
    """The results block: one section per run (``runs``: report, code, host, when)."""
    lines = ["**Quick run (smoke-test sizes): not the published figures.**", ""] if quick else []
    for run in runs:
        report, host = run["report"], run["host"]
        rows = report["rows"]["memories"]
        lines += [
            f"### {report['vendor']}: {rows:,} memories ({report['namespaces']:,} namespaces "
            f"× {report['per']:,} + 2 users × {SUBJECT_ROWS})",
            "",
            f"{run['when']}, code {run['code']['commit']}"
            f"{' (uncommitted changes)' if run['code']['uncommitted'] else ''}; "
            f"{', '.join(f'{k} {v}' for k, v in report['versions'].items())}; host "
            f"{host['cpu']}, {host['cores']} cores, {host['ram_gib']} GiB RAM. Seeded in "
            f"{report['seed_seconds']} s; database {report['database_bytes'] / 2**20:,.0f} MiB. "
            f"Purge timeout {report.get('purge_timeout', 60):g} s. Load average at the end: "
            f"{', '.join(f'{x:.1f}' for x in report['load_average'])}. The other process "
            f"before the first erasure: {fmt_load(report['before']['load_baseline'])}.",
            "",
            *table(report),
            "",
        ]
        if "conversion" in report and report["vendor"] == "sqlite":
            c = report["conversion"]
            lines += [
                f"One-time conversion to `auto_vacuum=INCREMENTAL` (the first purge under "
                f"the new method, alone with the file): {c['seconds']} s ({c['status']}).",
                "",
            ]
        elif "conversion" in report:
            c = report["conversion"]
            lines += [
                f"One-time partitioning of the seeded tables (migration 0008: 64 hash "
                f"partitions by namespace, every row copied, indexes rebuilt), between the "
                f"two methods: {c['seconds']} s.",
                "",
            ]
    return "\n".join(lines)


def fmt_load(summary: dict) -> str:
    return (
        f"{summary['ops']} operations, longest {summary['max_ms']} ms, p99 {summary['p99_ms']} ms"
    )


def write_report(results: Path, quick: bool) -> Path:
    """Rewrite the results block of bench/ERASURE.md (or the quick report).

    It shows the latest run of each vendor and size in ``results`` (one JSON
    line per invocation), so a run of one vendor keeps the other's figures.
    """
    latest: dict[tuple[str, int], dict] = {}
    for line in results.read_text().splitlines():
        entry = json.loads(line)
        for report in entry["runs"]:
            latest[(report["vendor"], report["rows"]["memories"])] = {**entry, "report": report}
    runs = [latest[key] for key in sorted(latest, key=lambda k: (k[0] != "sqlite", k[1]))]
    block = f"{BEGIN}\n{markdown(runs, quick)}\n{END}"
    path = OUT / "ERASURE-quick.md" if quick else REPORT
    text = path.read_text() if path.exists() else f"# Erasure benchmark\n\n{BEGIN}\n{END}\n"
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text += "\n" + block + "\n"
    path.write_text(text)
    return path


# ----------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vendor", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--sqlite-namespaces", type=int, default=1000)
    parser.add_argument("--pg-namespaces", type=int, default=10_000)
    parser.add_argument("--per", type=int, default=1000)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument(
        "--purge-timeout",
        type=float,
        default=60.0,
        help="MEMORYAPP_ERASURE_PURGE_TIMEOUT for every erasure (the default setting is 10)",
    )
    parser.add_argument(
        "--pg-before",
        choices=["plain", "rewrite"],
        default="plain",
        help="PostgreSQL's 'before': unpartitioned tables with pg_repack (plain) or "
        "VACUUM FULL of the partitions (rewrite)",
    )
    parser.add_argument("--quick", action="store_true", help="50 namespaces per vendor")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # set in the child process
    args = parser.parse_args()
    if args.quick:
        args.sqlite_namespaces = args.pg_namespaces = 50
    global PURGE_TIMEOUT
    PURGE_TIMEOUT = args.purge_timeout
    if args.worker:
        print("RESULT " + json.dumps(run_vendor(args, args.worker)), flush=True)
        if not args.keep_db:
            drop_database(args.worker)
        return
    vendors = ["sqlite", "postgresql"] if args.vendor == "both" else [args.vendor]
    reports = []
    for vendor in vendors:  # each vendor in its own interpreter (Django is set up once)
        command = [sys.executable, __file__, *sys.argv[1:], "--worker", vendor]
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        result = None
        for line in child.stdout:  # progress is shown as it comes
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
            else:
                log(line.rstrip())
        if child.wait() or result is None:
            sys.exit(f"{vendor} run failed (exit {child.returncode})")
        reports.append(result)
    OUT.mkdir(parents=True, exist_ok=True)
    results = OUT / ("erasure-quick.json" if args.quick else "erasure.json")
    entry = {"code": code_version(), "host": host_info(), "runs": reports}
    entry["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with open(results, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    log(f"wrote {write_report(results, args.quick)}")


if __name__ == "__main__":
    main()
