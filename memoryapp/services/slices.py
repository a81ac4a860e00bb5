"""Which slices of the tables a service call works on: a project store, at most one user store."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Q

from memoryapp.conf import user_database
from memoryapp.models import Memory, Scope
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import SCOPES


@dataclass(frozen=True)
class StoreSlice:
    """One (database alias, namespace, scope) slice of the tables that a manager owns."""

    label: str
    using: str
    namespace: str
    scope: str

    def rows(self):
        """Every row of this slice (live and soft-deleted)."""
        return Memory.objects.using(self.using).filter(namespace=self.namespace, scope=self.scope)


@dataclass(frozen=True)
class Binding:
    """The stores of one project namespace and at most one user namespace (docs/behaviour.md §2).

    What a :class:`~memoryapp.facade.MemoryManager` binds, as a value the services
    take: ``subject`` is the user namespace (the provenance written on rows), None
    without a user store.
    """

    project_store: StoreSlice
    user_store: StoreSlice | None

    @classmethod
    def of(
        cls,
        *,
        project: str,
        user: str | None = None,
        using: str | None = None,
        user_using: str | None = None,
    ) -> Binding:
        """The binding of ``project`` (and ``user``) on the given database aliases.

        ``user_using`` defaults to ``MEMORYAPP_USER_DATABASE``, else ``using``.
        """
        using = using or DEFAULT_DB_ALIAS
        return cls(
            StoreSlice("project store", using, project, Scope.PROJECT),
            StoreSlice("user store", user_using or user_database() or using, user, Scope.USER)
            if user is not None
            else None,
        )

    @property
    def subject(self) -> str | None:
        """The user namespace: the provenance a write records."""
        return self.user_store.namespace if self.user_store is not None else None

    def stores(self, scope: str | None = None) -> list[StoreSlice]:
        """The stores of ``scope`` (None = both), project first.

        Raises:
            MemoryValidationError: an unknown scope.
        """
        if scope is not None and scope not in SCOPES:
            raise MemoryValidationError(
                f"Unknown scope {scope!r}: expected one of {', '.join(SCOPES)}"
            )
        stores = [self.project_store]
        if self.user_store is not None:
            stores.append(self.user_store)
        return [s for s in stores if scope is None or s.scope == scope]

    def store_for(self, scope: str) -> StoreSlice:
        """Where a write of ``scope`` lands: the user store, or the project store without one."""
        if scope == Scope.USER and self.user_store is not None:
            return self.user_store
        return self.project_store


def live_filter(stores: list[StoreSlice]) -> dict[str, Q]:
    """One OR-ed filter per database alias, so two stores on one database cost one query."""
    by_alias: dict[str, Q] = {}
    for s in stores:
        q = Q(namespace=s.namespace, scope=s.scope)
        by_alias[s.using] = by_alias[s.using] | q if s.using in by_alias else q
    return by_alias
