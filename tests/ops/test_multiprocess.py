"""Two OS processes on one database: a write in A is seen by B's very next recall.

Each process (``tests/mp_worker.py``) holds one long-lived manager, as an app
server or an agent would. Against one PostgreSQL database (the pytest test
database, committed writes: ``transaction=True``) and against one SQLite file:

- a memory saved in A is returned by the very next ``recall`` in B, and one
  deleted in A is gone from it, although B had built its recall index before;
- B's ``render_stable_block()`` stays byte-identical while only A writes, and
  changes once B itself writes.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests._processes import database_url

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parents[1] / "mp_worker.py"
TIMEOUT = 60.0


class Worker:
    """One child process; ``worker("op", **args)`` runs a command there and returns its result."""

    def __init__(self, database_url: str, mode: str, log: Path) -> None:
        env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(REPO)}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log = log
        self._stderr = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            cwd=REPO,
            env=env,
        )
        self.pid = self._read()["ready"]

    def _read(self) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"worker gave no answer; its stderr:\n{self.log.read_text()}")
        return json.loads(line)

    def __call__(self, op: str, **args):
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        answer = self._read()
        if not answer["ok"]:
            raise AssertionError(f"worker {op} failed: {answer['error']}\n{answer['traceback']}")
        return answer["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)
        self._stderr.close()


@pytest.fixture(
    params=[
        "sqlite-file",
        pytest.param(
            "postgresql",
            marks=[pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)],
        ),
    ]
)
def spawn(request, tmp_path):
    """``spawn(mode)`` starts a worker on the shared database; all are stopped at teardown."""
    if request.param == "postgresql":
        url, needs_migrate = database_url(), False  # the migrated pytest test database
    else:
        url, needs_migrate = f"sqlite:///{tmp_path / 'shared.sqlite3'}", True
    workers: list[Worker] = []

    def start(mode: str) -> Worker:
        nonlocal needs_migrate
        worker = Worker(url, mode, tmp_path / f"worker-{len(workers)}.log")
        workers.append(worker)
        if needs_migrate:
            worker("migrate")
            needs_migrate = False
        return worker

    yield start
    for worker in workers:
        worker.close()


def _ids(hits) -> list[str]:
    return [memory_id for memory_id, _score, _reasons in hits]


def test_write_in_one_process_is_recalled_by_the_next_call_in_another(spawn):
    a, b = spawn("memoryapp"), spawn("memoryapp")
    assert a.pid != b.pid
    b("save", key="Code style", value="Black formatting with line length 100", tags=["workflow"])
    stable = b("stable")
    assert "line length 100" in stable
    assert _ids(b("recall", query="kubernetes helm charts")) == []  # B's index is built

    deploy = a(
        "save",
        key="Deploy target",
        value="We deploy to Kubernetes with Helm charts",
        tags=["decision"],
    )
    assert _ids(b("recall", query="kubernetes helm charts"))[:1] == [deploy]
    assert b("stable") == stable  # byte-identical: only A wrote

    values = a("save", key="Helm values", value="Kubernetes Helm values live in deploy/values.yaml")
    assert set(_ids(b("recall", query="kubernetes helm charts"))) == {deploy, values}
    assert b("stable") == stable

    assert a("delete", memory_id=deploy) is True
    assert _ids(b("recall", query="kubernetes helm charts")) == [values]
    assert b("stable") == stable

    b("save", key="Review rule", value="Two approvals before merging", tags=["constraint"])
    refreshed = b("stable")
    assert refreshed != stable  # B's own write rebuilds its block, with A's rows in it
    assert "Two approvals" in refreshed and "deploy/values.yaml" in refreshed
    assert "We deploy to Kubernetes" not in refreshed  # deleted by A


def test_agentao_processes_share_memory_through_the_django_store(spawn):
    a, b = spawn("agentao"), spawn("agentao")
    assert _ids(b("recall", query="postgres connection pool")) == []
    pool = a(
        "save",
        key="Connection pool",
        value="PgBouncer pools PostgreSQL connections",
        tags=["postgres"],
    )
    assert _ids(b("recall", query="postgres connection pool")) == [pool]
    assert a("delete", memory_id=pool) is True
    assert _ids(b("recall", query="postgres connection pool")) == []
    # The back office's own manager in a third process sees the same rows.
    c = spawn("memoryapp")
    replica = a("save", key="Read replica", value="Reports read from the PostgreSQL replica")
    assert _ids(c("recall", query="postgresql replica reports")) == [replica]
    kept = c("save", key="Replica lag", value="The PostgreSQL replica lags under a second")
    assert set(_ids(b("recall", query="postgresql replica"))) == {replica, kept}
