"""The byte scan: which erased pieces still occur in the raw bytes of database files."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path


def scan(
    paths: Iterable[str], pieces: Sequence[bytes], *, read: dict[str, int] | None = None
) -> tuple[set[int], int]:
    """Find which ``pieces`` (each at least 8 bytes) occur in the raw bytes of ``paths``.

    The files are read by a child process (:mod:`memoryapp.db.scan_child` says why: closing
    a descriptor of a SQLite file in this process would drop its connection's
    locks), in chunks with an overlap of the longest piece, never mapped
    (another process may truncate a ``-wal`` file while it reads). Returns the
    indexes of the pieces found and the number of bytes read; ``read``, when
    given, receives the bytes read per path (a file that could not be opened is
    missing from it). The cost does not grow with the number of pieces
    (:class:`memoryapp.db.finder.Finder`).
    """
    paths = list(paths)
    if not pieces:
        return set(), 0
    request = json.dumps(
        {"paths": paths, "pieces": [base64.b64encode(p).decode("ascii") for p in pieces]}
    )
    package_root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "memoryapp.db.scan_child"],
        input=request,
        capture_output=True,
        text=True,
        cwd=package_root,
        check=False,
    )
    if result.returncode != 0:
        raise OSError(f"byte scan failed: {(result.stderr or '').strip()[-300:]}")
    answer = json.loads(result.stdout)
    if read is not None:
        read.update(answer["read"])
    return set(answer["found"]), int(answer["total"])
