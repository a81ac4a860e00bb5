"""``VendorSQL``: a migration operation that runs literal SQL chosen by the connection's vendor."""

from __future__ import annotations

from django.db import NotSupportedError, router
from django.db.migrations.operations.base import Operation


class VendorSQL(Operation):
    """Run per-vendor SQL statements forwards and backwards.

    The SQL is frozen in the migration file as literal strings keyed by
    ``connection.vendor``. The vendor is read from the schema editor's
    connection — never from the import-time default connection — so one
    migration serves every database alias. A vendor with no entry fails
    loudly instead of silently skipping the triggers the app depends on.

    Args:
        forwards: vendor → statements to run on migrate (one statement per item).
        backwards: vendor → statements that undo them (idempotent: ``IF EXISTS``).
        description: shown by ``migrate --plan`` and ``sqlmigrate``.
        hints: passed to the routers' ``allow_migrate`` (``model_name``: the table the SQL
            needs, so that a database without that model skips it), as ``RunSQL``'s are.
    """

    reduces_to_sql = True
    reversible = True

    def __init__(
        self,
        forwards: dict[str, list[str]],
        backwards: dict[str, list[str]],
        description: str = "Vendor-specific SQL",
        hints: dict[str, str] | None = None,
    ) -> None:
        self.forwards = forwards
        self.backwards = backwards
        self.description = description
        self.hints = hints or {}

    def deconstruct(self):
        """Serialise the operation for the migration autodetector."""
        kwargs = {
            "forwards": self.forwards,
            "backwards": self.backwards,
            "description": self.description,
        }
        if self.hints:
            kwargs["hints"] = self.hints
        return (self.__class__.__qualname__, [], kwargs)

    def state_forwards(self, app_label, state) -> None:
        """Raw SQL changes no model state."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        """Run the forward statements for this connection's vendor."""
        self._run(app_label, schema_editor, self.forwards)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        """Run the backward statements for this connection's vendor."""
        self._run(app_label, schema_editor, self.backwards)

    def describe(self) -> str:
        """One-line description for ``migrate --plan``."""
        return self.description

    def _run(self, app_label, schema_editor, sql_by_vendor: dict[str, list[str]]) -> None:
        connection = schema_editor.connection
        if not router.allow_migrate(connection.alias, app_label, **self.hints):
            return
        vendor = connection.vendor
        if vendor not in sql_by_vendor:
            raise NotSupportedError(
                f"memoryapp has no trigger SQL for the {vendor!r} database vendor "
                f"(supported: {', '.join(sorted(sql_by_vendor))})."
            )
        for statement in sql_by_vendor[vendor]:
            schema_editor.execute(statement, params=None)
