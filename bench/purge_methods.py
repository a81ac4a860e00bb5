"""Which purge leaves no erased byte behind, at what cost: the experiments behind issue 14.2.

Usage: .venv/bin/python bench/purge_methods.py sqlite [--namespaces 300] [--per 1000]
       .venv/bin/python bench/purge_methods.py postgresql [--namespaces 1000] [--per 1000]

SQLite (a file under bench/out/, seeded by bench/erasure_seed.py): one tenant gets 20 long
memories (overflow pages) and 300 of its rows updated in place (old versions that must
go too), then is erased with ``erase(namespace=…, purge=False)`` (the app's DELETEs under
``secure_delete=ON``, no purge). Then, step by step on the same file:

  1. ``wal_checkpoint(TRUNCATE)`` only;
  2. the same after converting the file to ``auto_vacuum=INCREMENTAL`` (one VACUUM, in
     rollback-journal mode with no other connection, as the app does), a second tenant
     erased, ``PRAGMA incremental_vacuum`` and the checkpoint;
  3. a full ``VACUUM`` (the method before this change), for its duration.

After each step the main file and its ``-wal`` are searched for fragments only the erased
tenant held (its unique key suffixes, the unique start of its contents, the old versions,
the long values every 1 KiB), every page holding one is named (``dbstat``), and every page
on the freelist is read to check it is all zeros (a trunk page: page numbers only).

PostgreSQL (``memoryapp_purge_methods`` on 127.0.0.1:5432): one tenant is erased with
``purge=False``, then a plain ``VACUUM``, ``pg_repack`` and ``VACUUM FULL`` run in turn,
each while a second process reads and upserts in other tenants (its longest stall and
p99 are recorded); after each the relation files are searched as above.

Raw results go to bench/out/purge_methods.json (one JSON line per run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import struct
import subprocess
import time
from pathlib import Path

import erasure_seed as seed
from benchlib import code_version, host_info, migrated_django

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_NAME = "memoryapp_purge_methods"


def log(message: str) -> None:
    print(message, flush=True)


# ----------------------------------------------------------------- probes
def tenant_pieces(t: int) -> dict[str, list[bytes]]:
    """Give tenant ``t`` long and updated rows; the fragments only it holds, by kind."""
    old = add_long_and_updated(t)
    marker = f"Tenant {t:05d}"
    values = tenant_values(t)
    return {
        "unique keys": unique_pieces(values, f"_{t:05d}_"),
        "contents": unique_pieces(values, marker),
        "old versions": unique_pieces(old, marker),
    }


def unique_pieces(values: list[str], marker: str) -> list[bytes]:
    """Fragments of ``values`` that contain ``marker`` (so no kept row can hold them)."""
    from memoryapp.compliance.probes import pieces_of

    out = []
    for value in values:
        for piece in pieces_of([value]):
            if marker.encode() in piece:
                out.append(piece)
    return list(dict.fromkeys(out))


def tenant_values(t: int) -> list[str]:
    """Every probed text value of tenant ``t``'s memories, read before the erasure."""
    from memoryapp.compliance.selection import TEXT_FIELDS
    from memoryapp.models import Memory

    values = []
    for row in Memory.objects.filter(namespace=seed.namespace(t)).values_list(
        *TEXT_FIELDS["memories"]
    ):
        values.extend(v for v in row if v)
    return values


def add_long_and_updated(t: int, long_rows: int = 20, updated: int = 300) -> list[str]:
    """Give tenant ``t`` long memories and in-place updates; returns the old versions."""
    import base64

    from memoryapp.models import Memory

    ns = seed.namespace(t)
    for i in range(long_rows):
        # Random base64 does not compress: PostgreSQL stores it raw in TOAST, where the
        # byte scan can see it; SQLite spills it into overflow pages.
        body = " ".join(
            f"Tenant {t:05d} long {i:02d} part {k:03d} "
            + base64.b64encode(os.urandom(150)).decode()
            for k in range(60)
        )
        Memory.objects.create(
            namespace=ns,
            scope="project",
            key_normalized=f"long_{t:05d}_{i}",
            title="t",
            content=body,
        )
    old = []
    for memory in Memory.objects.filter(namespace=ns).order_by("id")[:updated]:
        old.append(memory.content)
        memory.content = f"Tenant {t:05d} updated: " + memory.content + " (edited, longer now)"
        memory.save(update_fields=["content"])
    return old


