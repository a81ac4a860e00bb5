"""A store that cannot be read never breaks a turn (docs/behaviour.md §11)."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from memoryapp import MemoryManager

pytestmark = pytest.mark.django_db


def _corrupt_sqlite_file(path) -> None:
    """A file with a valid SQLite header whose pages are garbage: opens, then queries fail."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE memories (id TEXT)")
    conn.executemany("INSERT INTO memories VALUES (?)", [(str(i) * 50,) for i in range(500)])
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    # keep the 100-byte header, scribble over everything after it
    for i in range(100, len(data)):
        data[i] = (i * 7 + 13) % 256
    path.write_bytes(bytes(data))


@pytest.fixture
def corrupt_alias(tmp_path, extra_alias):
    path = tmp_path / "corrupt.sqlite3"
    _corrupt_sqlite_file(path)
    return extra_alias(path)


def test_turn_path_reads_are_empty_and_reported_once(corrupt_alias, caplog):
    caplog.set_level(logging.WARNING, logger="memoryapp")
    mm = MemoryManager(project="p", user="u", using=corrupt_alias)
    assert mm.get_all_entries() == []
    assert mm.get_cross_session_tail() == ""
    assert mm.get_all_entries("user") == []
    problems = mm.take_store_problems()
    assert len(problems) == 2  # project store and user store
    assert all("could not be read" in p for p in problems)
    assert mm.take_store_problems() == []
    # one warning per store, however many reads failed
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_writes_fail_clearly(corrupt_alias):
    mm = MemoryManager(project="p", using=corrupt_alias)
    result = mm.save_memory("k", "v")
    assert result.startswith("Error saving memory: ")
    assert "malformed" in result or "not a database" in result
    from django.db import DatabaseError

    with pytest.raises(DatabaseError):
        mm.upsert("k", "v")


def test_a_healthy_store_beside_a_broken_one(corrupt_alias):
    healthy = MemoryManager(project="p")
    healthy.upsert("k", "v")
    broken = MemoryManager(project="p", using=corrupt_alias)
    assert broken.get_all_entries() == []
    assert [m.key_normalized for m in healthy.get_all_entries()] == ["k"]
    assert healthy.take_store_problems() == []
