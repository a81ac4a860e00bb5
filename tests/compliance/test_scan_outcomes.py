"""A receipt never claims what was not proven (issue 38, part 3): the three named outcomes.

- Both vendors: an erasure whose files this process scans is ``verified_by_byte_scan``;
  one whose files it cannot read (the SQLite file, PostgreSQL's data directory: made
  unreadable to the check, as root cannot be denied for real) is
  ``rewritten_not_scanned`` with its reason, and the receipt page, the printable letter,
  the lookup, ``memory erase``, the API, ``/healthz`` and ``/metrics`` all say so by name,
  never "checked" nor "verified by byte scan".
- PostgreSQL, the judged fault: the same server reached through another host name
  (a TCP forwarder on 127.0.0.2) is a server on another machine for the byte scan: the
  app does not guess that a name resolves here (``db/purge/pg_files.LOCAL_HOSTS``).
"""

from __future__ import annotations

import html
import io
import os
import re
import select
import socket
import socketserver
import threading

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from memoryapp import compliance
from memoryapp.compliance import outcome_counts
from memoryapp.models import ErasureReceipt, ReceiptState
from memoryapp.rules.outcomes import Outcome
from tests._admin_support import client_for, make_staff
from tests._erasure_support import ALICE, seed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

RECEIPTS = "/admin/memoryapp/erasurereceipt/"
TOKEN = "scrape-token-for-outcomes"
# What a person must never read about an erasure whose files were not scanned.
CLAIMS = re.compile(r"checked|verified by byte scan|found none", re.IGNORECASE)


def _erase_by_cli(monkeypatch) -> tuple[str, ErasureReceipt]:
    out = io.StringIO()
    monkeypatch.setattr("builtins.input", lambda prompt="": "y")
    call_command("memory", "erase", "--subject", ALICE, "--actor", "dpo", stdout=out)
    return out.getvalue(), ErasureReceipt.objects.get()


def _pages(receipt: ErasureReceipt) -> dict[str, str]:
    """What a person reads about the receipt: the admin page, the letter, the lookup."""
    admin = client_for(make_staff("dpo", superuser=True))
    change = admin.get(f"{RECEIPTS}{receipt.pk}/change/")
    letter = admin.get(f"{RECEIPTS}{receipt.pk}/print/")
    assert change.status_code == letter.status_code == 200
    summary = change.content.decode().split('id="receipt-summary"')[1].split("</div>")[0]
    lookup = admin.post(f"{RECEIPTS}lookup/", {"subject": ALICE})
    assert lookup.status_code == 200
    pages = {
        "summary": summary,
        "change": change.content.decode(),
        "letter": letter.content.decode().split("<main>")[1].split("</main>")[0],
        "lookup": lookup.content.decode().split('id="lookup-receipts"')[1].split("</table>")[0],
    }
    return {name: html.unescape(text) for name, text in pages.items()}


def _api(receipt: ErasureReceipt) -> dict:
    admin = client_for(make_staff("api-dpo", superuser=True))
    r = admin.get(f"/api/erasures/{receipt.pk}/")
    assert r.status_code == 200, r.content
    return r.json()


def _metric(outcome: str) -> float:
    r = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200
    line = f'memoryapp_erasure_receipt_outcomes{{outcome="{outcome}"}} '
    found = [row for row in r.content.decode().splitlines() if row.startswith(line)]
    assert found, r.content.decode()[:2000]
    return float(found[0].split()[-1])


def _health() -> dict:
    r = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200, r.content
    return r.json()["erasures"]["outcomes"]


