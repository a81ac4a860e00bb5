"""Rows read as index records (memoryapp.recall.rows): foreign timestamp forms, JSON columns."""

from __future__ import annotations

import datetime as dt

import pytest

from memoryapp import MemoryManager
from memoryapp.recall.rows import _json_tuple, column_timestamp, live_records

UTC_NOON = dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(
    "value",
    [
        "2026-01-02T12:00:00.000000",  # ours
        "2026-01-02T12:00:00",
        "2026-01-02 12:00:00",  # Django's own SQLite form
        "2026-01-02T12:00:00+00:00",
        "2026-01-02T13:00:00+01:00",
        "2026-01-02T12:00:00Z",
        dt.datetime(2026, 1, 2, 12, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 2, 12, 0),  # naive: UTC
    ],
)
def test_timestamps_of_every_writer_read_the_same(value):
    assert column_timestamp(value) == UTC_NOON


def test_unreadable_timestamps_read_as_epoch():
    assert column_timestamp("yesterday") == 0.0 and column_timestamp(None) == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('["a", "b"]', ("a", "b")),
        ("[]", ()),
        (None, ()),
        ("not json", ()),
        ('{"a": 1}', ()),
        ("[1, 2]", ("1", "2")),  # the model's lenient reading of a foreign writer's list
    ],
)
def test_json_columns_read_as_the_model_reads_them(text, expected):
    assert _json_tuple(text) == expected


@pytest.mark.django_db
def test_live_records_stream_the_live_rows_of_one_slice(raw_sql):
    mm = MemoryManager(project="acme/web", user="acme/alice")
    keep = mm.upsert("deploy notes", "ship on fridays", ["ops"])
    gone = mm.upsert("old notes", "obsolete")
    mm.delete(gone.id)
    mm.upsert("user_pref colour", "blue")  # the user slice, another namespace
    MemoryManager(project="globex").upsert("deploy notes", "elsewhere")
    records = list(live_records("default", "acme/web", "project"))
    assert [r.id for r in records] == [keep.id]
    (record,) = records
    assert (record.title, record.content, record.tags) == (
        "deploy notes",
        "ship on fridays",
        ("ops",),
    )
    assert record.keywords == tuple(keep.keywords) and record.explicit
    assert record.updated_at == keep.updated_at.timestamp()
    assert list(live_records("default", "acme/web", "project", ids=[gone.id])) == []
    assert [r.id for r in live_records("default", "acme/web", "project", ids=[keep.id])] == [
        keep.id
    ]
    assert list(live_records("default", "acme/web", "project", ids=[])) == []
