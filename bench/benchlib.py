"""What the benchmark scripts share: the corpus, the code version they measured.

Each script runs as ``python bench/<script>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_corpus_module() -> Any:
    """Import ``shared/bench/corpus.py`` by path (it is not part of this repository)."""
    for shared in (ROOT.parent / "shared", Path("/work/shared")):
        path = shared / "bench" / "corpus.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location("shared_bench_corpus", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    sys.exit("shared/bench/corpus.py not found beside the repository")


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
