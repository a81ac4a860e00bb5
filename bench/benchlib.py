"""What the benchmark scripts share: the corpus, the code version, the host, memory use.

Each script runs as ``python bench/<script>.py``, so this folder is on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
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


def host_info() -> dict[str, Any]:
    """The machine measured: CPU model, cores, RAM and OS (scripts add their versions)."""
    cpu, mem_kb = "unknown", 0
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        mem_kb = next((int(ln.split()[1]) for ln in f if ln.startswith("MemTotal")), 0)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kb / 2**20, 1),
        "os": platform.platform(),
    }


def peak_rss_mib() -> float:
    """This process's peak resident set, in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB -> MiB


def current_rss_mib() -> float:
    """This process's resident set now, in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def messages_for(hints: list[str]) -> list[dict[str, str]] | None:
    """The chat messages a query's path hints come from (one user message naming them)."""
    return [{"role": "user", "content": " ".join(hints)}] if hints else None


def migrated_django(url: str) -> None:
    """Point this process's Django at the database ``url`` and migrate it."""
    import sys

    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
