"""Reads of a binding's live memories (docs/behaviour.md §3): all, one, search, by tag, by title.

Database errors propagate; the facade turns a turn-path read's error into a
store problem. The matching rules are :mod:`memoryapp.services.search`'s.
"""

from __future__ import annotations

from memoryapp.models import Memory
from memoryapp.rules import validation
from memoryapp.services import search
from memoryapp.services.slices import StoreSlice, live_filter


def live(*, stores: list[StoreSlice], refine=None) -> list[Memory]:
    """Live rows of ``stores``, ordered by ``created_at`` (then id).

    ``refine(queryset, alias)`` may narrow each database's query (a prefilter).
    """
    rows: list[Memory] = []
    filters = live_filter(stores)
    for alias, q in filters.items():
        qs = Memory.objects.using(alias).live().filter(q)
        if refine is not None:
            qs = refine(qs, alias)
        rows.extend(qs.order_by("created_at", "id"))
    if len(filters) > 1:
        rows.sort(key=lambda m: (m.created_at, m.id))
    return rows


def one(*, stores: list[StoreSlice], memory_id: str) -> Memory | None:
    """The live memory with this id in one of ``stores``, else None."""
    memory_id = validation.check_id(memory_id)
    for alias, q in live_filter(stores).items():
        row = Memory.objects.using(alias).live().filter(q, pk=memory_id).first()
        if row is not None:
            return row
    return None


def matching(*, stores: list[StoreSlice], query: str) -> list[Memory]:
    """Case-insensitive literal substring search over title, content, key, tags, keywords."""
    needle = validation.check_query(query).strip().lower()
    refine = search.sql_narrowing("search_prefilter", needle)
    return [m for m in live(stores=stores, refine=refine) if search.matches(m, needle)]


def tagged(*, stores: list[StoreSlice], tag: str) -> list[Memory]:
    """Memories carrying ``tag`` exactly (case-insensitive)."""
    wanted = validation.check_query(tag, "Tag filter").strip().lower()
    refine = search.sql_narrowing("tagged_prefilter", wanted)
    return [m for m in live(stores=stores, refine=refine) if wanted in {t.lower() for t in m.tags}]


def titled(*, stores: list[StoreSlice], title: str) -> list[Memory]:
    """Memories whose title matches ``title`` case-insensitively (surrounding spaces aside)."""
    wanted = title.strip().lower()
    return [m for m in live(stores=stores) if m.title.strip().lower() == wanted]
