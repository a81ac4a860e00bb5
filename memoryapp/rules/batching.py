"""Long id lists cut into statements of bounded size.

A statement binds each id as a variable, and SQLite allows only so many per
statement; the admin, the services and the compliance code all delete or read
by id lists of any length, so they cut them here the same way. Pure Python, on
the ground floor: every floor may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["BATCH", "batches"]

BATCH = 500  # ids per statement: far below SQLite's variable limit


def batches(seq: Sequence, size: int = BATCH) -> Iterable[list]:
    """``seq`` in lists of at most ``size`` items."""
    for start in range(0, len(seq), size):
        yield list(seq[start : start + size])
