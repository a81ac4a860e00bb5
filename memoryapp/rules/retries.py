"""When to try an unfinished erasure again, and when to stop and ask a person (pure rules).

Capped exponential backoff with "equal jitter": the wait before attempt ``n + 1``
is drawn between half and all of ``min(base * 2 ** (n - 1), cap)``, so workers
that failed together do not retry together, and a receipt always waits at least
half its step. The exponent is clamped before it is raised, so no attempt count
overflows (``5.0 * 2 ** 1024`` is an ``OverflowError`` in Python).
"""

from __future__ import annotations

# Past 2 ** 60 any sensible cap is reached; clamping here keeps the float finite.
_MAX_EXPONENT = 60


def step(attempts: int, *, base: float, cap: float) -> float:
    """The backoff step after ``attempts`` failed attempts, before jitter (0 before any)."""
    if attempts <= 0 or base <= 0 or cap <= 0:
        return 0.0
    exponent = min(attempts - 1, _MAX_EXPONENT)
    return min(base * float(2**exponent), cap)


def delay(attempts: int, *, base: float, cap: float, jitter: float) -> float:
    """Seconds to wait before the next attempt; ``jitter`` in ``[0, 1]`` picks within the step.

    Always within ``[step / 2, step]`` (and so never above ``cap``).
    """
    full = step(attempts, base=base, cap=cap)
    jitter = min(max(jitter, 0.0), 1.0)
    return full / 2 + full / 2 * jitter


def exhausted(attempts: int, *, limit: int) -> bool:
    """True once ``attempts`` automatic attempts have been made and ``limit`` allows no more."""
    return attempts >= max(limit, 1)
