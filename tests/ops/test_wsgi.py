"""The WSGI entry point loads the whole URLconf and freezes what it loaded (project/wsgi.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, sys
frozen_before = gc.get_freeze_count()
import project.wsgi
assert "memoryapp.api.views" in sys.modules, "the URLconf was not imported"
print(frozen_before, gc.get_freeze_count(), len(gc.get_objects()))
"""


def test_wsgi_freezes_the_objects_of_start_up():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, frozen, tracked = map(int, done.stdout.split())
    assert before == 0 and frozen > 20_000
    assert tracked < frozen / 10  # what a full collection still walks
