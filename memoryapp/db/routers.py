"""Database router: the ephemeral in-memory store takes only the memory tables."""

from __future__ import annotations

from memoryapp.conf import ephemeral_database

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
