"""Search (docs/behaviour.md §3): a literal, case-insensitive substring, run in SQL."""

from __future__ import annotations

from django.db.models import F, Q

from memoryapp.db.lookups import FoldedContains, JsonItemFolded, JsonItemFoldedEquals
from memoryapp.models import Memory

# Characters of the JSON text of the tag and keyword columns outside the values
# themselves. A needle without any of them cannot match across two values, so a
# ``LIKE`` over that text is then exact, not a superset.
_JSON_SYNTAX = frozenset('"\\,[]')
_TEXT_COLUMNS = ("title", "content", "key_normalized")
_LIST_COLUMNS = ("tags_json", "keywords_json")


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


def like_is_exact(needle: str) -> bool:
    """Whether the ``LIKE`` prefilters select exactly the matches of ``needle``.

    Only for ASCII: beyond it SQLite's ``LIKE`` does not fold case, and JSON written
    by other tools may hold a tag's non-ASCII characters as ``\\u`` escapes.
    """
    return needle.isascii() and not _JSON_SYNTAX.intersection(needle)


def matching(queryset, needle: str):
    """``queryset``'s rows that :func:`matches` ``needle`` (already lower-cased), in SQL.

    ``LIKE`` where it is exact (the fast path of an ASCII needle); otherwise the
    folded comparisons of :mod:`memoryapp.db.lookups` — each tag and keyword on its
    own, case folded beyond ASCII — so no needle makes a caller scan rows in
    Python (a non-ASCII character, ``"`` or ``\\`` used to).
    """
    if like_is_exact(needle):
        return queryset.search_prefilter(needle)
    found = Q()
    for column in _TEXT_COLUMNS:
        found |= Q(FoldedContains(F(column), needle))
    for column in _LIST_COLUMNS:
        found |= Q(JsonItemFolded(F(column), needle))
    return queryset.filter(found)


def tagged(queryset, tag: str):
    """``queryset``'s rows carrying ``tag`` (already lower-cased) exactly, in SQL."""
    if like_is_exact(tag):
        return queryset.tagged_prefilter(f'"{tag}"')  # the whole JSON string
    return queryset.filter(JsonItemFoldedEquals(F("tags_json"), tag))


def sql_narrowing(method: str, needle: str):
    """``narrow(queryset, alias)``: :func:`matching` (``method`` ``"search_prefilter"``)
    or :func:`tagged` (``"tagged_prefilter"``) of ``needle``, in SQL.

    Callers may still check :func:`matches` on the rows found (the reference rule).
    """

    def narrow(queryset, alias: str):
        return (
            tagged(queryset, needle) if method == "tagged_prefilter" else matching(queryset, needle)
        )

    return narrow
