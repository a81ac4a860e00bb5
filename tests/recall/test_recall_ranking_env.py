"""``MEMORYAPP_RECALL_RANKING`` is read from the environment by project/settings.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import django
django.setup()
from django.conf import settings
from memoryapp import conf
print(settings.MEMORYAPP_RECALL_RANKING)
try:
    print(conf.recall_ranking(None))
except ValueError as exc:
    print("ValueError", exc)
"""


def _probe(value: str | None) -> list[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"}
    env.pop("MEMORYAPP_RECALL_RANKING", None)
    if value is not None:
        env["MEMORYAPP_RECALL_RANKING"] = value
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize(("value", "expected"), [(None, "agentao"), ("hybrid", "hybrid")])
def test_the_environment_sets_the_default_ranking(value, expected):
    assert _probe(value) == [expected, expected]


def test_an_unknown_ranking_from_the_environment_is_refused_on_use():
    setting, used = _probe("bm25")
    assert setting == "bm25"
    assert used.startswith("ValueError unknown recall ranking 'bm25'")
