"""The query vocabulary of the models: chainable, side-effect-free querysets."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce

# What a queryset may recall over: nothing chosen yet, one namespace (and scope),
# or a queryset narrowed some other way (recall would silently ignore that filter,
# so it refuses instead).
_NARROWED = object()

# ``Memory.objects.upsert`` and ``.recall`` run the store's write and the facade's
# recall, which import the models: importing them here would close a cycle
# (models -> querysets -> store -> models). memoryapp.services.queryset_methods installs them
# at start-up instead (AppConfig.ready).
_INSTALLED: dict[str, Callable[..., Any]] = {}


def install(*, upsert: Callable[..., Any], recall: Callable[..., Any]) -> None:
    """Give ``Memory.objects`` its write and recall code
    (see :mod:`memoryapp.services.queryset_methods`).

    Args:
        upsert: ``upsert(using, key, value, tags, scope, type, source, *, namespace,
            subject, guard, actor)`` returning the written memory.
        recall: ``recall(using, namespace, scopes, query, messages, top_k, exclude_ids)``
            returning the candidates.
    """
    _INSTALLED.update(upsert=upsert, recall=recall)


def _installed(name: str) -> Callable[..., Any]:
    try:
        return _INSTALLED[name]
    except KeyError:
        raise RuntimeError(
            f"Memory.objects.{name}() needs the memoryapp app to be ready (django.setup())"
        ) from None


class MemoryQuerySet(models.QuerySet):
    """Queries over ``memories``; ``in_namespace(ns)`` querysets also :meth:`recall`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._recall_slice: tuple[str, str | None] | object | None = None

    def _clone(self):
        clone = super()._clone()
        clone._recall_slice = self._recall_slice
        return clone

    def _filter_or_exclude(self, negate, args, kwargs):
        clone = super()._filter_or_exclude(negate, args, kwargs)
        clone._recall_slice = _NARROWED
        return clone

    def _keeping(self, clone: MemoryQuerySet, recall_slice) -> MemoryQuerySet:
        clone._recall_slice = recall_slice
        return clone

    def live(self) -> MemoryQuerySet:
        """Rows that are not soft-deleted."""
        # Recall only ever sees live rows: this keeps the queryset recallable.
        return self._keeping(self.filter(deleted_at__isnull=True), self._recall_slice)

    def deleted(self) -> MemoryQuerySet:
        """Soft-deleted rows only."""
        return self.filter(deleted_at__isnull=False)

    def in_namespace(self, namespace: str) -> MemoryQuerySet:
        """Rows owned by one namespace (exact match)."""
        chosen = (namespace, None) if self._recall_slice is None else _NARROWED
        return self._keeping(self.filter(namespace=namespace), chosen)

    def in_scope(self, scope: str | None) -> MemoryQuerySet:
        """Rows of one scope; ``None`` keeps every scope."""
        if scope is None:
            return self
        chosen = self._recall_slice
        if isinstance(chosen, tuple) and chosen[1] is None:
            chosen = (chosen[0], scope)
        else:
            chosen = _NARROWED
        return self._keeping(self.filter(scope=scope), chosen)

    def recall(
        self, query: str, messages=None, top_k: int = 5, exclude_ids=None, ranking=None
    ) -> list:
        """The ``top_k`` memories of this namespace scored against ``query`` (docs/behaviour.md §5).

        ``Memory.objects.in_namespace("acme/web").recall(q)`` gives the candidates
        ``MemoryManager(project="acme/web").recall(q)`` gives — one implementation
        (:func:`memoryapp.services.prompt.recall`, installed by
        :mod:`memoryapp.services.queryset_methods`) behind both, on the same
        per-slice indexes. Both scopes of the namespace are ranked unless
        ``in_scope`` chose one (a project namespace holds only project rows).

        ``ranking``: ``agentao``, ``hybrid`` or ``semantic`` (None: ``MEMORYAPP_RECALL_RANKING``).

        Raises:
            ValueError: ``ranking`` names no ranking.
            TypeError: the queryset is not exactly ``in_namespace(ns)`` (optionally
                ``.live()`` and ``.in_scope(s)``): recall ranks a whole slice and
                would ignore any other filter.
        """
        chosen = self._recall_slice
        if not isinstance(chosen, tuple):
            raise TypeError(
                "recall() ranks whole namespaces: call it on "
                "Memory.objects.in_namespace(ns) (optionally .in_scope(s)) with no other filter"
            )
        namespace, scope = chosen
        scopes = (scope,) if scope is not None else ("project", "user")
        return _installed("recall")(
            self.db, namespace, scopes, query, messages, top_k, exclude_ids, ranking
        )

    def search_prefilter(self, query: str) -> MemoryQuerySet:
        """Rows whose title, content, key, tags or keywords text contains ``query``.

        A superset of :func:`memoryapp.services.search.matches` (the JSON text of the
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

    def with_other_proposers(self) -> ReviewItemQuerySet:
        """Annotated ``other_proposers``: for a project-scope item, how many other items of
        its namespace, key and status there are (one per other contributing subject,
        as the queue folds per subject); 0 for a user-scope item."""
        siblings = (
            self.model._default_manager.filter(
                namespace=models.OuterRef("namespace"),
                scope=models.OuterRef("scope"),
                key_normalized=models.OuterRef("key_normalized"),
                status=models.OuterRef("status"),
                scope__exact="project",
            )
            .exclude(pk=models.OuterRef("pk"))
            .order_by()
            .values("namespace")
            .annotate(n=models.Count("pk"))
            .values("n")
        )
        return self.annotate(
            other_proposers=Coalesce(
                models.Subquery(siblings, output_field=models.IntegerField()), 0
            )
        )


# A module-level name, so the django-stubs plugin can type the manager's queryset methods.
_MemoryManagerBase = models.Manager.from_queryset(MemoryQuerySet)


class MemoryObjects(_MemoryManagerBase):
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
        """Validate, classify and write a memory in ``namespace`` (docs/behaviour.md §2); return it.

        Raises:
            MemoryValidationError: invalid input.
            SensitiveMemoryError: the content looks like a credential.
        """
        return _installed("upsert")(
            self.db,
            key,
            value,
            tags,
            scope,
            type,
            source,
            namespace=namespace,
            subject=subject,
            guard=guard,
            actor=actor,
        )
