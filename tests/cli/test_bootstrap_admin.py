"""``bootstrap_admin`` and the scripts that run it print the address the server really serves."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from project.management.commands.bootstrap_admin import login_url

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def admin_env(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("ADMIN_USERNAME", "boss")
    monkeypatch.setenv("ADMIN_PASSWORD", "correct horse")
    settings.VAR_DIR = tmp_path
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def bootstrap(*args) -> str:
    out = io.StringIO()
    call_command("bootstrap_admin", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_the_login_line_names_the_bound_port(admin_env):
    out = bootstrap("--bind", "127.0.0.1:8011")
    assert "Log in at http://127.0.0.1:8011/admin/ as 'boss'" in out
    assert "8000" not in out
    assert get_user_model().objects.get(username="boss").is_superuser


@pytest.mark.django_db
def test_the_default_is_runservers_address(admin_env):
    assert "Log in at http://127.0.0.1:8000/admin/" in bootstrap()


@pytest.mark.django_db
def test_a_malformed_bind_is_refused_before_any_account_is_made(admin_env):
    with pytest.raises(CommandError, match="--bind: the port"):
        bootstrap("--bind", "127.0.0.1:http")
    assert not get_user_model().objects.filter(username="boss").exists()


@pytest.mark.parametrize(
    "bind, url",
    [
        ("127.0.0.1:8011", "http://127.0.0.1:8011/admin/"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000/admin/"),
        (":9001", "http://127.0.0.1:9001/admin/"),
        ("memory.internal", "http://memory.internal:8000/admin/"),
        ("8012", "http://127.0.0.1:8012/admin/"),
        ("[::1]:8013", "http://[::1]:8013/admin/"),
        ("[::]:8014", "http://[::1]:8014/admin/"),
        ("unix:/run/memoryapp.sock", "/admin/ through unix:/run/memoryapp.sock"),
    ],
)
def test_login_url_forms(bind, url):
    assert login_url(bind) == url


@pytest.mark.parametrize("bind", ["host:0", "host:70000", "[::1", "[::1]8000", "h:p"])
def test_login_url_refuses_malformed_addresses(bind):
    with pytest.raises(ValueError):
        login_url(bind)


def _recorder(path: Path, log: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {log}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_serve_script_gives_bootstrap_admin_the_address_gunicorn_binds(tmp_path):
    """scripts/serve.sh run with recording stand-ins for python and gunicorn."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "serve.sh", root / "scripts" / "serve.sh")
    (root / ".venv" / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    _recorder(root / ".venv" / "bin" / "python", log)
    _recorder(root / ".venv" / "bin" / "gunicorn", log)
    env = {**os.environ, "BIND": "127.0.0.1:8011", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "p")}
    subprocess.run(["bash", str(root / "scripts" / "serve.sh")], env=env, check=True, timeout=60)
    calls = log.read_text().splitlines()
    assert "python manage.py bootstrap_admin --bind 127.0.0.1:8011" in calls
    (served,) = [c for c in calls if c.startswith("gunicorn ")]
    assert served.endswith("--bind 127.0.0.1:8011")
