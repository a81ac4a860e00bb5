"""SQL seeding for the erasure benchmarks: many tenants that share part of their content.

Rows are written with plain SQL (SQLite ``executemany``, PostgreSQL ``generate_series``
over a pool table), never through the ORM per row, into the app's own schema (the
database is migrated first). What one seed holds:

- ``namespaces`` project namespaces ``bench/ns00000 …`` of ``per`` memories each. Row
  ``r`` of tenant ``t`` takes entry ``(t·7919 + r·104729) mod POOL`` of a pool of
  ``POOL`` corpus memories (``bench/corpus.py``, seed 1234). Every fourth row is the pool
  entry verbatim (title, key and content **shared** with the other rows that drew it, in
  other tenants); the others are **the tenant's own**: the key suffixed with the tenant
  and row numbers, the content prefixed with ``"Tenant 00042 note 0123: "`` (the title
  stays the pool's). Rows are inserted row number first, tenant second, so a tenant's rows
  are spread through the table as after months of interleaved writes, and ids are
  random-looking hex (a hash of ``t/r``), as the app's are.
- one ``create`` event per memory (every write path logs one).
- ``subjects`` users ``bench/user-0000 …``, each with ``subject_rows`` user-scope memories
  in its user namespace (its own prefix, pool content after it), two session summaries
  and two review items.

Secondary indexes are dropped before the rows go in and built again after (several
times faster than maintaining them row by row); the definitions are the migrated ones.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

POOL = 20_000
SHARE_EVERY = 4  # one row in four is a pool entry verbatim, shared with other tenants
PREFIX = "bench/ns"
BASE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
_DETAIL = json.dumps({"scope": "project", "source": "explicit", "via": "import"})
_USER_DETAIL = json.dumps({"scope": "user", "source": "explicit", "via": "import"})
SEEDED_TABLES = ("memories", "memory_events")


def namespace(t: int) -> str:
    """The name of tenant ``t``."""
    return f"{PREFIX}{t:05d}"


def subject(u: int) -> str:
    """The user key of user ``u`` (also its user namespace)."""
    return f"bench/user-{u:04d}"


def _norm(key: str) -> str:
    key = re.sub(r"[^a-z0-9_]+", "_", re.sub(r"\s+", "_", key.strip().lower()))
    return re.sub(r"_+", "_", key).strip("_")[:80]


def pool() -> list[tuple[str, str, str, str, str]]:
    """The pool: (title, key_normalized, content, tags_json, keywords_json) per entry."""
    from benchlib import load_corpus_module

    corpus, _, _ = load_corpus_module().make_corpus(POOL, seed=1234)
    out = []
    for key, value, tags in corpus:
        words = list(dict.fromkeys(w.lower().strip(".,") for w in value.split() if len(w) > 3))
        out.append((key[:255], _norm(key), value, json.dumps(tags), json.dumps(words[:8])))
    return out


def queries() -> list[str]:
    """Recall queries for the concurrent process (the corpus's own)."""
    from benchlib import load_corpus_module

    return [q for q, _ in load_corpus_module().make_queries(1234)]


def row_id(t: int, r: int) -> str:
    """A stable, random-looking 16-hex-digit id."""
    return hashlib.md5(f"{t}/{r}".encode()).hexdigest()[:16]


def _stamp(seconds: int) -> str:
    """SQLite's stored form of a timestamp (``IsoDateTimeField``), ``seconds`` after BASE."""
    return (BASE + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _memory_row(entries, t: int, r: int, namespaces: int) -> tuple:
    """Row ``r`` of tenant ``t``: a shared pool entry, or the tenant's own variant of one."""
    title, norm, content, tags, words = entries[(t * 7919 + r * 104729) % POOL]
    if r % SHARE_EVERY:
        norm = f"{norm}_{t:05d}_{r:04d}"
        content = f"Tenant {t:05d} note {r:04d}: {content}"
    stamp = _stamp(r * namespaces + t)
    return (row_id(t, r), namespace(t), None, "project", norm, title, content, tags, words,
            stamp, stamp)  # fmt: skip


def _user_rows(entries, u: int, n: int) -> list[tuple]:
    """User ``u``'s memories: the same columns as :func:`_memory_row`."""
    rows = []
    for i in range(n):
        title, norm, content, tags, words = entries[(u * 7919 + i * 104729 + 17) % POOL]
        stamp = _stamp(i)
        rows.append(
            (
                hashlib.md5(f"user{u}/{i}".encode()).hexdigest()[:16],
                subject(u),
                subject(u),
                "user",
                f"{norm}_u{u:04d}_{i:04d}",
                title,
                f"User {u:04d} said, note {i:04d}: {content}",
                tags,
                words,
                stamp,
                stamp,
            )
        )
    return rows


def _user_text(u: int, kind: str, n: int) -> str:
    return f"User {u:04d} {kind} {n}: " + " ".join(f"{kind}w{u}x{n}y{i}" for i in range(60))


def _user_extras(u: int) -> tuple[list[tuple], list[tuple]]:
    """(session summary rows, review item rows) of user ``u``."""
    stamp = _stamp(0)
    key = subject(u)
    summaries = [
        (f"benchsum{u:04d}{n:04d}", f"s{n}", _user_text(u, "summary", n), stamp, key, key)
        for n in range(2)
    ]
    reviews = [
        (
            f"benchrev{u:04d}{n:04d}",
            f"preference_user_{u:04d}_{n}",
            f"Preference of user {u:04d}, number {n}",
            _user_text(u, "review", n),
            _user_text(u, "evidence", n),
            stamp,
            stamp,
            key,
            key,
        )
        for n in range(2)
    ]
    return summaries, reviews


_MEMORY_COLUMNS = (
    "id, namespace, subject, scope, key_normalized, title, content, tags_json, "
    "keywords_json, created_at, updated_at"
)
_SUMMARY = (
    "INSERT INTO session_summaries (id, session_id, summary_text, tokens_before, "
    "messages_summarized, created_at, namespace, subject) VALUES ({p}, {p}, {p}, 0, 0, {t}, "
    "{p}, {p})"
)
_REVIEW = (
    "INSERT INTO memory_review_queue (id, scope, type, key_normalized, title, content, "
    "tags_json, evidence, source_session, occurrences, confidence, status, created_at, "
    "updated_at, namespace, subject) VALUES ({p}, 'user', 'preference', {p}, {p}, {p}, '[]', "
    "{p}, '', 1, 'inferred', 'pending', {t}, {t}, {p}, {p})"
)


# ----------------------------------------------------------------- SQLite
_SQLITE_MEMORY = f"INSERT INTO memories ({_MEMORY_COLUMNS}) VALUES ({', '.join('?' * 11)})"
_SQLITE_EVENT = (
    "INSERT INTO memory_events (memory_id, event_type, timestamp, detail, namespace, actor) "
    "VALUES (?, 'create', ?, ?, ?, 'bench')"
)


def seed_sqlite(path: str, namespaces: int, per: int, subject_rows: int, *, subjects=2, log=print):
    """Fill a migrated SQLite file; returns the row counts."""
    import sqlite3

    entries = pool()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA cache_size = -1000000")  # 1 GB page cache, while seeding only
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        f"AND tbl_name IN {SEEDED_TABLES}"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    total = 0
    for r in range(per):
        rows = [_memory_row(entries, t, r, namespaces) for t in range(namespaces)]
        conn.execute("BEGIN")
        conn.executemany(_SQLITE_MEMORY, rows)
        conn.executemany(_SQLITE_EVENT, [(m[0], m[9], _DETAIL, m[1]) for m in rows])
        conn.execute("COMMIT")
        total += len(rows)
        if r % 200 == 199:
            log(f"  seeded {total:,} memories")
    conn.execute("BEGIN")
    for u in range(subjects):
        rows = _user_rows(entries, u, subject_rows)
        conn.executemany(_SQLITE_MEMORY, rows)
        conn.executemany(_SQLITE_EVENT, [(m[0], m[9], _USER_DETAIL, m[1]) for m in rows])
        summaries, reviews = _user_extras(u)
        conn.executemany(_SUMMARY.format(p="?", t="?"), summaries)
        conn.executemany(_REVIEW.format(p="?", t="?"), reviews)
    conn.execute("COMMIT")
    log("  building indexes")
    for _, sql in indexes:
        conn.execute(sql)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    n = total + subjects * subject_rows
    return {"memories": n, "memory_events": n}


# ----------------------------------------------------------------- PostgreSQL
_PG_INDEXES = (
    "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid), "
    "(SELECT conname FROM pg_constraint WHERE conindid = indexrelid) "
    "FROM pg_index WHERE indrelid = %s::regclass"
)
_PG_INSERT = """
INSERT INTO memories (id, namespace, subject, scope, type, key_normalized, title, content,
    tags_json, keywords_json, source, confidence, sensitivity, created_at, updated_at)
SELECT substr(md5(t || '/' || r), 1, 16), 'bench/ns' || lpad(t::text, 5, '0'), NULL,
    'project', 'note',
    CASE WHEN r %% 4 = 0 THEN p.norm
         ELSE p.norm || '_' || lpad(t::text, 5, '0') || '_' || lpad(r::text, 4, '0') END,
    p.title,
    CASE WHEN r %% 4 = 0 THEN p.content
         ELSE 'Tenant ' || lpad(t::text, 5, '0') || ' note ' || lpad(r::text, 4, '0')
              || ': ' || p.content END,
    p.tags, p.words, 'explicit', 'explicit_user', 'normal',
    timestamptz '2025-01-01 00:00:00+00' + make_interval(secs => r * %(n)s::int + t),
    timestamptz '2025-01-01 00:00:00+00' + make_interval(secs => r * %(n)s::int + t)
FROM generate_series(%(r0)s::int, %(r1)s::int) AS r
CROSS JOIN generate_series(0, %(n)s::int - 1) AS t
JOIN bench_pool p ON p.i = (t::bigint * 7919 + r::bigint * 104729) %% %(pool)s
ORDER BY r, t
"""


def seed_postgres(conn, namespaces: int, per: int, subject_rows: int, *, subjects=2, log=print):
    """Fill a migrated PostgreSQL database with ``generate_series`` (psycopg, autocommit)."""
    entries = pool()
    conn.execute(
        "CREATE UNLOGGED TABLE bench_pool (i int PRIMARY KEY, title text, norm text, "
        "content text, tags text, words text)"
    )
    with conn.cursor().copy("COPY bench_pool FROM STDIN") as copy:
        for i, entry in enumerate(entries):
            copy.write_row((i, *entry))
    saved = _pg_drop_indexes(conn)
    step = max(1, 2_000_000 // max(namespaces, 1))  # about 2M rows per statement
    for r0 in range(0, per, step):
        r1 = min(per, r0 + step) - 1
        conn.execute(_PG_INSERT, {"n": namespaces, "r0": r0, "r1": r1, "pool": POOL})
        log(f"  seeded {(r1 + 1) * namespaces:,} memories")
    conn.execute("DROP TABLE bench_pool")
    _pg_users(conn, entries, subjects, subject_rows)
    conn.execute(
        "INSERT INTO memory_events (memory_id, event_type, timestamp, detail, namespace, actor) "
        "SELECT id, 'create', created_at, CASE WHEN scope = 'user' THEN %s ELSE %s END, "
        "namespace, 'bench' FROM memories",
        [_USER_DETAIL, _DETAIL],
    )
    log("  events written; building indexes")
    _pg_restore_indexes(conn, saved)
    log("  VACUUM ANALYZE")
    conn.execute("VACUUM ANALYZE")
    n = namespaces * per + subjects * subject_rows
    return {"memories": n, "memory_events": n}


def _pg_drop_indexes(conn) -> dict[str, list[tuple]]:
    """Drop the seeded tables' indexes (and primary keys); returns their definitions."""
    saved = {}
    for table in SEEDED_TABLES:
        saved[table] = conn.execute(_PG_INDEXES, [table]).fetchall()
        for name, _, constraint in saved[table]:
            if constraint:
                conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{constraint}"')
            else:
                conn.execute(f"DROP INDEX {name}")
    return saved


def _pg_restore_indexes(conn, saved: dict[str, list[tuple]]) -> None:
    for table, indexes in saved.items():
        for _, definition, constraint in indexes:
            if constraint:
                columns = re.search(r"\((.*)\)", definition).group(1)
                conn.execute(
                    f'ALTER TABLE {table} ADD CONSTRAINT "{constraint}" PRIMARY KEY ({columns})'
                )
            else:
                # A partitioned table's index reads "ON ONLY t", which would not
                # recurse into the partitions: built on the whole table instead.
                conn.execute(definition.replace(" ON ONLY ", " ON ", 1))


def _pg_users(conn, entries, subjects: int, subject_rows: int) -> None:
    with conn.cursor() as cursor:
        for u in range(subjects):
            cursor.executemany(
                f"INSERT INTO memories ({_MEMORY_COLUMNS}, type, source, confidence, "
                "sensitivity) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s::timestamptz, %s::timestamptz, 'note', 'explicit', 'explicit_user', 'normal')",
                [row[:9] + (row[9] + "+00:00", row[10] + "+00:00") for row in
                 _user_rows(entries, u, subject_rows)],
            )  # fmt: skip
            summaries, reviews = _user_extras(u)
            cursor.executemany(_SUMMARY.format(p="%s", t="%s::timestamptz"), summaries)
            cursor.executemany(_REVIEW.format(p="%s", t="%s::timestamptz"), reviews)
