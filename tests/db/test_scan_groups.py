"""The byte scan with a heartbeat reads its files in groups and finds what it finds without."""

from __future__ import annotations

import pytest

from memoryapp.db.purge import scan


def _files(tmp_path) -> list[str]:
    paths = []
    for n, body in enumerate(
        [b"x" * 300 + b"SECRET-ONE" + b"y" * 300, b"z" * 700, b"SECRET-TWO" * 3]
    ):
        path = tmp_path / f"f{n}"
        path.write_bytes(body)
        paths.append(str(path))
    return paths


def test_groups_cut_at_the_limit_and_keep_a_larger_file_alone(tmp_path):
    paths = _files(tmp_path)  # 610, 700 and 30 bytes
    assert scan.groups(paths, 650) == [[paths[0]], [paths[1]], [paths[2]]]
    assert scan.groups(paths, 2000) == [paths]
    assert scan.groups(paths, 1000) == [[paths[0]], [paths[1], paths[2]]]
    assert scan.groups([], 10) == []


def test_a_scan_with_a_heartbeat_finds_the_same_and_beats_once_a_group(tmp_path, monkeypatch):
    paths = _files(tmp_path)
    pieces = [b"SECRET-ONE", b"SECRET-TWO", b"NOT-THERE-AT-ALL"]
    read_plain: dict[str, int] = {}
    plain = scan.scan(paths, pieces, read=read_plain)
    monkeypatch.setattr(scan, "GROUP_BYTES", 650)
    beats: list[int] = []
    read_beating: dict[str, int] = {}
    beating = scan.scan(paths, pieces, read=read_beating, heartbeat=lambda: beats.append(1))
    assert plain == beating == ({0, 1}, 1340)
    assert read_plain == read_beating
    assert len(beats) == 3


def test_a_heartbeat_that_raises_stops_the_scan(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "GROUP_BYTES", 650)

    def lost():
        raise RuntimeError("claim lost")

    with pytest.raises(RuntimeError):
        scan.scan(_files(tmp_path), [b"SECRET-ONE"], heartbeat=lost)


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_scan_through_sql_beats_before_each_chunk_it_reads():
    from django.db import connection

    from memoryapp.db.purge.vendors import for_connection

    beats: list[int] = []
    through = for_connection(connection).read_through_sql(
        connection, [], [b"NOT-THERE-AT-ALL"], heartbeat=lambda: beats.append(1)
    )
    assert through.complete and through.files >= 1  # pg_statistic, at least
    assert len(beats) >= through.files