def _assert_unscanned_everywhere(out: str, receipt: ErasureReceipt, reason: str, plain: str):
    """Every place a person reads names the outcome, says "not possible" and the reason,
    and never claims the files were checked."""
    assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.verification
    assert receipt.details["outcome"] == Outcome.UNSCANNED.value
    assert reason in receipt.details["scan_unavailable"]
    # memory erase: the outcome by name, never "verified: yes" beside "not possible".
    said = [line for line in out.splitlines() if line.strip().startswith("outcome:")]
    assert said == [
        f"  outcome: rows deleted and files rewritten, byte scan not possible here ({plain})"
    ], out
    assert "verified: yes" not in out and "not possible" in out
    assert not CLAIMS.search(said[0])
    pages = _pages(receipt)
    for name in ("summary", "letter", "lookup"):
        text = pages[name]
        assert "byte scan not possible here" in text and plain in text, (name, text)
        assert not CLAIMS.search(text), (name, CLAIMS.search(text), text)
    assert "Erased — byte scan not possible here" in pages["summary"]
    # The receipt list's "verified" column: no tick, the outcome in words.
    listing = client_for(make_staff("lister", superuser=True)).get(RECEIPTS).content.decode()
    assert ">not scanned</span>" in listing and "byte scan not possible here" in listing
    # The technical proof's badge names the outcome too (no "verified" tick).
    assert 'id="receipt-outcome">rows deleted and files rewritten' in pages["change"]
    body = _api(receipt)
    assert body["outcome"] == "rewritten_not_scanned" and reason in body["scan_unavailable"]
    assert plain in body["outcome_text"] and not CLAIMS.search(body["outcome_text"])
    assert _metric("rewritten_not_scanned") == 1 and _metric("verified_by_byte_scan") == 0
    assert _health()["rewritten_not_scanned"] == 1


@pytest.fixture
def scrape(settings):
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN


@pytest.fixture(autouse=True)
def _patient_purge(purge_settings, settings):
    """PostgreSQL: a purge waits for transactions older than the erasure on the whole
    server (other test runs' included); on a shared, loaded server 10 s is not enough."""
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 120


def test_an_erasure_whose_files_are_scanned_is_verified_by_byte_scan(scrape, monkeypatch):
    seed(ALICE)
    out, receipt = _erase_by_cli(monkeypatch)
    assert receipt.details["outcome"] == Outcome.VERIFIED_BY_SCAN.value, receipt.verification
    assert "scan_unavailable" not in receipt.details
    assert "  outcome: verified by byte scan" in out.splitlines()
    pages = _pages(receipt)
    assert "Erased and verified by byte scan" in pages["summary"]
    assert "a byte scan of the database files found none of the erased text" in pages["letter"]
    body = _api(receipt)
    assert (body["outcome"], body["scan_unavailable"]) == ("verified_by_byte_scan", "")
    assert _metric("verified_by_byte_scan") == 1 and _metric("rewritten_not_scanned") == 0
    assert _health()["verified_by_byte_scan"] == 1


def _deny_reading(monkeypatch, denied: str) -> None:
    """``os.access`` says no for ``denied`` (the process runs as root, whom a file's mode
    does not stop): the check the vendors make before a scan."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if os.fspath(path) == denied:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def test_files_this_process_cannot_read_are_not_scanned_and_the_receipt_says_so(
    scrape, monkeypatch
):
    seed(ALICE)
    if connection.vendor == "sqlite":
        denied = str(connection.settings_dict["NAME"])
        reason = "database file not readable by this process"
    else:
        with connection.cursor() as cursor:
            cursor.execute("SHOW data_directory")
            denied = cursor.fetchone()[0]
        reason = "data directory not readable by this process"
    _deny_reading(monkeypatch, denied)
    sql_reason = _no_sql_grants(monkeypatch)
    out, receipt = _erase_by_cli(monkeypatch)
    plain = "this application is not allowed to read the database's files"
    _assert_unscanned_everywhere(out, receipt, reason, plain + (sql_reason and SQL_PLAIN))
    assert f"byte scan: not possible ({reason}{sql_reason})" in receipt.verification


NO_GRANTS = "the database role lacks membership in pg_read_server_files"
SQL_PLAIN = "; the database does not let this application read its files through SQL"


def _no_sql_grants(monkeypatch) -> str:
    """The role may not read the server's files through SQL either (a managed service, or
    the grants of docs/operations.md not given): what the receipt's reason then adds."""
    if connection.vendor != "postgresql":
        return ""
    from memoryapp.db.purge import sql_scan

    monkeypatch.setattr(sql_scan, "unreadable", lambda cursor: NO_GRANTS)
    return f"; through SQL: {NO_GRANTS}"


