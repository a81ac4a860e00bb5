"""What the memory's LLM tools hand back, in-process and over HTTP alike.

The facade (:class:`memoryapp.facade.MemoryManager`) and the remote client
(:class:`memoryapp.clients.MemoryClient`) answer the same tool calls; the model
must read the same result from both, so the recall hit's shape and the save
tool's replies are written here once. Pure Python: the client imports it
without Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["REFUSED_SECRET", "RecallCandidate", "save_failed", "saved"]

REFUSED_SECRET = "Refused to save: content appears to contain sensitive credentials"


@dataclass(frozen=True)
class RecallCandidate:
    """A scored recall hit (docs/behaviour.md §13); ``excerpt`` is the content's first 200 chars."""

    memory_id: str
    scope: str
    type: str
    title: str
    excerpt: str
    score: float
    reasons: list[str]


def saved(key_normalized: str, notes: Iterable[str] = ()) -> str:
    """The save tool's reply once the memory is stored: its key, then any notes in brackets."""
    notes = list(notes)
    return f"Saved memory: {key_normalized}" + (f" ({'; '.join(notes)})" if notes else "")


def save_failed(reason: object) -> str:
    """The save tool's reply when the memory was not stored (the turn goes on)."""
    return f"Error saving memory: {reason}"
