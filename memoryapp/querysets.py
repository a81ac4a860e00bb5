"""The query vocabulary of the models: chainable, side-effect-free querysets."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models
from django.db.models import Q


class MemoryQuerySet(models.QuerySet):
    """Queries over ``memories``."""

    def live(self) -> MemoryQuerySet:
        """Rows that are not soft-deleted."""
        return self.filter(deleted_at__isnull=True)

    def deleted(self) -> MemoryQuerySet:
        """Soft-deleted rows only."""
        return self.filter(deleted_at__isnull=False)

    def in_namespace(self, namespace: str) -> MemoryQuerySet:
        """Rows owned by one namespace (exact match)."""
        return self.filter(namespace=namespace)

    def in_scope(self, scope: str | None) -> MemoryQuerySet:
        """Rows of one scope; ``None`` keeps every scope."""
        return self if scope is None else self.filter(scope=scope)

    def search_prefilter(self, query: str) -> MemoryQuerySet:
        """Rows whose title, content, key, tags or keywords text contains ``query``.

        A superset of :func:`memoryapp.search.matches` (the JSON text of the
        tag and keyword columns may match across two items); Django's
        ``icontains`` escapes ``%`` and ``_``, so they match literally.
        """
        q = query.strip()
        return self.filter(
            Q(title__icontains=q)
            | Q(content__icontains=q)
            | Q(key_normalized__icontains=q)
            | Q(tags_json__icontains=q)
            | Q(keywords_json__icontains=q)
        )

    def tagged_prefilter(self, tag: str) -> MemoryQuerySet:
        """Rows whose tag column mentions ``tag`` (superset; exact check in Python)."""
        return self.filter(tags_json__icontains=tag.strip())


class SessionSummaryQuerySet(models.QuerySet):
    """Queries over ``session_summaries``."""

    def in_namespace(self, namespace: str) -> SessionSummaryQuerySet:
        """Summaries of one namespace."""
        return self.filter(namespace=namespace)

    def for_session(self, session_id: str) -> SessionSummaryQuerySet:
        """Summaries of one session."""
        return self.filter(session_id=session_id)


class ReviewItemQuerySet(models.QuerySet):
    """Queries over ``memory_review_queue``."""

    def in_namespace(self, namespace: str) -> ReviewItemQuerySet:
        """Items of one namespace."""
        return self.filter(namespace=namespace)

    def with_status(self, status: str | Iterable[str] | None) -> ReviewItemQuerySet:
        """Items with a status (or any of several); ``None`` keeps all."""
        if status is None:
            return self
        if isinstance(status, str):
            return self.filter(status=status)
        return self.filter(status__in=list(status))

    def pending(self) -> ReviewItemQuerySet:
        """Items waiting for a decision."""
        return self.filter(status="pending")


class MemoryObjects(models.Manager.from_queryset(MemoryQuerySet)):
    """``Memory.objects``: the queryset vocabulary plus the write and recall entry points."""

    def upsert(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        scope: str | None = None,
        type: str | None = None,
        source: str = "explicit",
        *,
        namespace: str = "",
        subject: str | None = None,
        guard=None,
        actor: str = "",
    ):
        """Validate, classify and write one memory in ``namespace`` (SPEC §2); returns it.

        Raises:
            MemoryValidationError: invalid input.
            SensitiveMemoryError: the content looks like a credential.
        """
        from . import store
        from .conf import get_guard

        prepared = store.prepare(guard or get_guard(), key, value, tags, scope, type, source)
        result = store.write(
            prepared, using=self.db, namespace=namespace, subject=subject, actor=actor
        )
        return result.memory
