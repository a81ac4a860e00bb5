"""Search (docs/behaviour.md §3): a literal, case-insensitive substring; when SQL may prefilter."""

from __future__ import annotations

from .db import vendor
from .models import Memory


def matches(memory: Memory, needle: str) -> bool:
    """Whether ``needle`` is in the title, content, key, a tag or a keyword (docs/behaviour.md §3).

    ``needle`` is already lower-cased; the match is a literal substring.
    """
    if needle in memory.title.lower() or needle in memory.content.lower():
        return True
    if needle in memory.key_normalized.lower():
        return True
    return any(needle in t.lower() for t in memory.tags) or any(
        needle in k.lower() for k in memory.keywords
    )


def sql_can_prefilter(text: str, alias: str) -> bool:
    """Whether a SQL ``LIKE`` prefilter is a safe superset for ``text`` on this database.

    SQLite's ``LIKE`` folds case for ASCII only, and JSON written by other
    tools may escape non-ASCII or quote characters; such needles are checked
    in Python over the namespace's rows instead.
    """
    if '"' in text or "\\" in text:
        return False
    return text.isascii() or vendor.of(alias).unicode_like


def sql_narrowing(method: str, needle: str):
    """``narrow(queryset, alias)``: the queryset's ``method`` prefilter where SQL is exact
    enough (:func:`sql_can_prefilter`), else the queryset unchanged.

    ``method`` is ``"search_prefilter"`` (``search``) or ``"tagged_prefilter"``
    (``filter_by_tag``); callers keep the exact matches in Python.
    """

    def narrow(queryset, alias: str):
        if sql_can_prefilter(needle, alias):
            return getattr(queryset, method)(needle)
        return queryset

    return narrow
