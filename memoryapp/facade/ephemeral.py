"""A throw-away in-memory store: the seed's "memory disabled" mode and the sub-agent's sandbox.

One shared-cache in-memory SQLite database per process holds every ephemeral
manager's rows, each under a random namespace that is hard-deleted when the
manager is closed or collected. Nothing ever reaches a file.
"""

from __future__ import annotations

import logging
import secrets
import sys
import threading
from importlib import import_module

from django.db import connections

from memoryapp.conf import ephemeral_database
from memoryapp.db.routers import EPHEMERAL_MODELS

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_ready: set[str] = set()


def ephemeral_alias() -> str:
    """The alias of the in-memory database, registered and given its tables on first use.

    Raises:
        DatabaseOperationForbidden: inside a Django or pytest-django test that was not
            allowed this alias; the message says which marker or attribute to add.
    """
    alias = ephemeral_database()
    _require_allowed_in_tests(alias)
    with _lock:
        if alias not in connections.settings:
            connections.settings[alias] = _settings_for(alias)
        if alias not in _ready:
            _ensure_schema(alias)
            _ready.add(alias)
    return alias


def _require_allowed_in_tests(alias: str) -> None:
    """Fail at once, and clearly, when a test's database guard forbids ``alias``.

    Django's test cases (and so pytest-django's ``django_db`` marker) replace the
    cursor of every alias the test did not ask for. Without this check the first
    query deep inside a sub-agent's write would fail with a message about an
    alias the host never named.
    """
    testcases = sys.modules.get("django.test.testcases")
    if testcases is None or alias not in connections.settings:
        return  # not under a test runner, or not yet registered (so not guarded)
    failure = getattr(testcases, "_DatabaseFailure", None)
    if failure is not None and isinstance(getattr(connections[alias], "cursor", None), failure):
        raise testcases.DatabaseOperationForbidden(
            f"MemoryManager.child() and MemoryManager.ephemeral() use the throw-away "
            f"in-memory database {alias!r}, which this test may not use. Allow it: "
            f"@pytest.mark.django_db(databases=['default', {alias!r}]) with pytest-django, "
            f"or databases = {{'default', {alias!r}}} on a Django TestCase."
        )


def new_namespace() -> str:
    """A fresh namespace no persistent store uses."""
    return f"~ephemeral/{secrets.token_hex(8)}"


def discard(alias: str, namespaces: tuple[str, ...]) -> None:
    """Hard-delete every row of the given namespaces from the ephemeral database."""
    from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary

    try:
        for model in (Memory, SessionSummary, ReviewItem, MemoryEvent):
            model.objects.using(alias).filter(namespace__in=namespaces).delete()
    except Exception:  # called from finalizers: never raise there
        logger.debug("ephemeral store cleanup failed", exc_info=True)


def _settings_for(alias: str) -> dict:
    base = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": f"file:{alias}?mode=memory&cache=shared",
        "TEST": {"NAME": f"file:{alias}_test?mode=memory&cache=shared"},
    }
    # Fill Django's per-alias defaults (ATOMIC_REQUESTS, TIME_ZONE, ...).
    filled = connections.configure_settings({alias: base})
    return filled[alias]


def _ensure_schema(alias: str) -> None:
    """Create the memory tables and the counter triggers unless they exist (no migrations:
    the database lives only as long as the process). The tables are the router's
    (``EPHEMERAL_MODELS``): a test runner that migrates the alias makes the same ones."""
    from django.apps import apps

    models = [apps.get_model("memoryapp", name) for name in EPHEMERAL_MODELS]
    connection = connections[alias]
    existing = set(connection.introspection.table_names())
    if all(m._meta.db_table in existing for m in models):
        return
    with connection.schema_editor() as editor:
        for model in models:
            if model._meta.db_table not in existing:
                editor.create_model(model)
        # The same frozen trigger SQL the migration installs.
        for migration in ("0002_change_counter_triggers", "0004_slice_change_counters"):
            triggers = import_module(f"memoryapp.migrations.{migration}")
            for statement in triggers.FORWARDS["sqlite"]:
                editor.execute(statement, params=None)
