"""Erasure verification cost: the kept-row check, one query per fragment (old) vs one pass (new).

Usage: .venv/bin/python bench/erasure_verify.py [--rows 3000] [--namespaces 3]
       [--vendors sqlite,postgresql] [--old-limit 0]

A fresh database (a file under bench/out/ for SQLite; ``memoryapp_verify_bench`` on
postgres://postgres@127.0.0.1:5432 for PostgreSQL) gets ``--rows`` memories spread over
``--namespaces`` namespaces that all hold the same content (bench/corpus.py, seed 1234,
imported into the first namespace and copied into the others),
then one namespace is erased with ``memoryapp.compliance.erase``. Every fragment the byte
scan finds is then also in a kept row, the worst case of the old kept-row check. During the
erasure the check is timed twice on the same fragments: the current one
(``memoryapp.compliance.kept``) and the one it replaced (``_old_in_kept_rows`` below, a
``LIKE '%fragment%'`` query per fragment), and their answers are compared.
``--old-limit K`` times the old check on K fragments only and extrapolates (it takes
minutes at 10,000 rows). Last, the new check's worst case is timed: 4,000 fragments no
row holds, so it reads every kept row. Each vendor runs in its own interpreter; results
are appended to bench/out/erasure_verify.json.
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

from benchlib import code_version, load_corpus_module  # bench/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_NAME = "memoryapp_verify_bench"
SEED = 1234


def log(message: str) -> None:
    print(message, flush=True)


def _old_in_kept_rows(alias: str, piece: bytes) -> bool:
    """The check before issue 14 (copied for comparison): one LIKE query per fragment."""
    from django.contrib.admin.models import LogEntry
    from django.db.models import Q

    from memoryapp.compliance.selection import (
        MEMORIES,
        REVIEW,
        ROW_MODELS,
        SUMMARIES,
        admin_log_available,
    )

    text = piece.decode("utf-8", "ignore")
    if len(text) < 6 or "\x00" in text:
        return False
    columns = {
        MEMORIES: ("title", "content", "key_normalized", "tags_json", "keywords_json"),
        SUMMARIES: ("summary_text",),
        REVIEW: ("title", "content", "evidence", "key_normalized", "tags_json"),
    }
    for table, model in ROW_MODELS.items():
        fields = columns[table]
        q = Q()
        for name in fields:
            q |= Q(**{f"{name}__contains": text})
        for row in model.objects.using(alias).filter(q).values_list(*fields)[:100]:
            if any(isinstance(v, str) and text in v for v in row):
                return True
    if admin_log_available(alias):
        for repr_ in (
            LogEntry.objects.using(alias)
            .filter(object_repr__contains=text)
            .values_list("object_repr", flat=True)[:100]
        ):
            if text in repr_:
                return True
    return False


def database_url(vendor: str) -> str:
    """A fresh, empty database for one run."""
    if vendor == "sqlite":
        path = OUT / "erasure-verify.sqlite3"
        OUT.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(path) + suffix).unlink()
        return f"sqlite:///{path}"
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_NAME}"')
    return f"postgres://postgres@127.0.0.1:5432/{PG_NAME}"


def copy_namespace(source: str, target: str, chunk: int = 5000) -> None:
    """Copy every memory of ``source`` into ``target`` (new ids), byte-identical text.

    Not through ``import_memories``: on PostgreSQL a second large namespace
    imported right after the first meets stale statistics that turn each key
    lookup into a scan of the namespace being filled (quadratic; see the report).
    """
    from memoryapp.models import Memory

    fields = [f.attname for f in Memory._meta.concrete_fields if not f.primary_key]
    last = ""
    while True:
        rows = list(
            Memory.objects.filter(namespace=source, pk__gt=last)
            .order_by("pk")
            .values("pk", *fields)[:chunk]
        )
        if not rows:
            return
        last = rows[-1].pop("pk")
        for row in rows:
            row.pop("pk", None)
            row["namespace"] = target
        Memory.objects.bulk_create([Memory(**row) for row in rows])


def worker(args: argparse.Namespace) -> dict:
    """Migrate, fill the namespaces, erase one, time both kept-row checks inside it."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from memoryapp import MemoryManager
    from memoryapp.compliance import erase, kept, purging

    per = args.rows // args.namespaces
    corpus, _, _ = load_corpus_module().make_corpus(per, seed=SEED)
    records = [(i, {"key": k, "value": v, "tags": t}) for i, (k, v, t) in enumerate(corpus, 1)]
    MemoryManager(project="bench/tenant-0").import_memories(records, actor="bench")
    for n in range(1, args.namespaces):
        copy_namespace("bench/tenant-0", f"bench/tenant-{n}")

    timings: dict = {}
    new_check = purging._in_kept_rows

    def measured(alias, pieces, found):
        started = time.perf_counter()
        explained = new_check(alias, pieces, found)
        timings["new_seconds"] = time.perf_counter() - started
        order = sorted(found)
        sample = order[: args.old_limit] if args.old_limit else order
        started = time.perf_counter()
        old = {i for i in sample if _old_in_kept_rows(alias, pieces[i])}
        old_seconds = time.perf_counter() - started
        timings["old_seconds_measured"] = old_seconds
        timings["old_fragments_timed"] = len(sample)
        timings["old_seconds"] = old_seconds * len(order) / max(len(sample), 1)
        timings["old_extrapolated"] = len(sample) < len(order)
        timings["same_answer"] = old == (explained & set(sample))
        timings["found"] = len(found)
        return explained

    purging._in_kept_rows = measured
    started = time.perf_counter()
    receipt = erase(namespace="bench/tenant-0", actor="bench")
    total = time.perf_counter() - started
    # The worst case of the new check: no fragment is explained, every kept row is read.
    absent = [f"absent fragment {i:06d} of none".encode() for i in range(4000)]
    started = time.perf_counter()
    assert kept.explained("default", absent) == set()
    timings["new_full_pass_seconds"] = time.perf_counter() - started
    scan = receipt.details["aliases"]["default"]["verification"].get("scan", {})
    return {
        "vendor": args.vendor,
        "rows": per * args.namespaces,
        "namespaces": args.namespaces,
        "erased_rows": receipt.counts.get("memories"),
        "fragments": scan.get("fragments"),
        "found_in_kept_rows": scan.get("found_in_kept_rows"),
        "verified": receipt.verified,
        "erase_seconds_with_both_checks": round(total, 3),
        "load_average": round(os.getloadavg()[0], 2),
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in timings.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--namespaces", type=int, default=3)
    parser.add_argument("--vendors", default="sqlite,postgresql")
    parser.add_argument("--old-limit", type=int, default=0, help="0: time every fragment")
    parser.add_argument("--vendor", help=argparse.SUPPRESS)  # set in the child process
    args = parser.parse_args()
    if args.vendor:
        print(json.dumps(worker(args)))
        return
    results = []
    for vendor in args.vendors.split(","):
        env = {**os.environ, "DATABASE_URL": database_url(vendor)}
        command = [sys.executable, __file__, *sys.argv[1:], "--vendor", vendor]
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            sys.exit(f"{vendor} run failed:\n{done.stderr}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        log(json.dumps(result))
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "erasure_verify.json", "a", encoding="utf-8") as f:
        f.write(json.dumps({"code": code_version(), "results": results}) + "\n")


if __name__ == "__main__":
    main()
