"""Every copy of the data: an erasure verified on the primary and on a real streaming standby.

The standby is a second cluster made by ``scripts/pg_standby.sh`` (``tests/_replica_support``).
The replica alias connects as a role the test creates: with the two grants it reads the
standby's files through SQL; without them only ``memory verifier`` beside the standby can,
and until it reports the copy is *not checked*, then late. A verifier killed during its scan
leaves the copy not checked and claimed; the next one completes it once the claim expired.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client

from memoryapp import MemoryManager
from memoryapp.compliance import copies
from memoryapp.db.purge import pg_files
from memoryapp.db.purge.common import ScanFiles
from memoryapp.models import CopyCheck, ErasureReceipt
from memoryapp.rules.outcomes import Outcome
from tests._erasure_support import marker
from tests._processes import database_url
from tests._replica_support import REPLICA_ALIAS

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
GONE, KEPT = "copies/gone", "copies/kept"
TOKEN = "copies-metrics-token"
REMOTE = ScanFiles([], "database server 'db.internal' is not on this machine")


def _seed() -> list[str]:
    secrets = [marker(f"copy{i}") for i in range(3)]
    mm = MemoryManager(project=GONE)
    for i, s in enumerate(secrets):
        mm.save_memory(f"fact {i}", f"the erased fact {s} " + "padding words " * 40)
    MemoryManager(project=KEPT).save_memory("kept fact", "another tenant's fact, kept")
    return secrets


@pytest.fixture(autouse=True)
def _patient_purge(settings):
    """Other test runs on the shared cluster hold transactions open for a while; the purge
    waits for them (PostgreSQL's VACUUM FULL keeps what an older snapshot can see)."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 180


@pytest.fixture
def scan_role(replica_db):
    """A login role that is not a superuser and may read the test database's tables; the
    test grants it the two file-reading privileges (or not). Made on the primary, it
    reaches the standby by replication."""
    role = f"copies_scan_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
        cursor.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    yield role
    with connection.cursor() as cursor:
        cursor.execute(f"DROP OWNED BY {role}")
        cursor.execute(f"DROP ROLE IF EXISTS {role}")


def _grant(role: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"GRANT pg_read_server_files TO {role}")
        cursor.execute(
            f"GRANT EXECUTE ON FUNCTION pg_read_binary_file(text, bigint, bigint) TO {role}"
        )


def _replica_as(role: str, replica_db) -> None:
    """The replica alias connects as ``role`` (the standby has replayed its grants)."""
    replica_db.wait()
    handler = connections[REPLICA_ALIAS]
    handler.close()
    handler.settings_dict["USER"] = role
    handler.settings_dict["PASSWORD"] = ""


def _outcomes(receipt: ErasureReceipt) -> list[tuple[str, str, str]]:
    return [(c["server"], c["role"], c["outcome"]) for c in receipt.details["copies"]]


def copy_lines(printed: str) -> list[str]:
    """The lines ``memory erase`` printed about the copies, whole."""
    return [line for line in printed.splitlines() if line.startswith("  copy:")]


def _erase_printing() -> tuple[ErasureReceipt, str]:
    out = io.StringIO()
    try:
        call_command("memory", "erase", "--namespace", GONE, "--yes", stdout=out)
    except CommandError as exc:  # the receipt printed above says why
        raise AssertionError(f"{exc}\n{out.getvalue()}") from exc
    return ErasureReceipt.objects.get(target_kind="namespace"), out.getvalue()


# ------------------------------------------------------------ through SQL, both servers
def test_a_namespace_erasure_is_verified_on_both_servers_through_sql(
    replica_db, scan_role, monkeypatch, settings
):
    secrets = _seed()
    _grant(scan_role)
    _replica_as(scan_role, replica_db)
    # A loaded machine's standby took more than the default 10 s to replay the purge
    # (then the copy is honestly "not checked", as the replay-paused test below shows).
    settings.MEMORYAPP_REPLICA_REPLAY_WAIT = 180
    # The primary as if on another machine: its files too are read through SQL.
    monkeypatch.setattr(pg_files, "scan_files", lambda connection, tables: REMOTE)

    receipt, printed = _erase_printing()

    assert _outcomes(receipt) == [
        ("primary", "primary", Outcome.VERIFIED_BY_SCAN),
        (REPLICA_ALIAS, "replica", Outcome.VERIFIED_BY_SCAN),
    ], receipt.details["copies"]
    assert receipt.details["outcome"] == Outcome.VERIFIED_BY_SCAN
    checks = {c.server: c for c in CopyCheck.objects.filter(receipt=receipt)}
    assert checks["default"].method == "sql" and checks[REPLICA_ALIAS].method == "sql"
    # One cluster, two servers: the same system identifier, told apart by their role.
    assert checks["default"].system_identifier == checks[REPLICA_ALIAS].system_identifier != ""
    assert checks[REPLICA_ALIAS].facts["bytes"] > 0 and checks[REPLICA_ALIAS].sealed is None
    # One line per copy, exactly these (memory erase with a standby).
    assert copy_lines(printed) == [
        "  copy: primary: verified by byte scan",
        f"  copy: replica {REPLICA_ALIAS}: verified by byte scan",
    ], printed
    assert "byte scan through SQL: " in receipt.verification
    # The standby's copy of the rows is gone too, and so are the fragments' only copies.
    rows = replica_db.sql("SELECT count(*) FROM memories WHERE namespace = %s", [GONE])
    assert rows == [(0,)]
    assert not any(s in str(receipt.details) for s in secrets)


# ------------------------------------------------------------ grant refused, a verifier
def _verifier_env(role: str, replica_db, **extra) -> dict:
    from django.conf import settings as django_settings

    s = connections["default"].settings_dict
    replica = f"postgres://{quote(role)}@127.0.0.1:{replica_db.standby.port}/{quote(s['NAME'])}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DATABASE_REPLICA_URLS": replica,
        "MEMORYAPP_COPY_VERIFIERS": REPLICA_ALIAS,
        "PYTHONPATH": str(REPO),
        "SECRET_KEY": django_settings.SECRET_KEY,  # the sealed fragments are keyed from it
        **extra,
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def _data_directory(replica_db) -> str:
    return replica_db.standby.sql("SHOW data_directory")[0][0]


def _refused_and_waiting(replica_db, scan_role, settings) -> ErasureReceipt:
    """An erasure whose replica the worker cannot read (no grants): not checked."""
    _seed()
    settings.MEMORYAPP_COPY_VERIFIERS = [REPLICA_ALIAS]
    _replica_as(scan_role, replica_db)
    receipt, printed = _erase_printing()
    assert _outcomes(receipt)[1] == (REPLICA_ALIAS, "replica", Outcome.NOT_CHECKED)
    assert copy_lines(printed) == [
        "  copy: primary: verified by byte scan",
        f"  copy: replica {REPLICA_ALIAS}: not checked (no verifier reported)",
    ], printed
    assert receipt.details["outcome"] == Outcome.NOT_CHECKED
    waiting = CopyCheck.objects.get(receipt=receipt, server=REPLICA_ALIAS)
    assert waiting.sealed  # the fragments, sealed under the erasure key, for its verifier
    return receipt


def test_with_the_grant_refused_a_verifier_beside_the_standby_verifies_it(
    replica_db, scan_role, settings, tmp_path
):
    receipt = _refused_and_waiting(replica_db, scan_role, settings)
    done = subprocess.run(
        [sys.executable, "manage.py", "memory", "verifier", "--server", REPLICA_ALIAS,
         "--data-directory", _data_directory(replica_db), "--once"],
        cwd=REPO, env=_verifier_env(scan_role, replica_db), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{REPLICA_ALIAS}: 1 copy checked" in done.stdout
    check = CopyCheck.objects.get(receipt=receipt, server=REPLICA_ALIAS)
    assert (check.outcome, check.method, check.sealed) == (
        Outcome.VERIFIED_BY_SCAN,
        "verifier",
        None,
    )
    assert check.facts["files"] > 0 and check.facts["found"] == 0
    receipt.refresh_from_db()
    assert receipt.details["outcome"] == Outcome.VERIFIED_BY_SCAN
    assert _outcomes(receipt)[1] == (REPLICA_ALIAS, "replica", Outcome.VERIFIED_BY_SCAN)


_VERIFIER_THAT_HANGS = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from django.core.management import CommandError, call_command
from memoryapp.compliance import copy_scan
real = copy_scan._files
def hang(*a, **k):
    result = real(*a, **k)        # the files read, nothing written yet
    print("scanned", flush=True)
    time.sleep(600)               # killed here, before the result is written
    return result
copy_scan._files = hang
call_command("memory", "verifier", "--server", sys.argv[1], "--data-directory", sys.argv[2],
             "--once")
"""


def test_a_verifier_killed_mid_way_leaves_the_copy_not_checked_and_a_restart_completes(
    replica_db, scan_role, settings, tmp_path
):
    receipt = _refused_and_waiting(replica_db, scan_role, settings)
    env = _verifier_env(scan_role, replica_db)
    data = _data_directory(replica_db)
    log = tmp_path / "verifier.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", _VERIFIER_THAT_HANGS, REPLICA_ALIAS, data],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        said = ""
        while "scanned" not in said and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 0.5)[0]:
                said = proc.stdout.readline()
        assert "scanned" in said, log.read_text()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    check = CopyCheck.objects.get(receipt=receipt, server=REPLICA_ALIAS)
    assert check.outcome == Outcome.NOT_CHECKED and check.sealed, check.reason
    assert check.claimed_by and check.claimed_until  # the killed verifier's claim
    tried = check.attempts  # the erasure's own try (it could not read the standby)

    def verifier() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", "memory", "verifier", "--server", REPLICA_ALIAS,
             "--data-directory", data, "--once"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    # While the claim holds (MEMORYAPP_COPY_CLAIM_SECONDS, 10 minutes), another verifier
    # leaves the row alone: no two scans of one server for one erasure at once.
    early = verifier()
    assert early.returncode == 0, early.stderr
    check.refresh_from_db()
    assert check.outcome == Outcome.NOT_CHECKED and check.attempts == tried
    # The claim expires (its time moved to the past rather than waited for): the next
    # verifier takes the row over and completes it.
    expired = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    CopyCheck.objects.filter(pk=check.pk).update(claimed_until=expired)
    again = verifier()
    assert again.returncode == 0, again.stderr
    check.refresh_from_db()
    assert check.outcome == Outcome.VERIFIED_BY_SCAN and check.method == "verifier"
    assert check.claimed_by == "" and check.attempts == tried + 1


def test_a_refused_grant_without_a_verifier_is_not_checked_then_late_everywhere(
    replica_db, scan_role, settings, client: Client, admin_client
):
    receipt = _refused_and_waiting(replica_db, scan_role, settings)
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    settings.MEMORYAPP_COPY_REPORT_AFTER = 60
    assert copies.late_by_server() == {}  # not late yet: asked a moment ago
    # The worker's round cannot read it either: it stays not checked, waiting.
    assert copies.check_pending() == 0
    CopyCheck.objects.filter(receipt=receipt).update(
        requested_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
    )
    assert copies.late_by_server() == {REPLICA_ALIAS: 1}

    health = client.get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    assert health["status"] == "degraded"
    assert health["erasures"]["copies_late"] == {REPLICA_ALIAS: 1}
    assert "erasures" not in client.get("/healthz").json()  # not for anyone at the port
    metrics = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert f'memoryapp_erasure_copies_late{{server="{REPLICA_ALIAS}"}} 1.0' in metrics
    page = admin_client.get("/admin/").content.decode()
    assert "Copies of the data not checked in time" in page
    assert f"replica {REPLICA_ALIAS}: no check reported for 1 erasure" in page


def test_a_replica_that_has_not_replayed_is_checked_by_a_later_worker_round(
    replica_db, scan_role, settings
):
    """Replay paused: the bounded wait ends with the copy not checked; once the standby
    replays, the worker's round verifies it (through SQL, with the grants)."""
    _seed()
    _grant(scan_role)
    _replica_as(scan_role, replica_db)
    settings.MEMORYAPP_REPLICA_REPLAY_WAIT = 0.5
    replica_db.standby.pause_replay()
    try:
        receipt, _ = _erase_printing()
        check = CopyCheck.objects.get(receipt=receipt, server=REPLICA_ALIAS)
        assert check.outcome == Outcome.NOT_CHECKED
        assert "has not replayed the erasure yet" in check.reason
    finally:
        replica_db.standby.resume_replay()
    replica_db.wait()
    assert copies.check_pending() == 1
    receipt.refresh_from_db()
    assert receipt.details["outcome"] == Outcome.VERIFIED_BY_SCAN, receipt.details["copies"]
