"""project/gunicorn.conf.py: two servers of one user do not share gunicorn's control socket.

gunicorn >= 25.1 opens a control socket at one path per user ($XDG_RUNTIME_DIR/gunicorn.ctl
or ~/.gunicorn/gunicorn.ctl), so a second server would take it over from the first. The
conf turns it off unless GUNICORN_CONTROL_SOCKET names the instance's own path.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"
# A WSGI app of its own: what is tested is the conf, not the project behind it.
APP = 'def app(environ, start_response):\n    start_response("200 OK", [])\n    return [b"ok"]\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sockets(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if stat.S_ISSOCK(p.lstat().st_mode))


@pytest.fixture
def start(tmp_path):
    """``start(env)`` runs gunicorn from the conf on a free port until it answers."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "conf_probe_app.py").write_text(APP)
    home, runtime = tmp_path / "home", tmp_path / "run"
    home.mkdir(), runtime.mkdir()
    procs: list[subprocess.Popen] = []

    def run(extra: dict[str, str] | None = None) -> str:
        env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
        env.pop("GUNICORN_CONTROL_SOCKET", None)
        env.pop("GUNICORN_CMD_ARGS", None)
        env.update(extra or {})
        port = _free_port()
        log = tmp_path / f"gunicorn-{port}.log"
        cmd = [str(GUNICORN), "conf_probe_app:app", "--config", "project/gunicorn.conf.py"]
        cmd += ["--pythonpath", str(tmp_path / "app"), "--workers", "1"]
        cmd += ["--bind", f"127.0.0.1:{port}", "--log-level", "info"]
        with log.open("w") as out:
            procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=out))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
                return log.read_text()
            except OSError:
                assert procs[-1].poll() is None, log.read_text()
                time.sleep(0.2)
        raise AssertionError(log.read_text())

    yield run
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(30)


def test_two_servers_open_no_control_socket(start, tmp_path):
    logs = [start(), start()]
    assert _sockets(tmp_path) == []  # neither in $XDG_RUNTIME_DIR nor in ~/.gunicorn
    assert not any("Control socket listening" in log for log in logs)


def test_a_control_socket_asked_for_is_the_instance_own(start, tmp_path):
    """GUNICORN_CONTROL_SOCKET gives each server its own: both listen at once."""
    first, second = tmp_path / "run" / "a.ctl", tmp_path / "run" / "b.ctl"
    start({"GUNICORN_CONTROL_SOCKET": str(first)})
    start({"GUNICORN_CONTROL_SOCKET": str(second)})
    deadline = time.monotonic() + 30  # the socket's thread may start after the first answer
    while _sockets(tmp_path) != [first, second] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _sockets(tmp_path) == [first, second]
    for path in (first, second):
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(path))  # listening, not a stale file
