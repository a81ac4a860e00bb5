"""How counts read in messages: ``plural(1, "memory", "memories")`` is "1 memory".

Pure Python, shared by the admin, the API messages and the CLI so that no
message says "1 memories" or "memory(ies)".
"""

from __future__ import annotations

__all__ = ["byte_size", "plural"]

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")


def plural(n: int, one: str, many: str) -> str:
    """``"1 memory"``, ``"3 memories"``, ``"12,500 memories"``: a count and its noun."""
    return f"{n:,} {one if n == 1 else many}"


def byte_size(n: int) -> str:
    """A size in binary units as a person reads it: ``"2 MiB"``, ``"1.5 KiB"``,
    ``"10,000 bytes"`` is ``"9.8 KiB"``; below 1 KiB, ``"1 byte"`` / ``"512 bytes"``.

    One decimal at most, and none when the size is whole in its unit.
    """
    if n < 1024:
        return plural(n, "byte", "bytes")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    shown = f"{value:,.1f}".removesuffix(".0")
    return f"{shown} {_UNITS[unit]}"
