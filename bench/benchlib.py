"""What the benchmark scripts share: the corpus, the code version they measured.

Each script runs as ``python bench/<script>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_corpus_module() -> Any:
    """The benchmark corpus generator, ``bench/corpus.py`` (``make_corpus(n, seed)``)."""
    import corpus  # bench/ is sys.path[0] for every script here

    return corpus


def code_version() -> dict[str, Any]:
    """The commit measured, and the files under memoryapp/ and project/ that differ from it."""

    def git(*command: str) -> str:
        try:
            return subprocess.run(
                ["git", *command], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.rstrip("\n")
        except (OSError, subprocess.CalledProcessError):
            return ""

    dirty = git("status", "--porcelain", "--", "memoryapp", "project").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": dirty}
