"""The purge implementation for a connection's database vendor."""

from __future__ import annotations

from django.db import NotSupportedError

from memoryapp.db.purge.common import VendorPurge
from memoryapp.db.purge.postgresql import PostgresPurge
from memoryapp.db.purge.sqlite import SQLitePurge

VENDORS: dict[str, VendorPurge] = {"sqlite": SQLitePurge(), "postgresql": PostgresPurge()}
"""The purge implementation of each supported vendor, by ``connection.vendor``."""


def for_connection(connection) -> VendorPurge:
    """The purge implementation for a connection's vendor; unsupported vendors fail loudly."""
    try:
        return VENDORS[connection.vendor]
    except KeyError:
        raise NotSupportedError(
            f"memoryapp cannot purge erased data on the {connection.vendor!r} database vendor "
            f"(supported: {', '.join(sorted(VENDORS))})."
        ) from None
