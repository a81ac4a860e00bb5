"""The errors a refused write raises: both are ``ValueError`` subclasses that name their field.

``field`` is the one way a refusal says which input it is about. Two callers
read it differently, because they need different things: the write path
(:meth:`memoryapp.rules.guard.MemoryGuard.check`, :func:`memoryapp.writes.store.prepare`)
stops at the first refusal and raises it — the admin's form puts that one
beside ``error.field``; :meth:`~memoryapp.rules.guard.MemoryGuard.refusals` runs
every check of a write and collects each refusal under the name of the input it
checked (the same name its ``field`` carries), so the API's 400 lists all of
them at once. Both attach the name with :func:`about`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MemoryValidationError", "SensitiveMemoryError", "about"]

_SENSITIVE_MESSAGE = "content appears to contain sensitive credentials"


class MemoryValidationError(ValueError):
    """A memory was refused because of bad input; ``str(error)`` is the reason.

    Attributes:
        field: The input the refusal is about (``key``, ``content``, ``tags``,
            ``scope``, ``type``, ``source``), or None when the raiser did not say.
            Forms and serializers attach the message to it instead of guessing
            from the wording.
    """

    field: str | None = None  # a class default: a host's subclass may skip __init__

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self.field = field


class SensitiveMemoryError(ValueError):
    """A memory was refused because its content looks like a credential.

    The message is always the same fixed sentence and never includes the refused text.

    Attributes:
        field: The input that held the credential (``key``, ``content``, ``tags``),
            or None when the raiser did not say.
    """

    field: str | None = None

    def __init__(self, message: str = _SENSITIVE_MESSAGE, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@contextmanager
def about(field: str) -> Iterator[None]:
    """Attribute a refusal raised inside the block to ``field``, unless it names one already.

    The checks run by the write path are often generic (a host's
    ``detect_sensitive`` scans any text), so the caller that knows which input it
    handed over names it.

    Args:
        field: The input being checked.
    """
    try:
        yield
    except (MemoryValidationError, SensitiveMemoryError) as exc:
        if getattr(exc, "field", None) is None:
            exc.field = field
        raise
