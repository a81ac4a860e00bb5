"""The byte scan's file reading, in a process of its own (``python -m memoryapp.db.scan_child``).

Why not in the process that erased: SQLite's locks are POSIX advisory locks,
which belong to a process and are all dropped when *any* descriptor of that
file is closed in it. Reading a database file (or its ``-shm``) with
``open()``/``close()`` beside an open SQLite connection silently releases
that connection's locks; another process may then believe it is the last one,
checkpoint and delete the ``-wal`` and ``-shm`` files in use — "disk I/O
error", then a malformed database. A child process has no SQLite connection,
so closing its descriptors releases nothing.

Reads ``{"paths": [...], "pieces": [base64...]}`` as JSON on standard input and
writes ``{"found": [indexes], "total": n, "read": {path: n}}``. The pieces are
fragments of erased values: they travel through the pipe only, never a file.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterable, Sequence

from memoryapp.db.finder import FileFinder, Finder

SCAN_CHUNK = 4 * 1024 * 1024


def scan_here(
    paths: Iterable[str], pieces: Sequence[bytes]
) -> tuple[set[int], int, dict[str, int]]:
    """Which ``pieces`` occur in the files, bytes read in all and per file (this process)."""
    found: set[int] = set()
    read: dict[str, int] = {}
    total = 0
    if not pieces:
        return found, total, read
    # Probes are 12+ bytes: the two-alignment finder reads ~3x faster; shorter
    # pieces (a test's) keep the eight-alignment one.
    short = min(len(p) for p in pieces) < FileFinder.MIN_BYTES
    finder = Finder(pieces) if short else FileFinder(pieces)
    overlap = max(len(p) for p in pieces) - 1
    for path in paths:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            continue
        with handle:
            read[path] = 0
            tail = b""
            while True:
                chunk = handle.read(SCAN_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                read[path] += len(chunk)
                window = tail + chunk
                finder.search(window, found)
                tail = window[-overlap:] if overlap > 0 else b""
        # No early stop once every piece is found: the structural check may rely
        # on this scan having read a file whole (SQLite's -wal), and the finder
        # costs nothing more then (Finder.search returns at once).
    return found, total, read


def main() -> None:
    request = json.load(sys.stdin)
    pieces = [base64.b64decode(p) for p in request["pieces"]]
    found, total, read = scan_here(request["paths"], pieces)
    json.dump({"found": sorted(found), "total": total, "read": read}, sys.stdout)


if __name__ == "__main__":
    main()
