"""Classification of memories: scope and type inference, confidence, keywords.

Pure Python over plain values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memoryapp.rules.validation import SCOPES, TYPES, clean_tags, explicit_choice, require_str

__all__ = ["STOP_WORDS", "default_confidence", "extract_keywords", "infer_scope", "infer_type"]

# Tags (case-insensitive) that put a memory in user scope when no scope is given.
_USER_SCOPE_TAGS = frozenset({"user", "preference", "profile", "personal"})
# Tag-to-type inference order (docs/behaviour.md §2); the fallback "note" is never read from a tag.
_TYPE_PRIORITY = ("preference", "workflow", "decision", "constraint", "profile", "project_fact")

# fmt: off
STOP_WORDS = frozenset({
    "a", "an", "the", "is", "in", "of", "to", "and", "or", "for",
    "with", "on", "at", "by", "be", "it", "as", "are", "was", "were",
})
# fmt: on
_MAX_KEYWORDS = 20
_MAX_CONTENT_WORDS = 30

_TITLE_WORD = re.compile(r"\w+")
_PATH_RUN = re.compile(r"[\w/]+")
_PATH_SUFFIX = re.compile(r"\.\w{2,4}")
_PATH_SUFFIX_PROBE = re.compile(r"\.\w{2}")
_LOWER_WORD = re.compile(r"\b[a-z_]{3,}\b")


def infer_scope(key_normalized: str, tags: Iterable[str] | None, scope: str | None = None) -> str:
    """Choose the scope of a memory (docs/behaviour.md §2).

    Args:
        key_normalized: The key after :func:`normalize_key`.
        tags: The memory's tags.
        scope: An explicit scope; it wins when given. Matched case-insensitively after
            stripping; ``None`` or a blank string means "not given".

    Returns:
        ``"user"`` or ``"project"``: the explicit scope, else ``"user"`` when the key
        starts with ``user_`` or a tag is ``user``/``preference``/``profile``/
        ``personal`` (any case), else ``"project"``.

    Raises:
        MemoryValidationError: The explicit scope is not one of :data:`SCOPES`, or the
            tags are malformed.
    """
    explicit = explicit_choice(scope, SCOPES, "Memory scope")
    lowered = {tag.lower() for tag in clean_tags(tags)}
    if explicit is not None:
        return explicit
    if require_str(key_normalized, "Memory key").startswith("user_"):
        return "user"
    if lowered & _USER_SCOPE_TAGS:
        return "user"
    return "project"


def infer_type(tags: Iterable[str] | None, type: str | None = None) -> str:
    """Choose the type of a memory (docs/behaviour.md §2).

    Args:
        tags: The memory's tags.
        type: An explicit type; it wins when given. Matched case-insensitively after
            stripping; ``None`` or a blank string means "not given".

    Returns:
        The explicit type, else the first of ``preference``, ``workflow``,
        ``decision``, ``constraint``, ``profile``, ``project_fact`` found among the
        tags (any case), else ``"note"``.

    Raises:
        MemoryValidationError: The explicit type is not one of :data:`TYPES`, or the
            tags are malformed.
    """
    explicit = explicit_choice(type, TYPES, "Memory type")
    lowered = {tag.lower() for tag in clean_tags(tags)}
    if explicit is not None:
        return explicit
    for candidate in _TYPE_PRIORITY:
        if candidate in lowered:
            return candidate
    return "note"


def default_confidence(source: str) -> str:
    """Return the confidence implied by a memory's source.

    Args:
        source: ``"explicit"``, ``"crystallized"`` or ``"auto"``.

    Returns:
        ``"explicit_user"`` for ``"explicit"``, otherwise ``"auto_summary"``.
    """
    return "explicit_user" if source == "explicit" else "auto_summary"


def _path_tokens(content: str) -> list[str]:
    """Return ``re.findall(r"[\\w/]+\\.\\w{2,4}", content)``, in linear time.

    The plain ``findall`` retries from every character of a long ``[\\w/]`` run that
    is not followed by ``.xx`` (quadratic: 0.15 s on 4000 characters). Every start
    inside one maximal run reaches the same run end, so they all succeed or fail
    together: the scan ``findall`` performs is, equivalently, "take the next run of
    ``[\\w/]`` (from the end of the last token, or from the start of a maximal run),
    and keep it with the ``\\.\\w{2,4}`` at its end if there is one".

    This walks the suffixes instead of the runs (most memories have none, and a
    memory has far fewer suffixes than words): every token ends with a suffix match
    ``\\.\\w{2,4}`` (``finditer`` finds each of them, with the same greedy extent:
    a suffix holds one ``.``, at its start, so they never overlap), and a suffix at
    ``k`` makes a token exactly when ``content[k - 1]`` is in ``[\\w/]`` at or after
    the end of the last token; the token then starts where that run of ``[\\w/]``,
    read backwards from ``k - 1``, stops — at a character outside ``[\\w/]`` or at the
    end of the last token. Read backwards by matching ``[\\w/]+`` forwards in the
    reversed text; no character is read backwards twice (a suffix's ``.`` stops the
    next one), so the whole scan stays linear.
    """
    if "." not in content:  # every token contains ".": the common case, at C speed
        return []
    first = _PATH_SUFFIX_PROBE.search(content)
    if first is None:  # every token contains a match of \.\w{2}
        return []
    tokens: list[str] = []
    size = len(content)
    reverse = content[::-1]
    last_end = 0
    for suffix in _PATH_SUFFIX.finditer(content, first.start()):
        dot = suffix.start()
        if dot <= last_end:  # the run before it would be empty (or inside the last token)
            continue
        # content[j] is reverse[size - 1 - j]: the run ending at content[dot - 1],
        # not reaching back before content[last_end].
        run = _PATH_RUN.match(reverse, size - dot, size - last_end)
        if run is None:
            continue
        tokens.append(content[dot - (run.end() - run.start()) : suffix.end()])
        last_end = suffix.end()
    return tokens


def extract_keywords(title: str, content: str, tags: Iterable[str] | None) -> list[str]:
    """Compute the search/recall keywords of a memory (docs/behaviour.md §2).

    The set of: the title's ``\\w+`` words longer than 2 characters, lower-cased; the
    tags (cleaned as by :func:`clean_tags`), lower-cased; the content's path-like
    tokens ``[\\w/]+\\.\\w{2,4}`` with their case kept; the first 30 occurrences
    (repeats count) of ``\\b[a-z_]{3,}\\b`` in the content. Stop words are removed,
    the rest sorted by code point and the first 20 kept.

    Args:
        title: The memory's title.
        content: The memory's content.
        tags: The memory's tags.

    Returns:
        Up to 20 distinct keywords in code-point order.

    Raises:
        MemoryValidationError: A non-string title/content or malformed tags.
    """
    title = require_str(title, "Memory title")
    content = require_str(content, "Memory content")
    words: set[str] = {w.lower() for w in _TITLE_WORD.findall(title) if len(w) > 2}
    words.update(tag.lower() for tag in clean_tags(tags))
    words.update(_path_tokens(content))
    words.update(_LOWER_WORD.findall(content)[:_MAX_CONTENT_WORDS])
    return sorted(words - STOP_WORDS)[:_MAX_KEYWORDS]
