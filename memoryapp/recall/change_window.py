"""The change window: the slice counters read before and after a write, in one transaction.

docs/behaviour.md §1: the triggers move ``memories_change`` and the written
slices' ``memory_slice_changes`` counters on every write. A facade that brackets
its write with :func:`change_window` knows exactly which counter values its own
write produced, so :meth:`memoryapp.recall.cache.RecallIndexes.apply_own_write` can
fold the write into a cached index without querying.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction

from memoryapp.db import locks, vendor
from memoryapp.db.meta import SliceKey, read_change_counter, read_slice_counters

__all__ = ["ChangeWindow", "change_window"]


@dataclass
class ChangeWindow:
    """The slice counters before and after a write made in one exclusive transaction."""

    using: str
    before: dict[SliceKey, int] = field(default_factory=dict)
    after: dict[SliceKey, int] = field(default_factory=dict)


@contextmanager
def change_window(using: str, slices: Iterable[SliceKey], *, subjects: Iterable[str | None] = ()):
    """A transaction that owns the change counters from start to end.

    It first shares the erasure locks of the slices' namespaces and of ``subjects``
    (the subject the write names): an erasure of either waits for this write, or this
    write for it (:mod:`memoryapp.db.locks`).

    On PostgreSQL the ``memories_change`` row is locked first (every writer's
    trigger updates it before any slice row, so nobody else can move a counter
    until commit); on SQLite the IMMEDIATE transaction already excludes other
    writers. ``before``/``after`` therefore bracket exactly this transaction's
    changes to ``slices``.
    """
    window = ChangeWindow(using)
    slices = list(slices)
    with transaction.atomic(using=using):
        locks.for_write(using, namespaces={ns for ns, _ in slices}, subjects=subjects)
        if vendor.of(using).lock_counter_first:
            read_change_counter(using, lock=True)
        window.before = read_slice_counters(using, slices)
        yield window
        window.after = read_slice_counters(using, slices)
