"""An ``Idempotency-Key`` erasure whose process dies at any step: the retry gets the one receipt.

Issue #26 item 3: after a ``kill -9`` of the web server mid-erasure, the retry with
the same key and body answered 409 "still running" forever (the key was bound to
the receipt only at the very end), or ran a second, empty erasure while the real
receipt stayed invisible to its requester. Here a child process sends the request
and dies at a chosen step (``os._exit``, or a real SIGKILL while it waits inside the
deletion); the test then retries in this process and checks that it answers the one
real receipt, with the real counts, completed — never 409, never a second receipt.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import Client

from memoryapp.api.models import ErasureRequest
from memoryapp.api.testing import token_client
from memoryapp.models import ErasureReceipt, Memory, ReceiptState
from tests._processes import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "acme/crash"
ROWS = 40
KEY = "gdpr-ticket-crash"
BODY = {"namespace": NAMESPACE}

_CHILD = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
import django; django.setup()
from django.test import Client
from memoryapp.api import idempotency
from memoryapp.compliance import engine

step, token, key, namespace = sys.argv[1:5]

def die(*args, **kwargs):
    os._exit(9)  # as a kill -9: no cleanup, no rollback but the database's own

def hang(*args, **kwargs):
    print("recorded", flush=True)  # the receipt is saved, no row deleted yet
    time.sleep(600)  # the parent sends SIGKILL here

if step == "claimed":  # the request claimed, its receipt not recorded yet
    idempotency._erase = die
elif step == "recorded":  # the receipt recorded (requested), nothing deleted
    engine.delete = die
elif step == "killed":  # the same, by a real SIGKILL from outside
    engine.delete = hang
elif step == "deleted":  # the rows deleted and committed, no purge yet
    engine.after_delete = die
elif step == "finished":  # the erasure complete, the request never released
    idempotency._release = die
client = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION="Token " + token)
r = client.post(
    "/api/erasures/",
    {"namespace": namespace},
    content_type="application/json",
    HTTP_IDEMPOTENCY_KEY=key,
)
print("answered", r.status_code, flush=True)
"""


def _seed() -> None:
    for n in range(ROWS):
        Memory.objects.upsert(namespace=NAMESPACE, key=f"fact {n}", value=f"crash fact {n}")
    Memory.objects.upsert(namespace="acme/kept", key="kept", value="another namespace, kept")


def _run_child(step: str, token: str, log: Path, *, worker: bool) -> None:
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(REPO),
        "SECRET_KEY": settings.SECRET_KEY,  # the sealed request is keyed from it
        "MEMORYAPP_ERASURE_WORKER": "true" if worker else "false",
        "MEMORYAPP_ERASURE_PURGE_TIMEOUT": "60",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, step, token, KEY, NAMESPACE],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    try:
        if step == "killed":
            _wait_for(proc, "recorded", log)
            os.kill(proc.pid, signal.SIGKILL)
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    died = -signal.SIGKILL if step == "killed" else 9
    assert code == died, f"the child did not die where asked ({code}):\n{log.read_text()}"


def _wait_for(proc: subprocess.Popen, text: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if text in line:
                return
            if not line and proc.poll() is not None:
                break
    raise AssertionError(f"the child never said {text!r}:\n{log.read_text()}")


def _retry(client: Client):
    return client.post(
        "/api/erasures/", BODY, content_type="application/json", HTTP_IDEMPOTENCY_KEY=KEY
    )


@pytest.mark.parametrize("worker", [False, True], ids=["purge-in-request", "worker"])
@pytest.mark.parametrize("step", ["claimed", "recorded", "killed", "deleted", "finished"])
def test_a_retry_after_a_crash_returns_the_one_real_receipt(step, worker, settings, tmp_path):
    settings.MEMORYAPP_ERASURE_WORKER = worker
    _seed()
    api = token_client("acme-crash", ["acme/"], write=True, erase=True)
    client = Client(HTTP_AUTHORIZATION=f"Token {api.token}")

    _run_child(step, api.token, tmp_path / "child.log", worker=worker)
    claim = ErasureRequest.objects.get(idempotency_key=KEY)
    assert claim.receipt_id  # bound from the start, whatever step the child died at

    first = _retry(client)
    assert first.status_code == (202 if worker else 201), first.content
    body = first.json()
    assert body["id"] == claim.receipt_id
    assert body["counts"]["memories"] == ROWS  # the real erasure, never an empty second one
    assert ErasureReceipt.objects.count() == 1
    assert not Memory.objects.filter(namespace=NAMESPACE).exists()
    assert Memory.objects.filter(namespace="acme/kept").exists()
    receipt = ErasureReceipt.objects.get()
    if worker:
        assert receipt.state in (ReceiptState.DELETED, ReceiptState.COMPLETE)
    else:
        assert receipt.state == ReceiptState.COMPLETE and receipt.verified, receipt.purge_status

    # The requester reads it, and a further retry replays it unchanged.
    assert client.get(f"/api/erasures/{claim.receipt_id}/").status_code == 200
    again = _retry(client)
    assert again.status_code in (201, 202) and again.json()["id"] == claim.receipt_id
    assert again["Idempotent-Replayed"] == "true"
    assert ErasureReceipt.objects.count() == 1


def test_a_request_that_failed_after_recording_is_completed_by_its_retry(settings, monkeypatch):
    """No crash: the deletion raised (a timeout, a lost connection). The request answers
    500, its receipt stays ``requested``, and the retry completes that receipt."""
    from memoryapp.compliance import engine

    _seed()
    api = token_client("acme-crash", ["acme/"], write=True, erase=True)
    client = Client(HTTP_AUTHORIZATION=f"Token {api.token}", raise_request_exception=False)
    real = engine.apply

    def fail(*args, **kwargs):
        raise TimeoutError("the statement timed out")

    monkeypatch.setattr(engine, "apply", fail)
    assert _retry(client).status_code == 500
    monkeypatch.setattr(engine, "apply", real)
    receipt = ErasureReceipt.objects.get()
    assert receipt.state == ReceiptState.REQUESTED
    assert Memory.objects.filter(namespace=NAMESPACE).count() == ROWS

    r = _retry(client)
    assert r.status_code == 201, r.content
    assert r.json()["id"] == receipt.pk and r.json()["counts"]["memories"] == ROWS
    assert ErasureReceipt.objects.count() == 1
    assert not Memory.objects.filter(namespace=NAMESPACE).exists()


def test_a_request_refused_before_recording_releases_its_key():
    """A 404 (hidden target) records nothing and leaves the key free for another body."""
    _seed()
    api = token_client("acme-crash", ["acme/"], write=True, erase=True)
    client = Client(HTTP_AUTHORIZATION=f"Token {api.token}")
    hidden = client.post(
        "/api/erasures/",
        {"namespace": "globex/web"},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=KEY,
    )
    assert hidden.status_code == 404
    assert not ErasureRequest.objects.exists() and not ErasureReceipt.objects.exists()
    assert _retry(client).status_code == 201
