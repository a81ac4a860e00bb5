"""Counts and sizes as a person reads them (pure: no database)."""

from __future__ import annotations

import pytest

from memoryapp.rules.wording import byte_size, plural


@pytest.mark.parametrize(
    ("n", "said"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1,023 bytes"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (10_000, "9.8 KiB"),
        (2 * 1024 * 1024, "2 MiB"),
        (5 * 1024**3, "5 GiB"),
        (3 * 1024**5, "3,072 TiB"),
    ],
)
def test_byte_size_uses_binary_units_and_one_decimal_at_most(n, said):
    assert byte_size(n) == said


def test_plural_keeps_thousands_separators():
    assert plural(12_500, "memory", "memories") == "12,500 memories"
    assert plural(1, "memory", "memories") == "1 memory"
