"""The plain-SQL writes of the bulk import write what the ORM version wrote.

``_orm_write_chunk`` below is ``memoryapp.writes.bulk._write_chunk`` as it was before the
import was rewritten for speed (``Memory(...)`` + ``bulk_create``/``bulk_update``,
``MemoryEvent`` + ``bulk_create``). The same records are imported through both,
into two namespaces of one database, with the clock frozen, and every column of
every row and event is compared, raw as the database holds it, together with the
movement of the change counter (row-level triggers on SQLite, statement-level on
PostgreSQL). The import is also compared with the ordinary upsert path, and its
refusals and atomicity are checked.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent, dump_list
from memoryapp.rules import validation
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.writes import bulk, live, store
from tests.rules.test_guard_prefilter import unfiltered_find_secret_family
from tests.rules.test_guards import SECRET_SAMPLES

pytestmark = pytest.mark.django_db

SENSITIVE = "content appears to contain sensitive credentials"


def _orm_write_chunk(rows, using, namespace, subject, actor) -> tuple[int, int]:
    """The ORM implementation the plain-SQL one replaced (verbatim but for ``bulk.now``,
    and for keeping an updated row's subject when the import has no user key, as
    ``store.write`` does)."""
    stamp = bulk.now()
    keys = {(p.scope, p.key_normalized) for p in rows}
    existing = {
        (m.scope, m.key_normalized): m
        for m in Memory.objects.using(using)
        .live()
        .filter(namespace=namespace, key_normalized__in=[k for _, k in keys])
    }
    inserts: list[Memory] = []
    updates: list[Memory] = []
    for p in rows:
        fields = {
            "type": p.type,
            "title": p.title,
            "content": p.content,
            "tags_json": dump_list(p.tags),
            "keywords_json": dump_list(p.keywords),
            "source": p.source,
            "confidence": p.confidence,
            "subject": subject,
        }
        row = existing.get((p.scope, p.key_normalized))
        if row is None:
            inserts.append(
                Memory(
                    id=live.new_id(),
                    namespace=namespace,
                    scope=p.scope,
                    key_normalized=p.key_normalized,
                    created_at=stamp,
                    updated_at=stamp,
                    **fields,
                )
            )
        else:
            old_subject = row.subject
            for name, value in fields.items():
                setattr(row, name, value)
            if subject is None:
                row.subject = old_subject
            row.updated_at = stamp
            updates.append(row)
    Memory.objects.using(using).bulk_create(inserts, batch_size=500)
    if updates:
        Memory.objects.using(using).bulk_update(
            updates,
            ["type", "title", "content", "tags_json", "keywords_json", "source", "confidence",
             "subject", "updated_at"],
            batch_size=500,
        )  # fmt: skip
    events = [
        MemoryEvent(
            memory_id=m.id,
            event_type=kind,
            namespace=namespace,
            actor=actor,
            timestamp=stamp,
            detail=json.dumps({"scope": m.scope, "source": m.source, "via": "import"}),
        )
        for kind, group in (("create", inserts), ("update", updates))
        for m in group
    ]
    MemoryEvent.objects.using(using).bulk_create(events, batch_size=1000)
    return len(inserts), len(updates)


def _lines(records):
    return [(n, r) for n, r in enumerate(records, start=1)]


def _counter() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM schema_meta WHERE key = 'memories_change'")
        return int(cursor.fetchone()[0])


def _rows(namespaces) -> dict:
    """Every row of ``namespaces`` raw, keyed by (scope, key), id/namespace replaced."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM memories WHERE namespace IN (%s, %s) ORDER BY scope, key_normalized",
            list(namespaces),
        )
        names = [c[0] for c in cursor.description]
        rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    ids = {r["id"]: (r["scope"], r["key_normalized"], r["deleted_at"] is None) for r in rows}
    out = {}
    for r in rows:
        key = (r.pop("scope"), r.pop("key_normalized"), r["deleted_at"] is None)
        assert len(r.pop("id")) == 16
        r.pop("namespace")
        # The vectors the plain-SQL path adds (the ORM reference has none) are checked by
        # tests/recall/test_semantic.py.
        r.pop("embedding", None), r.pop("embedding_model", None)
        if r["subject"] == namespaces[1]:  # the user key of this side
            r["subject"] = "<user>"
        out.setdefault(key, []).append(r)
    return {key: sorted(group, key=repr) for key, group in out.items()}, ids


