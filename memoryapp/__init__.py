"""memoryapp: the long-term memory of AI agents, and its Django back office.

``from memoryapp import MemoryManager, SensitiveMemoryError`` is the host-facing
entry point (docs/behaviour.md §13). The manager is imported lazily so that importing the
package never touches the app registry before Django is set up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["MemoryManager", "SensitiveMemoryError", "WipeResult", "RecallCandidate"]

if TYPE_CHECKING:
    from memoryapp.facade import MemoryManager, RecallCandidate, WipeResult
    from memoryapp.rules.errors import SensitiveMemoryError


def __getattr__(name: str) -> Any:
    if name == "SensitiveMemoryError":
        from memoryapp.rules.errors import SensitiveMemoryError

        return SensitiveMemoryError
    if name in ("MemoryManager", "WipeResult", "RecallCandidate"):
        from memoryapp import facade

        return getattr(facade, name)
    raise AttributeError(f"module 'memoryapp' has no attribute {name!r}")
