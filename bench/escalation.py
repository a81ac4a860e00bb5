"""What each step of the SQLite purge ladder costs, by file size (issue 27): bench/ESCALATION.md.

Usage: .venv/bin/python bench/escalation.py [--sizes 100,1000] [--per 1000] [--quick]

Per size (``namespaces × per`` memories, one event each; bench/erasure_seed.py), a fresh
SQLite file (bench/out/escalation.sqlite3) is seeded with plain SQL and converted to
``auto_vacuum=INCREMENTAL`` (what the first purge does). Then:

  1. the common case: ``erase(namespace=…)`` of one tenant, end to end, with the
     ladder in place — the steps its receipt records (one, when it verifies first
     time) and the seconds of the purge, the verification and the whole erasure;
  2. each step of the ladder timed on its own (``memoryapp.db.ladder.run``) after
     ``erase(namespace=…, purge=False)`` of another tenant: the incremental purge,
     the index rebuild (``REINDEX`` of the erased tables, then the incremental purge)
     and the full rewrite (``VACUUM``); each step on the file the step before left.

``--residue N`` measures instead how often each step is needed: N deterministic layouts
(seeds 0…N-1) of two kinds, each erased once on a fresh small file with the whole ladder:
"one namespace" (issue 27: 1,501 memories of ``acme/telemetry`` erased beside three
namespaces of the same size) and "alternate namespaces" (tests/compliance/test_escalation.py: 40
namespaces of 50 memories with long keys, every other one erased by ids); per layout,
which steps its receipt records.

Raw results: bench/out/escalation.json (residue.json); the table between the ``results``
(``residue``) markers of bench/ESCALATION.md is rewritten (``--quick``:
bench/out/ESCALATION-quick.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path

import erasure_seed as seed
from benchlib import code_version, host_info, migrated_django  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
REPORT = ROOT / "bench" / "ESCALATION.md"
BEGIN, END = "<!-- results -->", "<!-- /results -->"
RESIDUE_BEGIN, RESIDUE_END = "<!-- residue -->", "<!-- /residue -->"
SUBJECT_ROWS = 100


def log(message: str) -> None:
    print(message, flush=True)


FILE = {"name": "escalation.sqlite3"}  # residue.sqlite3 under --residue


def path() -> Path:
    return OUT / FILE["name"]


def remove_files() -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path()}{suffix}").unlink()


def file_bytes() -> int:
    return sum(
        os.path.getsize(f"{path()}{s}") for s in ("", "-wal") if Path(f"{path()}{s}").exists()
    )


def convert() -> float:
    """The one-time conversion to auto_vacuum=INCREMENTAL, with the file to itself."""
    conn = sqlite3.connect(path(), isolation_level=None)
    began = time.perf_counter()
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return round(time.perf_counter() - began, 2)


def common_case(namespace: str) -> dict:
    """One erasure end to end; the purge and verification timed by wrapping them."""
    from memoryapp.compliance import erase, purging
    from memoryapp.db import ladder

    seconds = {"purge": 0.0, "verify": 0.0}
    real_run, real_verify = ladder.run, purging._verify

    def timed(name, function):
        def call(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - began

        return call

    ladder.run, purging._verify = timed("purge", real_run), timed("verify", real_verify)
    try:
        began = time.perf_counter()
        receipt = erase(namespace=namespace)
        total = time.perf_counter() - began
    finally:
        ladder.run, purging._verify = real_run, real_verify
    steps = receipt.details["aliases"]["default"]["purge_steps"]
    return {
        "verified": receipt.verified,
        "steps": [f"{s['step']}: {s['result']}" for s in steps],
        "erasure_s": round(total, 2),
        "purge_s": round(seconds["purge"], 2),
        "verify_s": round(seconds["verify"], 2),
    }


def each_step(namespace: str) -> list[dict]:
    """Every step of the ladder, and the index rebuild measured beside them (not kept),
    timed alone after a deferred erasure of ``namespace``, each on the file the one
    before left."""
    from django.db import connection

    from memoryapp import conf
    from memoryapp.compliance import erase
    from memoryapp.compliance.selection import ADMIN_LOG, CONTENT_TABLES, purged_with
    from memoryapp.db import ladder
    from memoryapp.db.purge.vendors import for_connection

    receipt = erase(namespace=namespace, purge=False)
    vendor = for_connection(connection)
    erased = receipt.details["aliases"]["default"]["tables"]
    tables = purged_with(t for t in (*CONTENT_TABLES, ADMIN_LOG) if t in erased)
    first, *stronger = ladder.ladder("sqlite", conf.erasure_purge_method())

    def reindex_then_purge(**kwargs):
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"REINDEX {connection.ops.quote_name(table)}")
        return ladder.run(first, vendor, connection, tables, **kwargs)

    runs = [
        (first.name, lambda **kw: ladder.run(first, vendor, connection, tables, **kw)),
        ("index rebuild (REINDEX) and incremental purge (not kept)", reindex_then_purge),
        *(
            (s.name, lambda s=s, **kw: ladder.run(s, vendor, connection, tables, **kw))
            for s in stronger
        ),
    ]
    out = []
    for name, step in runs:
        began = time.perf_counter()
        outcome = step(token={}, timeout=600)
        out.append(
            {
                "step": name,
                "ok": outcome.ok,
                "seconds": round(time.perf_counter() - began, 2),
                "file_bytes": file_bytes(),
            }
        )
        log(f"    {name}: {out[-1]['seconds']} s ({outcome.status})")
    return out


def run_size(namespaces: int, per: int) -> dict:
    remove_files()
    OUT.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path()}"
    if "django" not in globals():
        migrated_django(url)
        globals()["django"] = True
    else:  # a later size: the same settings, a fresh file, migrated again
        from django.core.management import call_command
        from django.db import connection

        connection.close()
        call_command("migrate", verbosity=0, interactive=False)
    from django.db import connection

    connection.close()
    log(f"seeding {namespaces:,} × {per:,} memories")
    began = time.perf_counter()
    counts = seed.seed_sqlite(str(path()), namespaces, per, SUBJECT_ROWS, log=log)
    seeded = round(time.perf_counter() - began, 1)
    conversion = convert()
    size = file_bytes()
    log(f"  {size / 2**20:.0f} MiB, converted in {conversion} s; the common case")
    common = common_case(seed.namespace(7))
    log(f"    {common}")
    steps = each_step(seed.namespace(8))
    return {
        "memories": counts["memories"],
        "file_mib": round(size / 2**20, 1),
        "seed_s": seeded,
        "conversion_s": conversion,
        "common_case": common,
        "steps": steps,
    }


def markdown(runs: list[dict]) -> list[str]:
    lines = [
        "| memories | file | common case: steps, purge / verify / whole erasure | "
        "incremental purge | index rebuild + incremental purge | full rewrite (VACUUM) |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        common = run["common_case"]
        times = {s["step"].split(" (")[0]: s["seconds"] for s in run["steps"]}
        lines.append(
            f"| {run['memories']:,} | {run['file_mib']:,} MiB | {len(common['steps'])} "
            f"({'verified' if common['verified'] else 'NOT verified'}), {common['purge_s']} / "
            f"{common['verify_s']} / {common['erasure_s']} s | "
            f"{times.get('incremental purge')} s | {times.get('index rebuild')} s | "
            f"{times.get('full rewrite')} s |"
        )
    return lines


# ----------------------------------------------------------------- how often
def _layout(kind: str, seed: int) -> list[str]:
    """Rows of one layout (ids and key lengths from ``seed``); the ids to erase."""
    import random

    from memoryapp.fields import now
    from memoryapp.models import Memory

    rng = random.Random(seed)
    stamp = now()
    if kind == "one namespace":
        groups = [(f"acme/telemetry{s}", 1501, s == "") for s in ("", "project", "s", "x")]
    else:
        groups = [(f"acme/telemetry{k:02d}", 50, k % 2 == 0) for k in range(40)]
    rows, erased = [], []
    for g, (name, n, gone) in enumerate(groups):
        for i in range(n):
            pad = "p" * rng.randrange(200) if kind != "one namespace" else ""
            key = f"{'telemetry' if gone else 'kept'}_event_{g}_{i}{pad}"
            row = Memory(
                id=f"{rng.getrandbits(128):032x}",
                namespace=name,
                scope="project",
                key_normalized=key,
                title=f"Telemetry event {g} {i}",
                content=f"event {g} {i} payload",
                created_at=stamp,
                updated_at=stamp,
            )
            rows.append(row)
            if gone:
                erased.append(row.id)
    Memory.objects.bulk_create(rows, batch_size=500)
    return erased


def residue_runs(seeds: int) -> list[dict]:
    """Per layout kind, the steps each seed's erasure needed."""
    from django.db import connection

    from memoryapp.compliance import erase
    from memoryapp.models import ErasureReceipt, Memory

    out = []
    for kind in ("one namespace", "alternate namespaces"):
        needed: dict[str, int] = {}
        for number in range(seeds):
            Memory.objects.all().delete()
            ErasureReceipt.objects.all().delete()
            with connection.cursor() as cursor:
                cursor.execute("VACUUM")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            ids = _layout(kind, number)
            receipt = erase(ids=ids)
            steps = receipt.details["aliases"]["default"]["purge_steps"]
            last = steps[-1]["step"] if receipt.verified else "none verified"
            needed[last] = needed.get(last, 0) + 1
            found = [s.get("found", 0) for s in steps if s["outcome"] == "residue"]
            log(f"  {kind}, seed {number}: {len(steps)} step(s), residue found {found}")
        out.append({"layout": kind, "seeds": seeds, "verified_by": needed})
    return out


