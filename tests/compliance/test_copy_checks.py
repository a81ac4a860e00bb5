"""The per-server checks of an erasure without a standby: the scan through SQL (chunks,
a fragment across a chunk boundary, the two grants), a verifier's scan that finds a
planted fragment, and the primary's copy on the receipt on both vendors."""

from __future__ import annotations

import os

import pytest
from django.db import connection, connections

from memoryapp import MemoryManager
from memoryapp.compliance import copy_scan, erase
from memoryapp.db.purge import sql_scan
from memoryapp.db.purge.vendors import for_connection
from memoryapp.models import CopyCheck
from memoryapp.rules.outcomes import Outcome
from tests._erasure_support import marker
from tests._replica_support import register_alias, unregister_alias

TABLE = "copies_probe_file"


@pytest.fixture(autouse=True)
def _patient_purge(settings):
    """Other test runs on the shared cluster hold transactions open for a while; the purge
    waits for them (PostgreSQL's VACUUM FULL keeps what an older snapshot can see)."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 180


@pytest.fixture
def marked_table(transactional_db):
    """A table of ours whose file on disk holds a marker (written out by a checkpoint)."""
    secret = marker("chunk")
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {TABLE} (id int, body text)")
        cursor.execute(
            f"INSERT INTO {TABLE} SELECT g, %s FROM generate_series(1, 400) g",
            ["filler text that is not the marker " * 3],
        )
        cursor.execute(f"INSERT INTO {TABLE} VALUES (0, %s)", [f"row with {secret} inside"])
        cursor.execute("CHECKPOINT")
    yield secret.encode()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def _file_bytes(table: str) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_read_binary_file(pg_relation_filepath(%s))", [table])
        return bytes(cursor.fetchone()[0])


@pytest.mark.postgres_only
def test_a_fragment_split_across_two_chunks_is_found(marked_table):
    at = _file_bytes(TABLE).find(marked_table)
    assert at > 0
    chunk = at + len(marked_table) // 2  # the first chunk ends inside the fragment
    assert at < chunk < at + len(marked_table)
    decoy = b"a fragment held by no file at all"
    with connection.cursor() as cursor:
        found = sql_scan.scan(cursor, [TABLE], [decoy, marked_table], chunk=chunk)
    assert found.complete and found.found == {1}, found
    assert found.bytes >= len(_file_bytes(TABLE)) and found.files >= 1
    # The same scan without the overlap would have missed it: neither chunk holds it whole.
    data = _file_bytes(TABLE)
    assert marked_table not in data[:chunk] and marked_table not in data[chunk : 2 * chunk]


@pytest.mark.postgres_only
def test_a_role_with_the_two_grants_reads_through_sql_and_one_without_is_told_why(
    marked_table, settings
):
    """And the system check says which servers can be verified, how, or why not."""
    settings.MEMORYAPP_REPLICA_DATABASES = []
    role = f"copies_probe_{os.getpid()}"
    alias = "copies_as_role"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
        cursor.execute(f"GRANT SELECT ON {TABLE} TO {role}")
    register_alias(alias, int(connection.settings_dict["PORT"] or 5432))
    connections[alias].settings_dict.update(USER=role, PASSWORD="")
    try:
        as_role = connections[alias]
        vendor = for_connection(as_role)
        refused = vendor.read_through_sql(as_role, [TABLE], [marked_table])
        assert not refused.complete and not refused.found
        assert "membership in pg_read_server_files" in refused.note
        assert "EXECUTE on pg_read_binary_file(text, bigint, bigint)" in refused.note
        assert copy_scan.how_verified(alias)[0] == ""
        [(check_id, text)] = _copies_check(alias)
        assert check_id == "memoryapp.W011" and "lacks membership in pg_read_server_files" in text
        settings.MEMORYAPP_COPY_VERIFIERS = [alias]
        assert _copies_check(alias)[0][0] == "memoryapp.I011"
        settings.MEMORYAPP_COPY_VERIFIERS = []

        with connection.cursor() as cursor:
            cursor.execute(f"GRANT pg_read_server_files TO {role}")
            cursor.execute(
                f"GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint) TO {role}"
            )
        as_role.close()
        read = vendor.read_through_sql(as_role, [TABLE], [marked_table])
        assert read.complete and read.found == {0}, read
        assert copy_scan.how_verified(alias) == ("sql", "")
        [(check_id, text)] = _copies_check(alias)
        assert check_id == "memoryapp.I011" and text.endswith(f"on '{alias}': through SQL.")
    finally:
        unregister_alias(alias)
        with connection.cursor() as cursor:
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE IF EXISTS {role}")


def _copies_check(alias: str) -> list[tuple[str, str]]:
    """memoryapp.I011/W011 about ``alias`` (listed as a replica for the check)."""
    from django.conf import settings as live

    from memoryapp.ops.checks import check_copies

    live.MEMORYAPP_REPLICA_DATABASES = [alias]
    try:
        return [(m.id, m.msg) for m in check_copies(databases=["default"]) if alias in m.msg]
    finally:
        live.MEMORYAPP_REPLICA_DATABASES = []


@pytest.mark.postgres_only
def test_a_verifier_scan_that_finds_an_erased_fragment_in_a_file_is_not_verified(
    marked_table, tmp_path
):
    """The honest way to plant residue in "a replica's" files: a data directory whose
    relation file holds the fragment. The verifier's scan reads files under the directory
    it is given, so it must report the copy not verified — and clean once it is gone."""
    with connection.cursor() as cursor:
        paths = sql_scan.files_under(cursor, str(tmp_path), [TABLE])
    for path in paths:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(b"\0" * 9000 + b"left behind: " + marked_table + b"\0" * 100)
    result = copy_scan.check(
        "default",
        primary="default",
        erased_ids={},
        tables=[TABLE],
        pieces=[marked_table],
        lsn="",
        wait=0,
        data_directory=str(tmp_path),
    )
    assert result.outcome == Outcome.NOT_VERIFIED and result.method == "verifier"
    assert result.reason == "1 fragment(s) of erased values found in its files"
    for path in paths:
        with open(path, "wb") as handle:
            handle.write(b"\0" * 9000)
    clean = copy_scan.check(
        "default",
        primary="default",
        erased_ids={},
        tables=[TABLE],
        pieces=[marked_table],
        lsn="",
        wait=0,
        data_directory=str(tmp_path),
    )
    assert clean.outcome == Outcome.VERIFIED_BY_SCAN and clean.facts["found"] == 0


@pytest.mark.django_db(transaction=True)
def test_without_replicas_the_receipt_names_the_primary_copy(client, admin_client):
    secret = marker("onecopy")
    MemoryManager(project="copies/one").save_memory("fact", f"erased {secret} " + "words " * 30)
    receipt = erase(namespace="copies/one")
    copies = receipt.details["copies"]
    assert [(c["server"], c["role"], c["outcome"]) for c in copies] == [
        ("primary", "primary", Outcome.VERIFIED_BY_SCAN)
    ]
    row = CopyCheck.objects.get(receipt=receipt)
    assert row.sealed is None and row.checked_at is not None
    page = admin_client.get(f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/")
    assert "primary: verified by byte scan" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_primary_whose_files_cannot_be_read_is_unscanned_or_waits_for_its_verifier(
    monkeypatch, settings
):
    """No read here (SQLite: no other way; PostgreSQL: the SQL read refused too): the
    primary's copy is rewritten, not scanned — or, when a verifier is declared for it,
    not checked until that verifier reports."""
    from memoryapp.db.purge.common import ScanFiles, VendorPurge

    vendor_class = type(for_connection(connection))
    away = ScanFiles([], "database server 'db.internal' is not on this machine")
    monkeypatch.setattr(vendor_class, "scan_files", lambda self, c, t: away)
    monkeypatch.setattr(vendor_class, "read_through_sql", VendorPurge.read_through_sql)
    MemoryManager(project="copies/away").save_memory("fact", "erased " + marker("away") * 2)
    receipt = erase(namespace="copies/away")
    [copy] = receipt.details["copies"]
    assert copy["outcome"] == Outcome.UNSCANNED
    assert copy["reason"] == "the database runs on another machine"

    settings.MEMORYAPP_COPY_VERIFIERS = ["default"]
    MemoryManager(project="copies/away").save_memory("fact", "erased " + marker("away") * 2)
    waiting = erase(namespace="copies/away")
    [copy] = waiting.details["copies"]
    assert copy["outcome"] == Outcome.NOT_CHECKED and waiting.details["outcome"] == "not_checked"
    assert CopyCheck.objects.get(receipt=waiting).sealed
