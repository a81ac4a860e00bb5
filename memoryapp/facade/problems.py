"""The store problems of one manager's reads (docs/behaviour.md §11): record, clear, tell once."""

from __future__ import annotations

import logging

from django.db import DatabaseError

from memoryapp.services.slices import StoreSlice

logger = logging.getLogger("memoryapp.facade")


class StoreProblems:
    """What a manager's turn-path reads could not read, told to the host once per outage.

    The facade and its mixins share this object instead of the host's private
    state: :meth:`read` runs a read that must not break a turn.
    """

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}
        self.reported: set[str] = set()
        self.failures = 0  # moves on every failed read (Agentao's read_failures)

    def read(self, stores: list[StoreSlice], read, empty):
        """Run ``read()``; a database error records a problem per store and yields ``empty``.

        A successful read clears the problems of ``stores``.
        """
        try:
            result = read()
        except DatabaseError as exc:
            self.failed(stores, exc)
            return empty
        for s in stores:
            self.messages.pop(s.label, None)
            self.reported.discard(s.label)
        return result

    def failed(self, stores: list[StoreSlice], exc: Exception) -> None:
        """Record that ``stores`` could not be read (one warning per outage, not per turn)."""
        self.failures += 1
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        for s in stores:
            if s.label not in self.messages:
                logger.warning("memory %s unavailable: %s", s.label, type(exc).__name__)
            self.messages[s.label] = (
                f"The {s.label} (database {s.using!r}) could not be read: {first_line}"
            )

    def note(self, label: str, message: str) -> bool:
        """Record a store the host could not open; True when this call recorded it."""
        key = f"noted:{label}"
        if key in self.messages:
            return False
        self.messages[key] = str(message)
        return True

    def take(self) -> list[str]:
        """The messages not told yet, each told once."""
        fresh = [msg for label, msg in self.messages.items() if label not in self.reported]
        self.reported.update(self.messages)
        return fresh