# ----------------------------------------------------------------- SQLite files
def pages_holding(path: str, pieces: list[bytes], page_size: int) -> dict[int, int]:
    """Page number → how many of ``pieces`` start in it (main file)."""
    from memoryapp.db.purge.scan import scan

    found, _ = scan([path], pieces)
    data = Path(path).read_bytes() if found else b""
    hits: dict[int, int] = {}
    for piece in (pieces[i] for i in sorted(found)):
        at = data.find(piece)
        while at >= 0:
            page = at // page_size + 1
            hits[page] = hits.get(page, 0) + 1
            at = data.find(piece, at + 1)
    return hits


def page_owner(conn: sqlite3.Connection, pages: list[int]) -> dict[int, str]:
    """Which b-tree (table or index name) each page belongs to, per ``dbstat``."""
    if not pages:
        return {}
    marks = ",".join("?" * len(pages))
    rows = conn.execute(
        f"SELECT pageno, name, pagetype FROM dbstat WHERE pageno IN ({marks})", pages
    ).fetchall()
    found = {pageno: f"{name} ({kind})" for pageno, name, kind in rows}
    return {p: found.get(p, "not in any b-tree (freelist or pointer map)") for p in pages}


def freelist_pages(path: str) -> tuple[list[int], list[int]]:
    """(trunk pages, leaf pages) of the file's freelist, read from the file itself."""
    with open(path, "rb") as f:
        header = f.read(100)
        page_size = struct.unpack(">H", header[16:18])[0] or 65536
        trunk = struct.unpack(">I", header[32:36])[0]
        trunks, leaves = [], []
        while trunk:
            trunks.append(trunk)
            f.seek((trunk - 1) * page_size)
            page = f.read(page_size)
            nxt, count = struct.unpack(">II", page[:8])
            leaves.extend(struct.unpack(f">{count}I", page[8 : 8 + 4 * count]))
            trunk = nxt
    return trunks, leaves