def write_residue(runs: list[dict]) -> Path:
    lines = [
        RESIDUE_BEGIN,
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, SQLite "
        f"{sqlite3.sqlite_version}: the step that verified each erasure",
        "",
        "| layout | seeds | verified by |",
        "|---|---|---|",
    ]
    for run in runs:
        said = ", ".join(f"{step}: {n}" for step, n in run["verified_by"].items())
        lines.append(f"| {run['layout']} | {run['seeds']} | {said} |")
    lines.append(RESIDUE_END)
    text = REPORT.read_text()
    head, _, rest = text.partition(RESIDUE_BEGIN)
    _, _, tail = rest.partition(RESIDUE_END)
    REPORT.write_text(head + "\n".join(lines) + tail)
    return REPORT


def write_report(runs: list[dict], quick: bool) -> Path:
    block = [
        BEGIN,
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"SQLite {sqlite3.sqlite_version}, {host_info().get('cores', '?')} CPU(s), "
        f"code {code_version().get('commit', '?')}:",
        "",
        *markdown(runs),
        END,
    ]
    target = OUT / "ESCALATION-quick.md" if quick else REPORT
    text = target.read_text() if target.exists() else f"{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    target.write_text(head + "\n".join(block) + tail)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="namespaces per run, comma-separated")
    parser.add_argument("--per", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="10 × 100 memories: a smoke run")
    parser.add_argument("--residue", type=int, default=0, help="seeds per residue layout")
    args = parser.parse_args()
    if args.residue:
        FILE["name"] = "residue.sqlite3"
        remove_files()
        OUT.mkdir(parents=True, exist_ok=True)
        migrated_django(f"sqlite:///{path()}")
        from django.db import connection

        connection.close()  # the conversion needs the file to itself
        convert()
        runs = residue_runs(args.residue)
        (OUT / "residue.json").write_text(json.dumps(runs, indent=2))
        log(f"wrote {write_residue(runs)}")
        remove_files()
        return
    sizes = [10] if args.quick else [int(s) for s in args.sizes.split(",")]
    per = 100 if args.quick else args.per
    os.environ.setdefault("MEMORYAPP_ERASURE_PURGE_TIMEOUT", "600")
    runs = [run_size(n, per) for n in sizes]
    OUT.mkdir(parents=True, exist_ok=True)
    raw = OUT / ("escalation-quick.json" if args.quick else "escalation.json")
    raw.write_text(json.dumps({"host": host_info(), "runs": runs}, indent=2))
    log(f"wrote {raw} and {write_report(runs, args.quick)}")
    remove_files()


if __name__ == "__main__":
    main()
