"""Database errors of the Agentao store: Django's classes that are also ``sqlite3``'s.

Agentao's ``MemoryManager`` degrades a store that cannot be read (docs/behaviour.md §11)
only for exceptions it recognises as ``sqlite3.DatabaseError`` — it matches
the class by module name, so Django's wrappers (and any PostgreSQL error)
would propagate and break the agent's turn. Every database error leaving
``DjangoMemoryStore`` is therefore re-raised as a class that is both the
Django error and the matching ``sqlite3`` one, so either side's ``except``
catches it; all of them are :class:`StoreDatabaseError`.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

_T = TypeVar("_T")


class StoreDatabaseError(DatabaseError, sqlite3.DatabaseError):
    """A database error from a :class:`DjangoMemoryStore` (Django and ``sqlite3`` compatible)."""


class StoreOperationalError(StoreDatabaseError, OperationalError, sqlite3.OperationalError):
    """The database is unavailable, locked or failed an operation."""


class StoreIntegrityError(StoreDatabaseError, IntegrityError, sqlite3.IntegrityError):
    """A constraint was violated."""


class StoreProgrammingError(StoreDatabaseError, ProgrammingError, sqlite3.ProgrammingError):
    """A schema problem: a missing table or column, bad SQL."""


class StoreDataError(StoreDatabaseError, DataError, sqlite3.DataError):
    """A value did not fit its column."""


class StoreInternalError(StoreDatabaseError, InternalError, sqlite3.InternalError):
    """The database reported an internal error."""


class StoreNotSupportedError(StoreDatabaseError, NotSupportedError, sqlite3.NotSupportedError):
    """The database does not support an operation."""


class StoreInterfaceError(StoreDatabaseError, InterfaceError, sqlite3.OperationalError):
    """The connection was lost (reported to Agentao as an operational error)."""


_COMPAT: tuple[tuple[type[Error], type[Exception]], ...] = (
    (OperationalError, StoreOperationalError),
    (IntegrityError, StoreIntegrityError),
    (ProgrammingError, StoreProgrammingError),
    (DataError, StoreDataError),
    (InternalError, StoreInternalError),
    (NotSupportedError, StoreNotSupportedError),
    (InterfaceError, StoreInterfaceError),
    (Error, StoreDatabaseError),
)
_COMPAT_CLASSES = tuple(c for _, c in _COMPAT)


def translated(method: Callable[..., _T]) -> Callable[..., _T]:
    """Re-raise Django database errors as their ``sqlite3``-compatible twins."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return method(*args, **kwargs)
        except _COMPAT_CLASSES:
            raise
        except Error as exc:
            for django_class, compat_class in _COMPAT:
                if isinstance(exc, django_class):
                    raise compat_class(str(exc)) from exc
            raise  # pragma: no cover - Error is the last entry

    return wrapper


__all__ = [
    "StoreDataError",
    "StoreDatabaseError",
    "StoreIntegrityError",
    "StoreInterfaceError",
    "StoreInternalError",
    "StoreNotSupportedError",
    "StoreOperationalError",
    "StoreProgrammingError",
    "translated",
]
