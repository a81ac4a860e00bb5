"""Input validation of memories: limits, key normalisation, tag cleaning.

Pure Python over plain values; every refusal is a
:class:`memoryapp.rules.errors.MemoryValidationError` whose message says what is wrong.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

from memoryapp.rules.errors import MemoryValidationError

__all__ = [
    "AUTO_SOURCE_CAP",
    "MAX_CONTENT_CHARS",
    "MAX_KEY_CHARS",
    "MAX_TITLE_CHARS",
    "SCOPES",
    "TYPES",
    "check_actor",
    "check_choices",
    "check_counter",
    "check_id",
    "checked_arguments",
    "check_stamp",
    "check_query",
    "check_stored_key",
    "check_summary",
    "check_text",
    "key_is_cut",
    "clean_tags",
    "normalize_key",
    "check_namespace",
    "require_str",
]

MAX_KEY_CHARS = 80
MAX_TITLE_CHARS = 120
MAX_CONTENT_CHARS = 4000
AUTO_SOURCE_CAP = 50
MAX_NAMESPACE_CHARS = 255  # the namespace and subject columns
MAX_TAGS = 50
MAX_TAG_CHARS = 100
MAX_SUMMARY_CHARS = 64_000
MAX_QUERY_CHARS = 4_000  # a search longer than the longest stored field cannot match
MAX_ID_CHARS = 64
MAX_ACTOR_CHARS = 255  # the events' and receipts' actor columns
MAX_COUNTER = 2**31 - 1  # the summary counters are 32-bit integer columns
# A caller's timestamp is converted between UTC and local time (up to a day apart):
# years 1 and 9999 can leave datetime's range on the way ("year 0 is out of range").
MIN_STAMP_YEAR, MAX_STAMP_YEAR = 2, 9998

SCOPES = ("user", "project")
TYPES = ("preference", "profile", "project_fact", "workflow", "decision", "constraint", "note")

# Every boundary str.splitlines() honours: a title is rendered on one line of the
# prompt, so a vertical tab or U+2028 would break it just like "\n" or "\r".
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_LINE_BREAK_CHAR = re.compile("[" + re.escape("".join(sorted(_LINE_BREAKS))) + "]")

_UNDERSCORE_RUN = re.compile(r"_+")
_ASCII_NON_ALNUM_RUN = re.compile(r"[^a-z0-9]+")


def require_str(value: object, what: str) -> str:
    """``value`` itself when it is a string that can be stored; otherwise a clear refusal.

    Both vendors get the same answer: a NUL character (PostgreSQL refuses it, SQLite
    stored it) and a lone surrogate (no UTF-8 encoding: the driver raised) are
    refused here, before any statement could carry the value into a server log.
    """
    if not isinstance(value, str):
        raise MemoryValidationError(f"{what} must be a string")
    return check_text(value, what)


def check_text(value: str, what: str) -> str:
    """``value`` unless it holds a NUL character or a lone surrogate (never stored)."""
    if "\x00" in value:
        raise MemoryValidationError(f"{what} must not contain NUL characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise MemoryValidationError(
                f"{what} must be valid Unicode text (it holds a lone surrogate)"
            ) from None
    return value


def check_namespace(value: object, what: str = "Namespace") -> str:
    """``value`` when it can name a namespace (or subject); otherwise a clear refusal.

    ``''`` is the single-tenant namespace. Refused: not a string, longer than 255
    characters, surrounding whitespace (never stripped silently: a namespace is a
    tenant's identity), control characters, NUL or lone surrogates, and path
    tricks — an empty segment (``a//b``, a leading or trailing ``/``) or a
    ``.``/``..`` segment — so ``acme/../globex/web`` can never pass for a
    namespace under ``acme/``.
    """
    text = check_stored_key(value, what)
    if not text:
        return ""
    if text != text.strip():
        raise MemoryValidationError(f"{what} must not begin or end with whitespace")
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise MemoryValidationError(f"{what} must not contain control characters")
    if any(part in ("", ".", "..") for part in text.split("/")):
        raise MemoryValidationError(f"{what} must not have empty, '.' or '..' segments between '/'")
    return text


def check_stored_key(value: object, what: str = "Namespace") -> str:
    """A namespace or subject as a lookup names it: storable text of at most 255 characters.

    Looser than :func:`check_namespace` on purpose: erasure and export must
    reach every value a column can hold, including rows written before the
    stricter write rules.
    """
    text = require_str(value, what)
    if len(text) > MAX_NAMESPACE_CHARS:
        raise MemoryValidationError(
            f"{what} is too long ({len(text)} > {MAX_NAMESPACE_CHARS} characters)"
        )
    return text


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def normalize_key(key: str) -> str:
    """Normalise a memory key into its identity form (docs/behaviour.md §2).

    Strip, lower-case, turn every run of characters that are not letters, digits or
    ``_`` (whitespace included) into one ``_``, collapse ``_`` runs, strip ``_`` at
    both ends, then keep the first 80 characters.

    "Letters and digits" are those of every script: a character is kept when
    ``str.isalnum()`` is true (the same set as ``[^\\W_]`` in CPython). Unicode
    combining marks (categories M*) are not alphanumeric, yet they are part of words
    in many scripts (Devanagari vowel signs, decomposed accents), so a mark is kept
    when it follows a kept letter, digit or mark. The text is NFC-composed after
    lower-casing so that a decomposed "Café" and a precomposed one give one key.
    ASCII keys normalise exactly as Agentao's do: in particular a trailing ``_`` left
    by the 80-character cut is kept, as Agentao keeps it.

    Args:
        key: The key as given by the caller.

    Returns:
        The normalised key, 1 to 80 characters.

    Raises:
        MemoryValidationError: ``key`` is not a string, or nothing is left.
    """
    return _full_key(key)[:MAX_KEY_CHARS]


KEY_CUT_WARNING = (
    f"The key was cut to its first {MAX_KEY_CHARS} normalised characters; "
    "another key with the same beginning is the same memory."
)


def key_is_cut(key: object) -> bool:
    """Whether ``normalize_key`` keeps only the first 80 characters of ``key``'s form.

    The seed's rule, kept: two long keys that agree on their first 80 normalised
    characters are one memory. Callers say so when it happens (the API's
    ``warnings``, an admin message, ``save_memory``'s answer).
    """
    try:
        return len(_full_key(key)) > MAX_KEY_CHARS
    except MemoryValidationError:
        return False


def _full_key(key: object) -> str:
    """``normalize_key`` before the 80-character cut."""
    text = require_str(key, "Memory key").strip().lower()
    if text.isascii():
        # The same result, without the loop: NFC leaves ASCII alone, an ASCII
        # character is alphanumeric exactly when it is [a-z0-9] once lower-cased,
        # and ASCII has no combining marks, so each maximal run of other characters
        # becomes one "_" (what the loop's "_" per character and the collapse give).
        normalized = _ASCII_NON_ALNUM_RUN.sub("_", text).strip("_")
        if not normalized:
            raise MemoryValidationError("Memory key is empty after normalization")
        return normalized
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    after_word_char = False
    for char in text:
        if char.isalnum() or (after_word_char and _is_mark(char)):
            out.append(char)
            after_word_char = True
        else:
            out.append("_")
            after_word_char = False
    normalized = _UNDERSCORE_RUN.sub("_", "".join(out)).strip("_")
    if not normalized:
        raise MemoryValidationError("Memory key is empty after normalization")
    return normalized


def clean_tags(tags: Iterable[str] | None) -> list[str]:
    """Clean a tag list: strip each tag, drop empties, drop repeats.

    Case is kept as given and repeats are exact (case-sensitive) repeats; the first
    occurrence wins its position.

    Args:
        tags: ``None`` or an iterable of strings. A bare string is refused rather than
            split into characters.

    Returns:
        The cleaned tags, in first-occurrence order.

    Raises:
        MemoryValidationError: ``tags`` is a string or not iterable, or an item is not
            a string.
    """
    if tags is None:
        return []
    if isinstance(tags, str | bytes):
        raise MemoryValidationError("Memory tags must be a list of strings, not a string")
    try:
        items = list(tags)
    except TypeError:
        raise MemoryValidationError("Memory tags must be a list of strings") from None
    seen: set[str] = set()
    cleaned: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise MemoryValidationError("Memory tags must be strings")
        tag = check_text(item, "Memory tag").strip()
        if len(tag) > MAX_TAG_CHARS:
            raise MemoryValidationError(
                f"Memory tag exceeds max length ({len(tag)} > {MAX_TAG_CHARS})"
            )
        if tag and tag not in seen:
            seen.add(tag)
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise MemoryValidationError(f"At most {MAX_TAGS} tags per memory ({len(cleaned)} given)")
    return cleaned


def explicit_choice(value: object, allowed: tuple[str, ...], what: str) -> str | None:
    """Canonicalise an explicit scope/type; ``None`` or blank means "not given"."""
    if value is None:
        return None
    text = require_str(value, what).strip().lower()
    if not text:
        return None
    if text not in allowed:
        raise MemoryValidationError(f"{what} must be one of: {', '.join(allowed)}")
    return text


def check_title(key: str) -> str:
    """The title derived from ``key``: stripped and cut to 120 characters.

    Raises:
        MemoryValidationError: ``key`` is not a string, or contains a line break
            (``\\n``, ``\\r`` or any other boundary ``str.splitlines`` honours),
            anywhere, even at an end.
    """
    require_str(key, "Memory key")
    if _LINE_BREAK_CHAR.search(key):
        raise MemoryValidationError("Memory key/title must be single-line")
    return key.strip()[:MAX_TITLE_CHARS]


def check_content(content: str) -> str:
    """The content stripped; refused when empty or over 4000 characters (never cut).

    Raises:
        MemoryValidationError: Not a string, empty after stripping, or too long.
    """
    text = require_str(content, "Memory content").strip()
    if not text:
        raise MemoryValidationError("Memory content is empty")
    if len(text) > MAX_CONTENT_CHARS:
        raise MemoryValidationError(
            f"Memory content exceeds max length ({len(text)} > {MAX_CONTENT_CHARS})"
        )
    return text


def check_summary(text: object) -> str:
    """A session summary as stored: stripped, valid text, at most 64,000 characters."""
    summary = require_str(text, "Session summary").strip()
    if len(summary) > MAX_SUMMARY_CHARS:
        raise MemoryValidationError(
            f"Session summary exceeds max length ({len(summary)} > {MAX_SUMMARY_CHARS})"
        )
    return summary


def check_query(value: object, what: str = "Search query") -> str:
    """A search or tag filter: valid text of at most 4,000 characters."""
    text = require_str(value, what)
    if len(text) > MAX_QUERY_CHARS:
        raise MemoryValidationError(f"{what} is too long ({len(text)} > {MAX_QUERY_CHARS})")
    return text


def check_id(value: object, what: str = "Memory id") -> str:
    """A row id given by a caller: a string of at most 64 characters."""
    text = require_str(value, what)
    if len(text) > MAX_ID_CHARS:
        raise MemoryValidationError(f"{what} is too long ({len(text)} > {MAX_ID_CHARS})")
    return text


def check_stamp(value: dt.datetime, what: str = "created_at") -> dt.datetime:
    """``value`` when its year is within 2–9998, where every time-zone conversion is defined."""
    if not MIN_STAMP_YEAR <= value.year <= MAX_STAMP_YEAR:
        raise MemoryValidationError(
            f"{what} must be between the years {MIN_STAMP_YEAR} and {MAX_STAMP_YEAR}",
            field=what,
        )
    return value


def check_actor(value: object) -> str:
    """Who asks, as events and receipts record it: text of at most 255 characters ('' allowed)."""
    text = require_str(value, "actor")
    if len(text) > MAX_ACTOR_CHARS:
        raise MemoryValidationError(f"actor is too long ({len(text)} > {MAX_ACTOR_CHARS})")
    return text


def check_counter(value: object, what: str) -> int:
    """A count a caller reports (a summary's ``tokens_before``): an int from 0 to 2**31-1.

    ``None`` is 0 (docs/behaviour.md §4). Negative values, booleans and other types
    are refused rather than coerced (a negative count is a caller's bug, not a
    count), and a value the integer column cannot hold is refused before it reaches it.
    """
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise MemoryValidationError(f"{what} must be an integer")
    if value < 0:
        raise MemoryValidationError(f"{what} must not be negative")
    if value > MAX_COUNTER:
        raise MemoryValidationError(f"{what} must be at most {MAX_COUNTER}")
    return value


def check_choices(value: object, allowed: Iterable[str], what: str) -> tuple[str, ...] | None:
    """One choice or several (a review status, or a list of them); None keeps all.

    Anything else — a number, a choice not in ``allowed``, an empty list — is refused
    as a :class:`MemoryValidationError`, never a ``TypeError`` from iterating it.
    """
    if value is None:
        return None
    if isinstance(value, str):
        values: tuple[object, ...] = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        values = tuple(value)
    else:
        raise MemoryValidationError(f"{what} must be a string or a list of strings")
    choices = tuple(allowed)
    unknown = [v for v in values if not isinstance(v, str) or v not in choices]
    if unknown or not values:
        shown = ", ".join(repr(v)[:40] for v in unknown) or "none"
        raise MemoryValidationError(f"Unknown {what} {shown}: expected one of {', '.join(choices)}")
    return values  # type: ignore[return-value]  # each checked to be a str above


_P = ParamSpec("_P")
_R = TypeVar("_R")
_ID_ARGUMENTS = {"item_id": "Review item id", "memory_id": "Memory id"}
_ID_LIST_ARGUMENTS = {"item_ids": "Review item id", "ids": "id"}


def checked_arguments(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """A service function whose caller-given ``actor`` and ids are checked before it runs.

    Services are keyword-only, and name these arguments alike: ``actor``
    (:func:`check_actor`), ``item_id``/``memory_id`` (:func:`check_id`), and
    ``item_ids``/``ids`` (each id checked; the iterable becomes a list). A value
    the driver cannot send (a lone surrogate, a NUL, an over-long or non-string
    value) is refused here as a :class:`MemoryValidationError` on both vendors,
    before any statement could carry it into the database's log.
    """

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if "actor" in kwargs:
            kwargs["actor"] = check_actor(kwargs["actor"])
        for name, what in _ID_ARGUMENTS.items():
            if name in kwargs:
                kwargs[name] = check_id(kwargs[name], what)
        for name, what in _ID_LIST_ARGUMENTS.items():
            if name in kwargs:
                ids = kwargs[name]
                if isinstance(ids, str) or not isinstance(ids, Iterable):
                    raise MemoryValidationError(f"{what}s must be a list of strings")
                kwargs[name] = [check_id(i, what) for i in ids]
        return func(*args, **kwargs)

    return wrapper
