"""CACHE_URL on Redis: throttles count per client across every gunicorn worker.

Runs against the real Redis at 127.0.0.1:6379 (CI starts it). Without one, the
test is skipped on a developer's machine and fails under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from memoryapp.api.grants import provision_client
from tests._processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"
RATE = 6  # recalls per minute for the test client


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis_url():
    if not _redis_up():
        if os.environ.get("CI") == "true":
            pytest.fail("Redis is not running at 127.0.0.1:6379 (CI must start it)")
        pytest.skip("Redis is not running at 127.0.0.1:6379")
    # A key prefix of its own: parallel runs and earlier runs never share counts.
    return f"redis://127.0.0.1:6379/0?key_prefix=memoryapp-test-{uuid.uuid4().hex}"


def _serve(tmp_path, env_extra: dict) -> tuple[subprocess.Popen, str, Path]:
    from django.conf import settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "false",
        "SECRET_KEY": settings.SECRET_KEY,
        "API_THROTTLE_RECALL": f"{RATE}/min",
        **env_extra,
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = tmp_path / "access.log"
    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "project.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--access-logfile",
            str(log),
            "--access-logformat",
            "%(p)s %(s)s",  # which worker answered, and how
        ],
        cwd=REPO,
        env=env,
        stderr=(tmp_path / "gunicorn.err").open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return proc, url, log
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError((tmp_path / "gunicorn.err").read_text())


def _recall(url: str, token: str) -> int:
    body = json.dumps({"query": "editor", "project": "cache/a"}).encode()
    request = urllib.request.Request(
        url + "/api/recall/",
        data=body,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _recalls_on_both_workers(url: str, token: str, n: int) -> list[int]:
    """``n`` recalls, one after another; every other one while the other worker is busy.

    Which sync worker accepts a connection is the kernel's choice; an idle connection
    (nothing sent) keeps the worker that accepted it waiting, so the request sent
    meanwhile goes to the other one.
    """
    host, port = url.removeprefix("http://").split(":")
    statuses = []
    for i in range(n):
        idle = socket.create_connection((host, int(port))) if i % 2 else None
        try:
            if idle is not None:
                time.sleep(0.05)  # let a worker accept it
            statuses.append(_recall(url, token))
        finally:
            if idle is not None:
                idle.close()
    return statuses


def test_throttles_count_per_client_across_two_workers_on_redis(tmp_path, redis_url):
    proc, url, log = _serve(tmp_path, {"CACHE_URL": redis_url})
    try:
        for attempt in range(3):  # a fresh client (and budget) if one worker got everything
            client = provision_client(f"cache-app-{attempt}", ["cache/"])
            before = len(log.read_text().splitlines())
            statuses = _recalls_on_both_workers(url, client.token, 3 * RATE)
            time.sleep(0.2)  # the access log line follows the response
            lines = [line.split() for line in log.read_text().splitlines()[before:]]
            answered_by = {pid for pid, status in lines if status in ("200", "429")}
            if len(answered_by) == 2:
                break
    finally:
        proc.terminate()
        proc.wait(20)
    assert len(answered_by) == 2, f"one worker answered everything, 3 times: {lines}"
    assert statuses.count(200) == RATE, statuses  # one budget for the client, not per worker
    assert statuses[RATE:] == [429] * (2 * RATE)
