"""System checks: the app refuses to run on a database vendor it has no trigger SQL for."""

from __future__ import annotations

from django.core import checks
from django.db import connections

from .conf import SUPPORTED_VENDORS, guard_class_path


@checks.register(checks.Tags.database, checks.Tags.compatibility)
def check_database_vendor(app_configs=None, databases=None, **kwargs):
    """memoryapp.E001: every configured database must be SQLite or PostgreSQL."""
    errors = []
    for alias in connections:
        vendor = connections[alias].vendor
        if vendor not in SUPPORTED_VENDORS:
            errors.append(
                checks.Error(
                    f"Database {alias!r} uses the {vendor!r} backend, which memoryapp does not "
                    "support: the change-counter triggers exist only for SQLite and PostgreSQL.",
                    hint="Point DATABASE_URL at SQLite or PostgreSQL.",
                    id="memoryapp.E001",
                )
            )
    return errors


@checks.register()
def check_guard_setting(app_configs=None, **kwargs):
    """memoryapp.E002: MEMORYAPP_GUARD must name an importable MemoryGuard subclass."""
    from django.utils.module_loading import import_string

    from .guards import MemoryGuard

    path = guard_class_path()
    try:
        cls = import_string(path)
    except ImportError as exc:
        return [
            checks.Error(f"MEMORYAPP_GUARD {path!r} cannot be imported: {exc}", id="memoryapp.E002")
        ]
    if not (isinstance(cls, type) and issubclass(cls, MemoryGuard)):
        return [
            checks.Error(
                f"MEMORYAPP_GUARD {path!r} is not a subclass of memoryapp.guards.MemoryGuard.",
                id="memoryapp.E002",
            )
        ]
    return []
