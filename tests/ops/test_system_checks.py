"""The system checks run where an operator meets them: ``manage.py check`` (``call_command``).

Importing ``memoryapp.ops.checks`` registers them; ``AppConfig.ready()`` must do that import.
Once it did not (the absolute-imports commit dropped it) and ``check`` said "no issues" with a
guard that cannot be imported. In this process some test module may already have imported
``ops.checks`` (registering them by accident), so what ``django.setup()`` registers by itself
is asked of a fresh process; the command's reports are then asked of ``call_command``.
"""

from __future__ import annotations

import copy
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections

from memoryapp.ops import checks as memory_checks

ROOT = Path(__file__).resolve().parents[2]

# What a fresh process registers at django.setup(), without importing memoryapp.ops.checks.
_REGISTERED = """
import sys, django
django.setup()
assert "memoryapp.ops.checks" in sys.modules, "ready() did not import memoryapp.ops.checks"
from django.core.checks import registry
for fn in registry.registry.get_checks(include_deployment_checks=True):
    print(f"{fn.__module__}.{fn.__name__}")
"""


def _fresh_process(args: list[str], **env: str) -> subprocess.CompletedProcess:
    child_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env}
    child_env.pop("DATABASE_URL", None)  # the checks asked here read no database
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=child_env, capture_output=True, text=True
    )


def test_every_check_of_ops_checks_is_registered_by_django_setup():
    functions = [
        f"{fn.__module__}.{name}"
        for name, fn in inspect.getmembers(memory_checks, inspect.isfunction)
        if name.startswith("check_") and fn.__module__ == memory_checks.__name__
    ]
    assert len(functions) >= 3  # vendor, guard, SQLite transactions (and any added later)
    done = _fresh_process(["-c", _REGISTERED])
    assert done.returncode == 0, done.stderr[-2000:]
    registered = set(done.stdout.split())
    missing = [name for name in functions if name not in registered]
    assert missing == [], f"not registered with Django's system checks: {missing}"


def test_manage_py_check_reports_a_guard_that_cannot_be_imported():
    done = _fresh_process(["manage.py", "check"], MEMORYAPP_GUARD="nope.Nope")
    assert done.returncode == 1, (done.stdout, done.stderr[-2000:])
    assert "memoryapp.E002" in done.stderr and "'nope.Nope'" in done.stderr
    assert "no issues" not in done.stdout


def test_check_passes_with_the_default_guard(capsys):
    call_command("check")
    assert "no issues" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("path", "said"),
    [("nope.Nope", "cannot be imported"), ("builtins.dict", "is not a subclass")],
)
def test_check_command_reports_a_bad_guard(settings, path, said):
    settings.MEMORYAPP_GUARD = path
    with pytest.raises(SystemCheckError) as caught:
        call_command("check")
    assert "memoryapp.E002" in str(caught.value)
    assert path in str(caught.value) and said in str(caught.value)


@pytest.mark.django_db
def test_check_command_with_database_reports_an_unsupported_vendor(monkeypatch):
    call_command("check", "--database", "default")
    monkeypatch.setattr(type(connections["default"]), "vendor", "mysql")
    with pytest.raises(SystemCheckError) as caught:
        call_command("check", "--database", "default")
    assert "memoryapp.E001" in str(caught.value) and "'mysql'" in str(caught.value)


@pytest.mark.django_db
def test_check_command_with_database_reports_a_deferred_sqlite_alias(monkeypatch, tmp_path):
    deferred = copy.deepcopy(connections.settings["default"])
    deferred.update(
        ENGINE="django.db.backends.sqlite3", NAME=str(tmp_path / "x.sqlite3"), OPTIONS={}
    )
    monkeypatch.setitem(connections.settings, "deferred", deferred)
    with pytest.raises(SystemCheckError) as caught:
        call_command("check", "--database", "default")
    assert "memoryapp.E003" in str(caught.value) and "'deferred'" in str(caught.value)
