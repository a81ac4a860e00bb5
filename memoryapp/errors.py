"""The errors a refused write raises: both are ``ValueError`` subclasses."""

from __future__ import annotations

__all__ = ["MemoryValidationError", "SensitiveMemoryError"]

_SENSITIVE_MESSAGE = "content appears to contain sensitive credentials"


class MemoryValidationError(ValueError):
    """A memory was refused because of bad input; ``str(error)`` is the reason."""


class SensitiveMemoryError(ValueError):
    """A memory was refused because its content looks like a credential.

    The message is always the same fixed sentence and never includes the refused text.
    """

    def __init__(self, message: str = _SENSITIVE_MESSAGE) -> None:
        super().__init__(message)
