"""Helpers shared by the erasure, export, retention and compliance-CLI tests."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess

import pytest
from django.db import connection, connections

from memoryapp import MemoryManager
from memoryapp.compliance.selection import ADMIN_LOG, CONTENT_TABLES
from memoryapp.db import partitioning, vendor
from memoryapp.db.purge.vendors import for_connection
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary

PROJECT = "acme/web"
ALICE = "acme/alice"
BOB = "acme/bob"


def marker(kind: str) -> str:
    """A unique, lower-case marker string (it survives key normalisation unchanged)."""
    return f"mrk{kind}{secrets.token_hex(12)}"


def filler_with(markers: list[str], size: int = 2400) -> str:
    """~3 KB of incompressible text with the markers spread through it.

    Random base64 does not compress, so PostgreSQL stores it raw (TOAST) and
    the byte scan sees it; SQLite spills it into overflow pages.
    """
    noise = base64.b64encode(os.urandom(size)).decode()
    step = max(len(noise) // (len(markers) + 1), 1)
    parts, pos = [], 0
    for m in markers:
        parts.append(noise[pos : pos + step])
        parts.append(f" {m} ")
        pos += step
    parts.append(noise[pos:])
    return "".join(parts)


def seed(subject: str, project: str = PROJECT, *, using: str = "default") -> dict[str, list[str]]:
    """Rows of every kind for one subject, each carrying unique markers; returns them by kind.

    ``authored`` markers live in a project-scope memory the subject wrote (kept
    by an erasure unless ``include_authored``); every other kind is the subject's.
    """
    mm = MemoryManager(project=project, user=subject, using=using)
    found: dict[str, list[str]] = {}

    def mk(kind: str) -> str:
        value = marker(kind)
        found.setdefault(kind, []).append(value)
        return value

    long_markers = [mk("long"), mk("long"), mk("long")]
    mm.upsert(f"user_profile_{mk('key')}", filler_with(long_markers), scope="user")
    mm.upsert("user_city", f"lives in {mk('oldversion')}", scope="user")
    mm.upsert("user_city", f"moved to {mk('newversion')}", scope="user")
    hobby = mm.upsert("user_hobby", f"collects {mk('softdeleted')} stamps", scope="user")
    assert mm.delete(hobby.id)
    mm.save_session_summary(filler_with([mk("summary"), mk("summary")]), 100, 4)
    review, evidence = mk("review"), mk("ev")
    items = mm.crystallize_user_messages(
        [{"role": "user", "content": f"I prefer {review} themes. {evidence} was said"}]
    )
    assert items, "the crystallizer should propose a preference"
    ReviewItem.objects.using(using).create(
        namespace=project,
        subject=subject,
        scope="user",
        type="preference",
        key_normalized=f"preference_{secrets.token_hex(4)}",
        title=f"Preference: {mk('reviewtitle')}",
        content=f"likes {mk('reviewcontent')}",
        evidence=filler_with([mk("evidence")], size=600),
    )
    mm.upsert(f"deploy_{secrets.token_hex(3)}", f"project fact {mk('authored')}", scope="project")
    return found


def subject_markers(markers: dict[str, list[str]], *, authored: bool = False) -> list[str]:
    """The markers an erasure of the subject must remove (``authored`` ones too if asked)."""
    return [m for kind, ms in markers.items() if authored or kind != "authored" for m in ms]


def stored_bytes(
    tables=(*CONTENT_TABLES, ADMIN_LOG), *, checkpoint: bool = False, using: str = "default"
) -> bytes:
    """The raw bytes of the database files (SQLite) or of the tables' files (PostgreSQL).

    ``checkpoint`` first flushes PostgreSQL's buffers to the files; an erasure's
    purge ends with a CHECKPOINT already, so scans right after one skip it.
    """
    conn = connections[using]
    vendor = for_connection(conn)
    if checkpoint and conn.vendor == "postgresql":
        with conn.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    # Every partition of a partitioned table, not only those an erasure purged.
    tables, _ = vendor.storage_tables(conn, tables, None)
    files = vendor.scan_files(conn, tables)
    if not files.possible:
        pytest.skip(f"cannot read the database files here: {files.note}")
    # Read by another process: closing a descriptor of a SQLite file in this one
    # would drop this process's SQLite locks (memoryapp/db/scan_child.py says why).
    return subprocess.run(["cat", *files.paths], capture_output=True, check=True).stdout


def found_in(data: bytes, markers: list[str]) -> list[str]:
    """The markers present in ``data``."""
    return [m for m in markers if m.encode() in data]


def snapshot(subject: str) -> dict[str, list[tuple]]:
    """Every stored value of a subject's rows (to check they stay byte-identical)."""
    out = {}
    for model in (Memory, SessionSummary, ReviewItem):
        rows = model.objects.filter(subject=subject).order_by("pk").values_list()
        out[model._meta.db_table] = [tuple(r) for r in rows]
    ids = [r[0] for r in out["memories"]]
    out["memory_events"] = [
        tuple(r) for r in MemoryEvent.objects.filter(memory_id__in=ids).order_by("pk").values_list()
    ]
    return out


def sqlite_files_state() -> dict[str, int]:
    """SQLite: the -wal size and the free-page count right now."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
    path = connection.settings_dict["NAME"]
    wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
    return {"freelist_count": free, "wal_bytes": wal}


@pytest.fixture(autouse=False)
def purge_settings(settings, tmp_path):
    """Erasure tests' settings: a 10 s purge timeout and a ledger of their own.

    Other test runs on the same server can hold a transaction for a moment; the
    tests that expect "not purged" lower the timeout themselves.
    """
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    # Escalation tests climb to the full rewrite in test after test on one database;
    # tests/compliance/test_false_residue.py enforces the interval itself.
    settings.MEMORYAPP_ERASURE_FULL_REWRITE_INTERVAL = 0
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


@pytest.fixture
def two_subjects():
    """Alice's and Bob's seeded rows (their markers, by kind)."""
    return seed(ALICE), seed(BOB)


def namespace_beside(namespace: str, prefix: str) -> str:
    """A kept namespace (``prefix`` + a number) whose rows share ``namespace``'s files: on
    PostgreSQL, its hash partition (the byte scan reads only the partitions that held
    erased rows); elsewhere ``prefix`` itself."""
    if not vendor.for_connection(connection).partitions_by_namespace:
        return prefix
    with connection.cursor() as cursor:
        wanted = partitioning.remainder_for(cursor, namespace)
        for i in range(10_000):
            if partitioning.remainder_for(cursor, f"{prefix}{i}") == wanted:
                return f"{prefix}{i}"
    raise AssertionError("no namespace in the same partition")
