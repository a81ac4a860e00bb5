"""Every path that writes a live memory shares one write: the same rule for a key that
has a live row, the same events, the same subject rule; and the code holds one
insert-or-update of memories per vendor, in memoryapp/db/upsert.py."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection

from memoryapp.conf import get_guard
from memoryapp.fields import now
from memoryapp.interop import writes as interop_writes
from memoryapp.models import Memory, MemoryEvent, ReviewItem
from memoryapp.services import memories
from memoryapp.writes import bulk, live, review_queue, store

ROOT = Path(__file__).resolve().parents[2] / "memoryapp"


def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for path in ROOT.rglob("*.py")
        if "migrations" not in path.parts
    }


def test_one_insert_or_update_of_memories_per_vendor_in_the_code():
    inserts = re.compile(r"(INSERT\s+INTO|COPY)\s+memories\b", re.IGNORECASE)
    # An update of a memory's values (a soft delete or restore sets deleted_at only).
    content_updates = re.compile(
        r"UPDATE\s+memories\b(?:\s+AS\s+\w+)?\s+SET\b(?!\s*deleted_at)", re.IGNORECASE
    )
    found = {
        name: (len(inserts.findall(text)), len(content_updates.findall(text)))
        for name, text in _sources().items()
        if inserts.search(text) or content_updates.search(text)
    }
    assert found == {"db/upsert.py": (2, 2)}  # SQLite's and PostgreSQL's, of each
    from memoryapp.db import upsert

    assert "sqlite" not in upsert._PG_INSERT.lower()
    assert upsert._SQLITE_INSERT.count("INSERT") == upsert._PG_INSERT.count("INSERT") == 1
    # PostgreSQL's one insert takes its rows from arrays (a few) or a COPY-filled temporary
    # table (many): two sources of the same columns, one statement and one conflict rule.
    for source in (upsert._PG_ARRAYS, upsert._PG_STAGED):
        statement = upsert._PG_INSERT.format(rows=source)
        assert statement.count("INSERT") == 1 and "ON CONFLICT DO NOTHING RETURNING id" in statement


def _record(key, content, **fields):
    values = dict(
        id="", scope="project", type="note", key_normalized=key, title=key, content=content,
        tags=[], keywords=[], source="explicit", confidence="explicit_user",
        sensitivity="normal",
    )  # fmt: skip
    return SimpleNamespace(**{**values, **fields})


def _by_store(key, content, subject):
    prepared = store.prepare(get_guard(), key, content, scope="project")
    memories.write(prepared=prepared, using="default", namespace="acme/web", subject=subject)


def _by_import(key, content, subject):
    report = bulk.import_records(
        [(1, {"key": key, "value": content, "scope": "project"})],
        guard=get_guard(),
        resolve=lambda p: (p, bulk.ImportTarget("default", "acme/web")),
        subject=subject,
    )
    assert report.written


def _by_agentao_store(key, content, subject):
    interop_writes.upsert_memory(
        record=_record(key, content),
        created_at=now(),
        stamp=now(),
        using="default",
        namespace="acme/web",
        subject=subject,
    )


WRITERS = [_by_store, _by_import, _by_agentao_store]


@pytest.mark.django_db
@pytest.mark.parametrize("first", WRITERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("then", WRITERS, ids=lambda f: f.__name__)
def test_every_writer_updates_in_place_and_keeps_the_row_s_subject(first, then):
    first("tz", "Paris", "acme/alice")
    row = Memory.objects.get(namespace="acme/web", key_normalized="tz")
    then("tz", "Berlin", None)  # no user key: the author's provenance stays
    again = Memory.objects.get(namespace="acme/web", key_normalized="tz")
    assert (again.pk, again.created_at, again.subject) == (row.pk, row.created_at, "acme/alice")
    assert again.content == "Berlin" and again.updated_at >= row.updated_at
    then("tz", "Rome", "acme/bob")  # a writer with a subject takes the row
    last = Memory.objects.get(namespace="acme/web", key_normalized="tz")
    assert (last.pk, last.subject, last.content) == (row.pk, "acme/bob", "Rome")
    kinds = MemoryEvent.objects.filter(memory_id=row.pk).order_by("id")
    assert [e.event_type for e in kinds] == ["create", "update", "update"]
    assert all(e.namespace == "acme/web" for e in kinds)
    # Another tenant's row of the same key is never touched.
    assert not Memory.objects.exclude(namespace="acme/web").exists()


@pytest.mark.django_db
def test_a_taken_id_raises_id_taken_and_the_agentao_store_draws_a_fresh_one():
    _by_store("a", "first", None)
    taken = Memory.objects.get(key_normalized="a").pk
    row = live.Row("project", "b", "note", "b", "x", "[]", "[]", "explicit", "explicit_user",
                   None, id=taken)  # fmt: skip
    with pytest.raises(live.IdTaken), connection.cursor() as cursor:
        live.upsert_rows(
            cursor, using="default", namespace="acme/web", rows=[row], subject=None,
            actor="", stamp=now(),
        )  # fmt: skip
    written = interop_writes.upsert_memory(
        record=_record("b", "x", id=taken),
        created_at=now(),
        stamp=now(),
        using="default",
        namespace="acme/web",
    )
    assert written.pk != taken
    assert Memory.objects.get(pk=written.pk).key_normalized == "b"


@pytest.mark.django_db
@pytest.mark.parametrize("staged", [False, True], ids=["arrays", "copied"])
def test_both_sources_of_the_insert_write_alike_and_report_the_rows_that_lost(monkeypatch, staged):
    """Many new rows, two of which lose their key to rows already there (as to a concurrent
    writer): they are updated instead, on either source of PostgreSQL's insert (SQLite has
    one); the counter moves once per statement batch on PostgreSQL, once per row on SQLite."""
    from memoryapp.db import upsert

    monkeypatch.setattr(upsert, "PG_STAGE_MIN", 1 if staged else 10**6)
    _by_store("key_3", "already here", "acme/alice")
    _by_store("key_90", "already here too", None)
    kept = {m.key_normalized: m.pk for m in Memory.objects.all()}
    rows = [
        live.Row("project", f"key_{i}", "note", f"key {i}", f"value {i}", '["t"]', "[]",
                 "explicit", "explicit_user", '{"via": "test"}')
        for i in range(120)
    ]  # fmt: skip
    lost_keys = {"key_3", "key_90"}

    # The lookup finds no live row for the two (a concurrent insert landing after it).
    real_live = live._live

    def blind_first(call, all_rows, which, lock):
        found = real_live(call, all_rows, which, lock)
        return found if lock else {k: v for k, v in found.items() if k[1] not in lost_keys}

    monkeypatch.setattr(live, "_live", blind_first)
    with connection.cursor() as cursor:
        written = live.upsert_rows(
            cursor, using="default", namespace="acme/web", rows=rows, subject=None,
            actor="t", stamp=now(),
        )  # fmt: skip
    assert [w.created for w in written].count(False) == 2
    by_key = dict(zip((r.key_normalized for r in rows), written, strict=True))
    assert by_key["key_3"].id == kept["key_3"] and by_key["key_3"].subject == "acme/alice"
    assert Memory.objects.filter(namespace="acme/web").count() == 120
    assert Memory.objects.get(pk=kept["key_90"]).content == "value 90"
    assert Memory.objects.get(key_normalized="key_119").tags == ["t"]
    events = MemoryEvent.objects.filter(namespace="acme/web", actor="t")
    assert events.filter(event_type="create").count() == 118
    assert events.filter(event_type="update").count() == 2


def _item(subject, occurrences=1, **fields):
    values = dict(
        namespace="acme/web", subject=subject, scope="project", type="constraint",
        key_normalized="constraint_never_deploy", title="Constraint: never deploy",
        content="never deploy", occurrences=occurrences, confidence="auto_summary",
    )  # fmt: skip
    return ReviewItem(**{**values, **fields})


def _insert(item, match):
    item.save(using="default", force_insert=True)


@pytest.mark.django_db
@pytest.mark.parametrize("saturating", [False, True])
def test_one_fold_for_the_queue_and_agentao_s_store(saturating):
    first = review_queue.fold(_item("acme/alice"), using="default", insert=_insert)
    folded = review_queue.fold(
        _item("acme/alice", occurrences=0, content="never deploy on Fridays"),
        using="default",
        insert=_insert,
        saturating=saturating,
    )
    assert folded.pk == first.pk and folded.subject == "acme/alice"
    assert folded.content == "never deploy on Fridays"
    # Agentao's store counts at least one occurrence per fold; the queue adds what it saw.
    assert folded.occurrences == (2 if saturating else 1)
    assert folded.confidence == ("inferred" if saturating else "auto_summary")
    # Another subject's (or no subject's) proposal of the key is an item of its own.
    anonymous = review_queue.fold(_item(None), using="default", insert=_insert)
    assert anonymous.pk != first.pk and anonymous.subject is None
    ReviewItem.objects.filter(pk=first.pk).update(occurrences=review_queue.MAX_OCCURRENCES - 1)
    big = _item("acme/alice", occurrences=5)
    if saturating:
        top = review_queue.fold(big, using="default", insert=_insert, saturating=True)
        assert top.occurrences == review_queue.MAX_OCCURRENCES and top.subject == "acme/alice"
    bob = review_queue.fold(_item("acme/bob"), using="default", insert=_insert)
    assert bob.pk not in (first.pk, anonymous.pk) and bob.occurrences == 1
    other = review_queue.fold(_item("x", namespace="globex/app"), using="default", insert=_insert)
    assert other.pk != first.pk and other.occurrences == 1
