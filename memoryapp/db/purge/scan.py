"""The byte scan: which erased pieces still occur in the raw bytes of database files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

# With a heartbeat, the files are read by one child per this many bytes (about 10 s of
# reading here) and the heartbeat is called before each: a long scan can renew its claim.
GROUP_BYTES = 1 << 30


def scan(
    paths: Iterable[str],
    pieces: Sequence[bytes],
    *,
    read: dict[str, int] | None = None,
    heartbeat: Callable[[], None] | None = None,
) -> tuple[set[int], int]:
    """Find which ``pieces`` (each at least 8 bytes) occur in the raw bytes of ``paths``.

    The files are read by a child process (:mod:`memoryapp.db.scan_child` says why: closing
    a descriptor of a SQLite file in this process would drop its connection's
    locks), in chunks with an overlap of the longest piece, never mapped
    (another process may truncate a ``-wal`` file while it reads). Returns the
    indexes of the pieces found and the number of bytes read; ``read``, when
    given, receives the bytes read per path (a file that could not be opened is
    missing from it). The cost does not grow with the number of pieces
    (:class:`memoryapp.db.finder.Finder`). ``heartbeat``, when given, is called before
    each group of files of about :data:`GROUP_BYTES` (it may raise to stop the scan).
    """
    paths = list(paths)
    if not pieces:
        return set(), 0
    if heartbeat is None:
        return _scan_in_child(paths, pieces, read)
    found: set[int] = set()
    total = 0
    for group in groups(paths, GROUP_BYTES):
        heartbeat()
        got, size = _scan_in_child(group, pieces, read)
        found |= got
        total += size
    return found, total


def groups(paths: Sequence[str], limit: int) -> list[list[str]]:
    """``paths`` in order, cut into runs of at most ``limit`` bytes (a larger file alone)."""
    out: list[list[str]] = []
    size = 0
    for path in paths:
        try:
            n = os.path.getsize(path)
        except OSError:
            n = 0  # gone or unreadable: the child reports it as not read
        if not out or size + n > limit:
            out.append([])
            size = 0
        out[-1].append(path)
        size += n
    return out


def _scan_in_child(
    paths: list[str], pieces: Sequence[bytes], read: dict[str, int] | None
) -> tuple[set[int], int]:
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