def _events(namespaces, ids) -> list:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_id, event_type, timestamp, detail, actor FROM memory_events "
            "WHERE namespace IN (%s, %s) ORDER BY id",
            list(namespaces),
        )
        return [(ids.get(m, m), *rest) for m, *rest in cursor.fetchall()]


def _snapshot(project, user):
    rows, ids = _rows((project, user))
    return rows, _events((project, user), ids)


def _records(count, *, suffix="", source=None, tags=("docs",)):
    out = []
    for i in range(count):
        record = {
            "key": f"{'user_' if i % 3 == 0 else ''}Key {i} — ключ",
            "value": f"Deploy step {i}{suffix}: run src/app/main.py then README.md; "
            f"quote ' and \" and \\ backslash, tab\tend, ünïcødé 中文 {i * 7}",
            "tags": [*tags, f"T{i % 5}"],
        }
        if i % 7 == 0:
            record["scope"] = "project"
        if i % 11 == 0:
            record["type"] = "decision"
        if source:
            record["source"] = source
        out.append(record)
    return out


def _freeze(monkeypatch, stamp):
    """Freeze the clock of the import and of the auto cap's soft deletes."""
    monkeypatch.setattr(bulk, "now", lambda: stamp)
    monkeypatch.setattr(store, "now", lambda: stamp)


def _import_both(monkeypatch, records, *, user_key=True, **kwargs):
    """Import ``records`` through the reference (namespace "ref") and the new code ("new").

    Ids come from a counter per side ("a…" and "b…", 16 hex digits), so that ties that
    the database breaks by id (the auto cap) break the same way on both sides.
    """
    results = {}
    for label, writer in (("ref", _orm_write_chunk), ("new", _NEW_WRITE_CHUNK)):
        counter = iter(range(_ID_BASE[label], _ID_BASE[label] + 10**6))
        _ID_BASE[label] += 10**6
        monkeypatch.setattr(
            live, "new_id", lambda c=counter, p="ab"[label == "new"]: f"{p}{next(c):015x}"
        )
        monkeypatch.setattr(bulk, "_write_chunk", writer)
        mm = MemoryManager(project=f"{label}-p", user=f"{label}-u" if user_key else None)
        before, progress = _counter(), []
        report = mm.import_memories(
            _lines(records), actor="tester", progress=progress.append, **kwargs
        )
        results[label] = (report, _counter() - before, progress)
    monkeypatch.setattr(bulk, "_write_chunk", _NEW_WRITE_CHUNK)
    return results


_NEW_WRITE_CHUNK = bulk._write_chunk
_ID_BASE = {"ref": 0, "new": 0}


@pytest.mark.parametrize(
    "stamp",
    [
        dt.datetime(2024, 5, 17, 9, 30, 0, tzinfo=dt.UTC),  # no fraction: ".000000" added
        dt.datetime(2024, 5, 17, 9, 30, 0, 123456, tzinfo=dt.UTC),
    ],
)
def test_rows_events_and_counter_equal_the_orm_version(monkeypatch, stamp):
    _freeze(monkeypatch, stamp)
    # 1,200 new rows: three PostgreSQL batches of at most 500 in one chunk; then the same
    # keys again with new values (1,200 updates), then a mix with a few new keys.
    first = _records(1200)
    results = _import_both(monkeypatch, first)
    assert results["ref"] == results["new"]
    report, moved, _ = results["new"]
    assert (report.created, report.updated, report.written) == (1200, 0, True)
    assert moved == (3 if connection.vendor == "postgresql" else 1200)
    assert _snapshot("ref-p", "ref-u") == _snapshot("new-p", "new-u")

    _freeze(monkeypatch, stamp + dt.timedelta(minutes=5))
    second = _records(1200, suffix=" (v2)", tags=("ops", "Docs"))
    results = _import_both(monkeypatch, second)
    assert results["ref"] == results["new"]
    assert (results["new"][0].created, results["new"][0].updated) == (0, 1200)
    assert _snapshot("ref-p", "ref-u") == _snapshot("new-p", "new-u")

    mixed = _records(30, suffix=" (v3)") + [{"key": f"fresh {i}", "value": "x"} for i in range(9)]
    results = _import_both(monkeypatch, mixed, user_key=False)
    assert results["ref"] == results["new"]
    assert results["new"][0].total == len(mixed) and results["new"][0].updated > 20
    rows, events = _snapshot("new-p", "new-u")
    assert _snapshot("ref-p", "ref-u") == (rows, events)
    # Updated in place: created_at kept, updated_at moved; an import without a user key
    # keeps the subject of the user who wrote the row (erasure by subject needs it).
    (row,) = rows[("project", "key_1_ключ", True)]
    assert row["created_at"] != row["updated_at"] and row["subject"] == "<user>"
    assert [e[1] for e in events if e[0] == ("project", "key_1_ключ", True)] == [
        "create",
        "update",
        "update",
    ]


