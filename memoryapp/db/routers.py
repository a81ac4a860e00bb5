"""Database routers: the ephemeral in-memory store's migrations, and the read replicas."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

from memoryapp.conf import ephemeral_database, replica_databases
from memoryapp.db.replicas import read_alias


class EphemeralRouter:
    """Keep other apps' migrations out of the ephemeral database; decide nothing else."""

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        """Only memoryapp migrates into the ephemeral alias."""
        if db == ephemeral_database():
            return app_label == "memoryapp"
        return None


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