def freelist_is_zeroed(path: str) -> dict:
    """Read every freelist page: leaves must be all zeros, trunks hold page numbers only.

    Past its count a trunk page keeps the numbers of pages taken off it since (stale
    4-byte page numbers, not content): those must all be at most the page count.
    """
    trunks, leaves = freelist_pages(path)
    dirty_leaves = dirty_trunks = 0
    with open(path, "rb") as f:
        header = f.read(100)
        page_size = struct.unpack(">H", header[16:18])[0] or 65536
        pages = os.path.getsize(path) // page_size
        for number in trunks + leaves:
            f.seek((number - 1) * page_size)
            page = f.read(page_size)
            if number in trunks:
                rest = page[8 + 4 * struct.unpack(">I", page[4:8])[0] :]
                numbers = struct.unpack(f">{len(rest) // 4}I", rest[: len(rest) // 4 * 4])
                dirty_trunks += any(n > pages for n in numbers)
            else:
                dirty_leaves += any(page)
    return {
        "trunk_pages": len(trunks),
        "leaf_pages": len(leaves),
        "leaves_not_zeroed": dirty_leaves,
        "trunks_with_more_than_page_numbers": dirty_trunks,
    }


def sqlite_state(path: str, pieces: dict[str, list[bytes]]) -> dict:
    """Residue of each piece category in the main file and -wal, and the freelist."""
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    out: dict = {
        "file_bytes": os.path.getsize(path),
        "wal_bytes": os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0,
        "freelist_count": conn.execute("PRAGMA freelist_count").fetchone()[0],
        "auto_vacuum": conn.execute("PRAGMA auto_vacuum").fetchone()[0],
        "freelist": freelist_is_zeroed(path),
        "found": {},
        "pages": {},
    }
    wal = Path(path + "-wal").read_bytes() if out["wal_bytes"] else b""
    for kind, group in pieces.items():
        hits = pages_holding(path, group, page_size)
        in_wal = sum(1 for p in group if p in wal)
        out["found"][kind] = {"pieces": len(group), "main_file": sum(hits.values()), "wal": in_wal}
        for page, owner in page_owner(conn, sorted(hits)).items():
            out["pages"][owner] = out["pages"].get(owner, 0) + hits[page]
    conn.close()
    return out


def timed(conn: sqlite3.Connection, sql: str) -> float:
    started = time.perf_counter()
    conn.execute(sql).fetchall()
    return round(time.perf_counter() - started, 3)


def run_sqlite(args) -> dict:
    """The SQLite experiment (see the module docstring)."""
    path = OUT / "purge-methods.sqlite3"
    OUT.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(path) + suffix).unlink()
    migrated_django(f"sqlite:///{path}")
    started = time.perf_counter()
    counts = seed.seed_sqlite(str(path), args.namespaces, args.per, 100, log=log)
    result: dict = {"vendor": "sqlite", "seed_seconds": round(time.perf_counter() - started, 1)}
    result["rows"] = counts
    from memoryapp.compliance import erase

    steps = {}
    for step, t in (("checkpoint only", 7), ("incremental_vacuum", 11)):
        pieces = tenant_pieces(t)
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("PRAGMA secure_delete = ON")
        if step == "incremental_vacuum":
            # As the app converts: alone with the file, in rollback-journal mode.
            from django.db import connection as django_connection

            django_connection.close()
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            steps["conversion VACUUM seconds"] = timed(conn, "VACUUM")
            conn.execute("PRAGMA journal_mode = WAL")
        before = sqlite_state(str(path), pieces)
        t0 = time.perf_counter()
        receipt = erase(namespace=seed.namespace(t), purge=False)
        delete_s = round(time.perf_counter() - t0, 3)
        free_after_delete = conn.execute("PRAGMA freelist_count").fetchone()[0]
        timings = {"delete (erase, purge=False)": delete_s}
        if step == "incremental_vacuum":
            # executescript steps the pragma to the end; execute() frees one page only.
            t1 = time.perf_counter()
            conn.executescript("PRAGMA incremental_vacuum;")
            timings["incremental_vacuum"] = round(time.perf_counter() - t1, 3)
        timings["wal_checkpoint(TRUNCATE)"] = timed(conn, "PRAGMA wal_checkpoint(TRUNCATE)")
        after = sqlite_state(str(path), pieces)
        steps[step] = {
            "erased_rows": receipt.counts.get("memories"),
            "freelist_after_delete": free_after_delete,
            "seconds": timings,
            "before": before,
            "after": after,
        }
        conn.close()
        log(json.dumps({step: steps[step]["seconds"], "after": after["found"]}))
    conn = sqlite3.connect(str(path), isolation_level=None)
    steps["full VACUUM seconds"] = timed(conn, "VACUUM")
    conn.close()
    result["steps"] = steps
    return result


# ----------------------------------------------------------------- PostgreSQL
def pg_url() -> str:
    """A fresh, empty database for the experiment."""
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{PG_NAME}"')
    return f"postgres://postgres@127.0.0.1:5432/{PG_NAME}"


def pg_residue(tables: list[str], pieces: dict[str, list[bytes]]) -> dict:
    """Per piece category: how many occur in the tables' files, and in which relations."""
    from django.db import connection

    from memoryapp.db.purge.scan import scan
    from memoryapp.db.purge.vendors import for_connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")  # the files, not the shared buffers, are what is read
    vendor = for_connection(connection)
    files = vendor.scan_files(connection, tables)
    names = pg_file_names(tables)
    out: dict = {"bytes": 0, "found": {}, "relations": {}}
    for kind, group in pieces.items():
        hit: set[int] = set()
        for path in files.paths:
            found, scanned = scan([path], group)
            out["bytes"] += scanned if kind == next(iter(pieces)) else 0
            if found:
                rel = names.get(path.split(".")[0], path)
                out["relations"][rel] = out["relations"].get(rel, 0) + len(found)
            hit |= found
        out["found"][kind] = {"pieces": len(group), "found": len(hit)}
    return out


def pg_file_names(tables: list[str]) -> dict[str, str]:
    """Relation file path (absolute, main segment) → relation name."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('data_directory')")
        data_dir = cursor.fetchone()[0]
        cursor.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c "
            "WHERE c.relkind IN ('r', 'i', 't') AND pg_relation_filepath(c.oid) IS NOT NULL"
        )
        return {os.path.join(data_dir, path): name for name, path in cursor.fetchall()}


def pg_repack_command(url_name: str, tables: list[str], timeout: int) -> list[str]:
    command = [
        "pg_repack", "--host=127.0.0.1", "--port=5432", "--username=postgres",
        f"--dbname={url_name}", "--no-order", "--no-kill-backend", "--no-analyze",
        f"--wait-timeout={timeout}",
    ]  # fmt: skip
    return command + [f"--table=public.{t}" for t in tables]


def run_postgres(args) -> dict:
    """The PostgreSQL experiment (see the module docstring)."""
    from erasure_load import Load, summarize

    url = pg_url()
    migrated_django(url)
    import psycopg
    from django.db import connection

    from memoryapp.db import partitioning

    # These experiments compared purges of whole tables, the layout before migration
    # 0008: the still empty tables are put back unpartitioned (bench/ERASURE.md).
    with connection.cursor() as cursor:
        for table in partitioning.TABLES:
            partitioning.unpartition_table(cursor, table)

    from memoryapp.compliance import erase
    from memoryapp.compliance.selection import ADMIN_LOG, CONTENT_TABLES, purged_with

    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        counts = seed.seed_postgres(conn, args.namespaces, args.per, 100, log=log)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
    result: dict = {"vendor": "postgresql", "rows": counts}
    result["seed_seconds"] = round(time.perf_counter() - started, 1)
    tables = purged_with((*CONTENT_TABLES, ADMIN_LOG))
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('memories'), pg_database_size(current_database())"
        )
        result["memories_bytes"], result["database_bytes"] = cursor.fetchone()
    load_ns = [seed.namespace(t) for t in range(100, 100 + 20)]
    OUT.mkdir(parents=True, exist_ok=True)
    steps: dict = {}

    def prepare(t: int) -> dict[str, list[bytes]]:
        pieces = tenant_pieces(t)
        erase(namespace=seed.namespace(t), purge=False)
        return pieces

    def measured(name: str, pieces, work) -> None:
        with Load(url, load_ns, OUT) as load:
            t0 = time.time()
            work()
            t1 = time.time()
        steps[name] = {
            "seconds": round(t1 - t0, 2),
            "load": summarize(load.ops, t0, t1),
            "load_outside": summarize([op for op in load.ops if op[0] < t0 or op[0] >= t1]),
            "residue": pg_residue(tables, pieces),
        }
        log(json.dumps({name: {k: v for k, v in steps[name].items()}}))

    def lazy_vacuum() -> None:
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"VACUUM {qn(table)}")

    def repack() -> None:
        subprocess.run(pg_repack_command(PG_NAME, tables, 10), check=True, capture_output=True)

    def vacuum_full() -> None:
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"VACUUM FULL {qn(table)}")

    pieces = prepare(7)
    steps["after delete"] = {"residue": pg_residue(tables, pieces)}
    measured("lazy VACUUM", pieces, lazy_vacuum)
    measured("pg_repack", pieces, repack)
    pieces = prepare(11)
    measured("VACUUM FULL", pieces, vacuum_full)
    result["steps"] = steps
    return result


# ----------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vendor", choices=["sqlite", "postgresql"])
    parser.add_argument("--namespaces", type=int, default=300)
    parser.add_argument("--per", type=int, default=1000)
    args = parser.parse_args()
    result = run_sqlite(args) if args.vendor == "sqlite" else run_postgres(args)
    result.update(host=host_info(), code=code_version(), load_average=os.getloadavg())
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "purge_methods.json", "a", encoding="utf-8") as f:
        f.write(json.dumps(result) + "\n")
    log(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