def test_many_chunks_and_the_auto_cap_equal_the_orm_version(monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 7)
    _freeze(monkeypatch, dt.datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC))
    records = _records(60) + _records(150, suffix=" auto", source="auto")[40:]
    records += [{"key": "Key 3 — ключ", "value": "later line wins", "source": "crystallized"}]
    results = _import_both(monkeypatch, records)
    assert results["ref"] == results["new"]
    report, _, progress = results["new"]
    assert progress[-1] == report.total and len(progress) > 20  # per chunk, as before
    rows, events = _snapshot("new-p", "new-u")
    assert _snapshot("ref-p", "ref-u") == (rows, events)
    assert sum(1 for key in rows if not key[2]) > 0  # the auto cap soft-deleted some
    assert any(e[1] == "soft_delete" for e in events)


def test_import_matches_the_upsert_path_column_by_column():
    records = _records(60) + [
        {"key": "Shell: use zsh", "value": "  prefers zsh; see ~/.zshrc and x.py  "},
        {"key": "ci", "value": "runs on push", "tags": ["workflow", "ci", "CI"], "type": ""},
        {"key": "auto note", "value": "summary of the session", "source": "auto"},
        {"key": "crystal", "value": "always lint", "source": "crystallized", "scope": "user"},
    ]
    up = MemoryManager(project="up-p", user="up-u")
    for record in records:
        up.upsert(
            record["key"],
            record["value"],
            record.get("tags") or (),
            record.get("scope"),
            record.get("type"),
            record.get("source") or "explicit",
        )
    report = MemoryManager(project="imp-p", user="imp-u").import_memories(_lines(records))
    assert (report.created, report.updated) == (len(records), 0)
    upserted, up_ids = _rows(("up-p", "up-u"))
    imported, imp_ids = _rows(("imp-p", "imp-u"))
    assert upserted.keys() == imported.keys()
    for key, [row] in imported.items():
        [expected] = upserted[key]
        assert row["created_at"] == row["updated_at"]
        assert row["subject"] == expected["subject"] == "<user>"
        for column in ("created_at", "updated_at"):
            row.pop(column), expected.pop(column)
        assert row == expected, key
    # One "create" event per row, with the import's detail.
    events = _events(("imp-p", "imp-u"), imp_ids)
    assert sorted(e[0] for e in events) == sorted(imp_ids.values())
    for (scope, _key, _live), kind, _stamp, detail, actor in events:
        assert (kind, actor) == ("create", "")
        source = json.loads(detail)["source"]
        assert detail == json.dumps({"scope": scope, "source": source, "via": "import"})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT source, COUNT(*) FROM memories WHERE namespace IN ('imp-p', 'imp-u') "
            "GROUP BY source ORDER BY source"
        )
        assert cursor.fetchall() == [("auto", 1), ("crystallized", 1), ("explicit", 62)]


def test_models_read_the_imported_rows():
    stamp_before = dt.datetime.now(dt.UTC)
    MemoryManager(project="p").import_memories(
        _lines([{"key": "k", "value": "v is /etc/app.conf", "tags": ["a", "Zed"]}])
    )
    memory = Memory.objects.get(namespace="p", key_normalized="k")
    assert memory.tags == ["a", "Zed"]
    assert memory.keywords == ["/etc/app.conf", "app", "conf", "etc", "zed"]
    assert memory.sensitivity == "normal" and memory.deleted_at is None
    assert memory.created_at == memory.updated_at >= stamp_before - dt.timedelta(seconds=1)
    assert list(MemoryEvent.objects.filter(memory_id=memory.id).values_list("event_type")) == [
        ("create",)
    ]


class UnfilteredGuard(MemoryGuard):
    """The default guard with the secret scan as defined (no prefilter)."""

    def detect_sensitive(self, content: str) -> None:
        if unfiltered_find_secret_family(validation.require_str(content, "Memory content")):
            raise SensitiveMemoryError()