def test_a_retry_that_can_scan_replaces_the_outcome_and_drops_the_old_reason(monkeypatch):
    seed(ALICE)
    receipt = compliance.erase(subject=ALICE, actor="dpo", purge=False)
    receipt.refresh_from_db()
    receipt.details["outcome"] = Outcome.UNSCANNED.value
    receipt.details["scan_unavailable"] = "an earlier attempt's reason"
    receipt.save(update_fields=["details"])
    (done,) = compliance.retry_purge(receipt.pk)
    assert done.details["outcome"] == Outcome.VERIFIED_BY_SCAN.value, done.verification
    assert "scan_unavailable" not in done.details


# ------------------------------------------------------------- the judged fault
class _Forward(socketserver.BaseRequestHandler):
    """One client connection piped to PostgreSQL on 127.0.0.1:5432, both ways."""

    def handle(self):
        upstream = socket.create_connection(("127.0.0.1", 5432))
        pair = {self.request: upstream, upstream: self.request}
        try:
            while True:
                ready, _, _ = select.select(list(pair), [], [], 30)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pair[sock].sendall(data)
        finally:
            upstream.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def through_another_host():
    """The test database reached through 127.0.0.2:<free port>, a forwarder to the
    local server: to the app, a server named by another host."""
    server = _Server(("127.0.0.2", 0), _Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    saved = {k: connection.settings_dict.get(k) for k in ("HOST", "PORT")}
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.2", PORT=str(server.server_address[1]))
    try:
        yield f"127.0.0.2:{server.server_address[1]}"
    finally:
        connection.close()
        connection.settings_dict.update(saved)
        server.shutdown()
        server.server_close()


@pytest.mark.postgres_only
def test_a_postgresql_server_on_another_host_is_rewritten_not_scanned(
    through_another_host, scrape, monkeypatch
):
    with connection.cursor() as cursor:  # every query of this test goes through the forwarder
        cursor.execute("SELECT inet_server_addr()::text, inet_client_addr()::text")
        server_addr, _ = cursor.fetchone()
    assert connection.settings_dict["HOST"] == "127.0.0.2" and server_addr.startswith("127.0.0.1")
    seed(ALICE)
    sql_reason = _no_sql_grants(monkeypatch)
    out, receipt = _erase_by_cli(monkeypatch)
    reason = "database server '127.0.0.2' is not on this machine"
    plain = "the database runs on another machine" + SQL_PLAIN
    _assert_unscanned_everywhere(out, receipt, reason, plain)
    assert f"byte scan: not possible ({reason}{sql_reason})" in receipt.verification
    assert outcome_counts.counts()["rewritten_not_scanned"] == 1


@pytest.mark.postgres_only
def test_a_postgresql_server_on_another_host_is_scanned_through_sql_when_the_role_may(
    through_another_host, monkeypatch
):
    """The same remote server, with a role that may read its files through SQL (this
    test's superuser): the scan runs there, and only then is it "verified by byte scan"."""
    seed(ALICE)
    out, receipt = _erase_by_cli(monkeypatch)
    assert receipt.details["outcome"] == Outcome.VERIFIED_BY_SCAN.value, receipt.verification
    assert "through SQL" in receipt.verification and "none found" in receipt.verification


def test_receipts_are_counted_by_outcome_earlier_ones_derived_honestly(scrape):
    def make(**fields):
        ErasureReceipt.objects.create(target_kind="namespace", **fields)

    make(state="requested")  # no verification yet
    make(state="complete", verified=True, details={"outcome": "verified_by_byte_scan"})
    make(state="needs_attention", verification="SQL: 1 erased row(s) remain")
    # From before outcomes were recorded: derived from the text, never upgraded.
    make(
        state="complete",
        verified=True,
        verification="SQL: 0 erased row(s) remain; byte scan: not possible (in-memory "
        "database: no files)",
    )
    make(state="complete", verified=True, verification="SQL: 0 erased row(s) remain")
    expected = {
        "verified_by_byte_scan": 1,
        "rewritten_not_scanned": 1,
        "not_verified": 1,
        "not_checked": 1,
        "nothing_erased": 0,
        "unknown": 1,
    }
    assert outcome_counts.counts() == expected
    assert {o: _metric(o) for o in expected} == expected
    assert _health() == expected
