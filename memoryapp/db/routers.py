"""Database routers: the ephemeral store takes only the memory tables; reads may go to replicas."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

from memoryapp.conf import ephemeral_database, replica_databases
from memoryapp.db.replicas import read_alias

# The models of the throw-away store (lower-case model names, as migrations name them):
# the rows of ephemeral managers and sub-agents, and what their writes' triggers update.
# Nothing that points at another app (receipts, export records, subject requests name
# auth_user, which stays out) and nothing an in-memory store never uses (recall snapshots).
# facade/ephemeral.py creates these same tables when no migration ran.
EPHEMERAL_MODELS: tuple[str, ...] = (
    "schemameta",
    "memory",
    "memoryevent",
    "reviewitem",
    "sessionsummary",
    "slicechange",
)


class EphemeralRouter:
    """Keep everything but the memory tables out of the ephemeral database; decide nothing else."""

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        """Only memoryapp's memory tables migrate into the ephemeral alias.

        An operation that names no model (the trigger SQL of the memory tables) follows its
        app; one that touches another table names it in its hints (``model_name``).
        """
        if db != ephemeral_database():
            return None
        if app_label != "memoryapp":
            return False
        return model_name is None or model_name.lower() in EPHEMERAL_MODELS


class ReplicaRouter:
    """Send memoryapp's lag-tolerant reads to a replica; writes and migrations to the primary.

    Only reads inside :func:`memoryapp.db.read_your_writes.lag_tolerant` may leave the
    primary, and only to a replica :func:`memoryapp.db.replicas.read_alias` judges
    current enough for the caller. Querysets with an explicit ``using`` bypass routers.
    """

    def db_for_read(self, model, **hints):
        """A replica for memoryapp's models inside a lag-tolerant scope; else no opinion."""
        if model._meta.app_label != "memoryapp" or not replica_databases():
            return None
        alias = read_alias(DEFAULT_DB_ALIAS)
        return alias if alias != DEFAULT_DB_ALIAS else None

    def db_for_write(self, model, **hints):
        """Never a replica: a write on a replica alias would fail (read-only)."""
        return None

    def allow_relation(self, obj1, obj2, **hints):
        """Rows read from a replica relate to rows of the primary (the same data)."""
        pair = {obj1._state.db, obj2._state.db}
        if pair <= {DEFAULT_DB_ALIAS, *replica_databases()}:
            return True
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        """Migrations run on the primary only; a replica replays them."""
        if db in replica_databases():
            return False
        return None
