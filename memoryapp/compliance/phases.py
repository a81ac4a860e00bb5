"""Which step an erasure is at, for whoever watches (the CLI's progress line).

``with observe(callback): erase(...)`` calls ``callback("deleting")``,
``callback("purging")``, ``callback("verifying")`` as the erasure reaches each
step; without an observer, :func:`report` costs a context-variable read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_observer: ContextVar[Callable[[str], None] | None] = ContextVar("erasure_phase", default=None)


def report(phase: str) -> None:
    """Tell the current observer (if any) that the erasure reached ``phase``."""
    callback = _observer.get()
    if callback is not None:
        callback(phase)


@contextmanager
def observe(callback: Callable[[str], None]) -> Iterator[None]:
    """Send the erasures run inside the block's phases to ``callback``."""
    token = _observer.set(callback)
    try:
        yield
    finally:
        _observer.reset(token)