def test_sensitive_rows_are_refused_as_before():
    records = [{"key": "fine", "value": "nothing secret here"}]
    for _family, text in SECRET_SAMPLES:
        records.append({"key": "k", "value": f"note: {text} (keep safe)"})
        records.append({"key": f"key {text}", "value": "harmless"})
        records.append({"key": "k2", "value": text.upper()})
        records.append({"key": "k3", "value": text.replace("s", "\u017f").replace("k", "\u212a")})
    reference = MemoryManager(project="p", guard=UnfilteredGuard())
    expected = reference.import_memories(_lines(records), dry_run=True).invalid
    mm = MemoryManager(project="p")
    report = mm.import_memories(_lines(records))
    assert report.invalid == expected
    assert sum(reason == SENSITIVE for _, reason in expected) > 2 * len(SECRET_SAMPLES)
    assert not report.written and not Memory.objects.exists() and not MemoryEvent.objects.exists()
    report = mm.import_memories(_lines(records), skip_invalid=True)
    assert report.written and report.invalid == expected
    assert not any(text in m.content for m in Memory.objects.all() for _, text in SECRET_SAMPLES)


def test_a_failed_write_rolls_back_every_chunk(monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 3)
    mm = MemoryManager(project="p")
    mm.upsert("k7", "existing")
    taken = mm.upsert("other", "its id is taken").pk
    before = (Memory.objects.count(), MemoryEvent.objects.count(), _counter())
    real = live.new_id
    ids = iter(range(100))

    def taken_on_the_third_chunk():
        return taken if next(ids) == 6 else real()

    monkeypatch.setattr(live, "new_id", taken_on_the_third_chunk)
    records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(12)]
    with pytest.raises(IntegrityError):  # an id already in use: the primary key
        mm.import_memories(_lines(records))
    assert (Memory.objects.count(), MemoryEvent.objects.count(), _counter()) == before
    assert Memory.objects.get(key_normalized="k7").content == "existing"


def test_an_import_that_loses_a_key_to_another_writer_updates_its_row(monkeypatch):
    """The lookup missed a live row (a concurrent insert): the insert gives way, the row
    is updated in place, and the events say so."""
    monkeypatch.setattr(bulk, "CHUNK", 3)
    mm = MemoryManager(project="p")
    kept = mm.upsert("k4", "existing")
    real = live._live
    calls = iter(range(100))

    def blind_once(call, rows, which, lock):
        found = real(call, rows, which, lock)
        if next(calls) == 1:  # the second chunk's first lookup
            return {key: v for key, v in found.items() if key[1] != "k4"}
        return found

    monkeypatch.setattr(live, "_live", blind_once)
    report = mm.import_memories(_lines([{"key": f"k{i}", "value": f"v{i}"} for i in range(6)]))
    assert (report.created, report.updated) == (5, 1)
    row = Memory.objects.get(key_normalized="k4")
    assert (row.pk, row.content, row.created_at) == (kept.pk, "v4", kept.created_at)
    events = MemoryEvent.objects.filter(memory_id=row.pk).order_by("id")
    assert [e.event_type for e in events] == ["create", "update"]


def test_nul_characters_are_an_invalid_record_on_both_vendors(monkeypatch):
    """Once PostgreSQL's DataError (and stored on SQLite); now the validation layer's refusal."""
    records = [{"key": "a", "value": "fine"}, {"key": "b", "value": "bad\x00byte"}]
    for writer in (_orm_write_chunk, _NEW_WRITE_CHUNK):
        monkeypatch.setattr(bulk, "_write_chunk", writer)
        report = MemoryManager(project="p").import_memories(_lines(records))
        assert report.invalid == [(2, "Memory content must not contain NUL characters")]
        assert not report.written
        assert not Memory.objects.exists()


def test_dump_list_equivalent():
    for values in [(), ("a",), ("Zed", "中文", 'q"uote', "back\\slash", "\n\t", "\u2028")]:
        assert bulk._dump_list(values) == dump_list(values) == dump_list(list(values))


def test_the_key_lookup_uses_the_unique_index():
    mm = MemoryManager(project="p")
    # PostgreSQL reads a partition of a few rows faster without the index: enough
    # rows that a scan would cost what the lookup must not.
    n = 50 if connection.vendor == "sqlite" else 3_000
    mm.import_memories(_lines([{"key": f"k{i}", "value": "v"} for i in range(n)]))
    with CaptureQueriesContext(connection) as queries:
        mm.import_memories(_lines([{"key": f"k{i}", "value": "w"} for i in range(60)]))
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    [lookup] = [sql for sql in selects if "key_normalized" in sql]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + lookup)
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert "uix_memories_scope_key (namespace=? AND scope=? AND key_normalized=?)" in plan
        else:
            cursor.execute("EXPLAIN " + lookup)
            plan = " ".join(row[0] for row in cursor.fetchall())
            assert "uix_memories_scope_key" in plan and "key_normalized" in plan
