"""How counts read in messages: ``plural(1, "memory", "memories")`` is "1 memory".

Pure Python, shared by the admin, the API messages and the CLI so that no
message says "1 memories" or "memory(ies)".
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, one: str, many: str) -> str:
    """``"1 memory"``, ``"3 memories"``, ``"12,500 memories"``: a count and its noun."""
    return f"{n:,} {one if n == 1 else many}"
