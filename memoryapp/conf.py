"""Typed, live accessors for the ``MEMORYAPP_*`` settings (never cached, never written)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from .guards import MemoryGuard


def guard_class_path() -> str:
    """``MEMORYAPP_GUARD``: dotted path of the guard class used everywhere.

    The manager, the admin and the API all build their guard from this, so a
    host's stricter subclass of :class:`memoryapp.guards.MemoryGuard` applies
    to every write path. Default ``"memoryapp.guards.MemoryGuard"``.
    """
    return getattr(settings, "MEMORYAPP_GUARD", "memoryapp.guards.MemoryGuard")


@lru_cache(maxsize=8)
def _import_guard(path: str) -> type[MemoryGuard]:
    return import_string(path)


def get_guard() -> MemoryGuard:
    """Return a fresh instance of the configured guard class."""
    return _import_guard(guard_class_path())()


def user_database() -> str | None:
    """``MEMORYAPP_USER_DATABASE``: alias of the database holding user-scope memories.

    The seed keeps user memories in a second, user-global store. ``None`` (the
    default) keeps both scopes in the manager's ``using`` database.
    """
    return getattr(settings, "MEMORYAPP_USER_DATABASE", None) or None


def auto_source_cap() -> int:
    """``MEMORYAPP_AUTO_CAP``: how many ``auto``-source memories a scope keeps (default 50)."""
    return int(getattr(settings, "MEMORYAPP_AUTO_CAP", 50))


def recall_cache_bytes() -> int:
    """``MEMORYAPP_RECALL_CACHE_BYTES``: memory cap of the per-namespace recall indexes.

    Least recently used namespace indexes are dropped past it. Default 256 MiB.
    """
    return int(getattr(settings, "MEMORYAPP_RECALL_CACHE_BYTES", 256 * 1024 * 1024))


def ephemeral_database() -> str:
    """``MEMORYAPP_EPHEMERAL_DATABASE``: alias of the in-memory store of ephemeral managers.

    Registered on first use when the project does not declare it (declaring it
    in ``DATABASES`` lets test suites list it). Default ``"memoryapp_ephemeral"``.
    """
    return getattr(settings, "MEMORYAPP_EPHEMERAL_DATABASE", "memoryapp_ephemeral")


SUPPORTED_VENDORS = ("sqlite", "postgresql")
