"""Database router: the ephemeral in-memory store takes only memoryapp's tables."""

from __future__ import annotations

from memoryapp.conf import ephemeral_database


class EphemeralRouter:
    """Keep other apps' migrations out of the ephemeral database; decide nothing else."""

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        """Only memoryapp migrates into the ephemeral alias."""
        if db == ephemeral_database():
            return app_label == "memoryapp"
        return None
