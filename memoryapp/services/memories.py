"""Memory writes: upsert, rename, soft delete, restore, clear and import (docs/behaviour.md §2, §3).

Each write of known slices runs inside a change window and folds itself into a
cached recall index (:meth:`~memoryapp.recall.cache.RecallIndexes.apply_own_write`), so
the writer's next recall needs no query; a write elsewhere is caught up through
the change counters. The rules (guard, classification, SQL) stay in
:mod:`memoryapp.writes.store` and :mod:`memoryapp.writes.bulk`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from memoryapp.fields import now
from memoryapp.models import Memory, Scope, Source
from memoryapp.recall.cache import INDEXES, change_window
from memoryapp.rules import validation
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services.slices import Binding, StoreSlice
from memoryapp.writes import bulk, store

logger = logging.getLogger("memoryapp.facade")

SCOPE_DOWNGRADE_WARNING = (
    "User scope was asked for, but no user namespace was given: "
    "the memory was stored in the project scope."
)


@validation.checked_arguments
def write(
    *,
    prepared: store.Prepared,
    using: str,
    namespace: str,
    subject: str | None = None,
    actor: str = "",
) -> store.UpsertResult:
    """Write a prepared memory into ``namespace`` (no scope downgrade), keeping indexes current.

    The one write of a guarded memory: :func:`upsert`, the admin's add form and
    ``Memory.objects.upsert`` all end here.
    """
    return _write_in_window(
        prepared, using=using, namespace=namespace, subject=subject, actor=actor
    )


def _write_in_window(
    prepared: store.Prepared,
    *,
    using: str,
    namespace: str,
    subject: str | None,
    actor: str,
    rename_id: str | None = None,
) -> store.UpsertResult:
    """The write (after renaming ``rename_id`` to its key, if given) in the slice's change
    window, then folded into a cached index of the slice."""
    with change_window(using, [(namespace, prepared.scope)], subjects=[subject]) as window:
        if rename_id is not None:
            subject = _rename(using, rename_id, prepared, actor)
        result = store.write(
            prepared,
            using=using,
            namespace=namespace,
            subject=subject,
            actor=actor,
            savepoint=False,  # change_window rolls back on any error
        )
    INDEXES.apply_own_write(window, namespace, prepared.scope, [result.memory], result.capped)
    return result


def _rename(using: str, memory_id: str, prepared: store.Prepared, actor: str) -> str | None:
    """Move a row (locked) to ``prepared``'s key if it differs, with a ``rename`` event.

    Returns the row's subject: the write that follows keeps its provenance.
    """
    row = Memory.objects.using(using).select_for_update().get(pk=memory_id)
    if row.key_normalized != prepared.key_normalized:
        row.key_normalized, row.title = prepared.key_normalized, prepared.title
        row.updated_at = now()
        row.save(using=using, update_fields=["key_normalized", "title", "updated_at"])
        store.log_event(using, row.id, "rename", namespace=row.namespace, actor=actor)
    return row.subject


def downgrade(prepared: store.Prepared, binding: Binding) -> store.Prepared:
    """No user store: a user-scope write lands in the project scope (docs/behaviour.md §2).

    The log lines never carry the key or the value.
    """
    if prepared.scope != Scope.USER or binding.user_store is not None:
        return prepared
    if prepared.scope_explicit:
        logger.warning(
            "user scope requested but this manager has no user store; "
            "the memory was saved in the project scope"
        )
    else:
        logger.debug("inferred user scope without a user store; saved in the project scope")
    return replace(prepared, scope=Scope.PROJECT)


@validation.checked_arguments
def upsert(
    *,
    binding: Binding,
    guard: MemoryGuard,
    key: str,
    value: str,
    tags: Iterable[str] | None = (),
    scope: str | None = None,
    type: str | None = None,
    source: str = Source.EXPLICIT,
    actor: str = "",
    title: str | None = None,
) -> store.UpsertResult:
    """Validate, classify and save a memory in ``binding``'s stores (docs/behaviour.md §2).

    ``title`` (guarded) replaces the title derived from ``key``.

    The result's ``warnings`` tell a cut key and a user scope that landed in the
    project scope.

    Raises:
        MemoryValidationError: invalid key, content, scope, type or tags.
        SensitiveMemoryError: the content looks like a credential.
    """
    asked = store.prepare(guard, key, value, tags, scope, type, source, title=title)
    prepared = downgrade(asked, binding)
    target = binding.store_for(prepared.scope)
    result = write(
        prepared=prepared,
        using=target.using,
        namespace=target.namespace,
        subject=binding.subject,
        actor=actor,
    )
    warnings = []
    if validation.key_is_cut(key):
        warnings.append(validation.KEY_CUT_WARNING)
    if asked.scope_explicit and asked.scope != prepared.scope:
        warnings.append(SCOPE_DOWNGRADE_WARNING)
    return replace(result, warnings=tuple(warnings)) if warnings else result


@validation.checked_arguments
def edit(
    *, memory_id: str, prepared: store.Prepared, using: str, actor: str = ""
) -> store.UpsertResult:
    """Rewrite one memory from a guarded edit, renaming it first when the key changed.

    A rename moves the row to its new key (same id, ``created_at`` kept, a
    ``rename`` event) so that the write updates it in place; both run in one
    change window, so a cached index of the slice follows without a rebuild.
    Namespace and provenance stay the row's; the scope is the row's too (the
    admin's form prepares the edit in it).
    """
    namespace = Memory.objects.using(using).values_list("namespace", flat=True).get(pk=memory_id)
    return _write_in_window(
        prepared, using=using, namespace=namespace, subject=None, actor=actor, rename_id=memory_id
    )


@validation.checked_arguments
def soft_delete(
    *, store_slice: StoreSlice, ids: list[str], actor: str = "", reason: str = ""
) -> list[str]:
    """Soft-delete the live rows among ``ids`` of one slice (docs/behaviour.md §3); those ids."""
    if not ids:
        return []
    s = store_slice
    return _removing(
        s, lambda: store.soft_delete_ids(s.using, s.namespace, ids, actor=actor, reason=reason)
    )


@validation.checked_arguments
def soft_delete_selection(*, using: str, ids: Iterable[str], actor: str = "") -> list[str]:
    """Soft-delete an operator's selection, of any namespaces; the ids deleted, in order.

    No change window: a selection may span any number of slices, and the
    counters the database triggers move make each cached index catch up on its
    next read.
    """
    return store.soft_delete_ids(using, None, ids, actor=actor, reason="admin")


@validation.checked_arguments
def restore_selection(
    *, using: str, ids: Iterable[str], actor: str = ""
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Undo the soft delete of a selection: the restored ids and ``(id, title, why)`` refusals.

    A row whose key a live row now holds stays deleted (:func:`memoryapp.writes.store.restore_ids`);
    indexes catch up through the change counters, as for :func:`soft_delete_selection`.
    """
    return store.restore_ids(using, ids, actor=actor)


@validation.checked_arguments
def clear(*, store_slice: StoreSlice, actor: str = "") -> list[str]:
    """Soft-delete every live memory of one slice; their ids, oldest first."""
    s = store_slice
    return _removing(s, lambda: store.clear(s.using, s.namespace, [s.scope], actor=actor))


def _removing(s: StoreSlice, soft_delete) -> list[str]:
    """Run ``soft_delete()`` (it returns the ids it removed) in the slice's change window,
    then drop those ids from a cached index of the slice."""
    with change_window(s.using, [(s.namespace, s.scope)]) as window:
        removed = soft_delete()
    INDEXES.apply_own_write(window, s.namespace, s.scope, removed=removed)
    return removed


@validation.checked_arguments
def import_records(
    *,
    binding: Binding,
    guard: MemoryGuard,
    records,
    actor: str = "",
    skip_invalid: bool = False,
    dry_run: bool = False,
    progress=None,
    analyze: bool = True,
) -> bulk.ImportReport:
    """Bulk-import ``(line number, record dict)`` pairs into ``binding``'s stores.

    Each record is guarded, classified and downgraded like :func:`upsert`
    (see :mod:`memoryapp.writes.bulk`); nothing is written when one is invalid unless
    ``skip_invalid``.
    """

    def resolve(prepared):
        prepared = downgrade(prepared, binding)
        target = binding.store_for(prepared.scope)
        return prepared, bulk.ImportTarget(target.using, target.namespace)

    return bulk.import_records(
        records,
        guard=guard,
        resolve=resolve,
        subject=binding.subject,
        actor=actor,
        skip_invalid=skip_invalid,
        dry_run=dry_run,
        progress=progress,
        analyze=analyze,
    )
