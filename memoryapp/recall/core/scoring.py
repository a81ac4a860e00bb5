"""Recall scoring (docs/behaviour.md §5): the exact formula over one record, in plain Python.

The reference the numpy index of :mod:`memoryapp.recall.core.index` must reproduce bit for bit;
no numpy, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from memoryapp.recall.core.tokens import token_set

__all__ = [
    "CONTENT_CHARS",
    "REASON_ORDER",
    "SECONDS_PER_DAY",
    "STALE_DAYS",
    "Fields",
    "IndexRecord",
    "Scored",
    "fields_of",
    "rank_key",
    "reasons",
    "score",
    "tag_weight",
]

CONTENT_CHARS = 500  # the content term looks at this prefix only
SECONDS_PER_DAY = 86400.0
STALE_DAYS = 90.0
REASON_ORDER = (
    "tag_match",
    "title_overlap",
    "keyword_match",
    "content_match",
    "filepath_hint",
    "stale_penalty",
    "explicit",
)


@dataclass(frozen=True)
class IndexRecord:
    """What the recall index needs of one live memory.

    Attributes:
        id: The memory id.
        title: The title (tokenised for the title term).
        content: The content (its first 500 characters are tokenised).
        tags: The tags, compared lower-cased and whole.
        keywords: The stored keywords (each one lower-cased, plus its tokens).
        updated_at: Last update, POSIX seconds (UTC).
        explicit: Whether the confidence is ``explicit_user`` (the ``explicit`` reason).
        fingerprint: Any 64-bit value that changes with the stored row (kept per record
            and returned by
            :meth:`~memoryapp.recall.core.index.RecallIndex.fingerprint`, so a caller can tell
            whether a row it reads again is the one indexed); 0 when unused.
        vector: The int8 embedding (:mod:`memoryapp.recall.core.vectors`), or None.
    """

    id: str
    title: str
    content: str
    tags: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    updated_at: float = 0.0
    explicit: bool = False
    fingerprint: int = 0
    vector: bytes | None = None


@dataclass(frozen=True)
class Scored:
    """One recall hit.

    Attributes:
        id: The memory id.
        score: The total score.
        reasons: The terms that fired, in :data:`REASON_ORDER`.
    """

    id: str
    score: float
    reasons: tuple[str, ...]


class Fields(NamedTuple):
    """A record's token sets, as the formula compares them with the query tokens."""

    tags: set[str]
    title: set[str]
    keywords: set[str]
    content: set[str]


class _KeywordTokens(dict[str, tuple[str, ...]]):
    """Memo: keyword → its tokens (the keyword lower-cased, plus its expanded tokens).

    Keywords repeat across memories (tags, common words, file names), so each distinct one
    is tokenised once (that halves the build time). Tuples keep an entry near 170 bytes; the
    memo is dropped when it reaches its cap, which bounds it near 17 MB per process.
    """

    MAX = 100_000

    def __missing__(self, keyword: str) -> tuple[str, ...]:
        found = token_set(keyword)
        found.add(keyword.lower())
        if len(self) >= self.MAX:
            self.clear()
        self[keyword] = tokens = tuple(found)
        return tokens


_KEYWORD_TOKENS = _KeywordTokens()


def fields_of(record: IndexRecord) -> Fields:
    """The token sets of ``record`` that the formula compares with the query tokens."""
    return Fields(
        tags={tag.lower() for tag in record.tags},
        title=token_set(record.title),
        keywords=set().union(*map(_KEYWORD_TOKENS.__getitem__, record.keywords)),
        content=token_set(record.content[:CONTENT_CHARS]),
    )


def tag_weight(n: int) -> float:
    """The tag term's weight for a query of ``n`` tokens: 4, or 2.5 / 1.5 for 2 / 1 tokens.

    Args:
        n: The size of the expanded query token set.

    Returns:
        The weight.
    """
    return 4.0 if n >= 3 else 2.5 if n == 2 else 1.5


def reasons(
    tag: int, title: int, kw: int, content: int, hint: bool, stale: bool, explicit: bool
) -> tuple[str, ...]:
    """The names of the terms that fired, in :data:`REASON_ORDER`."""
    flags = (tag > 0, title > 0, kw > 0, content > 0, hint, stale, explicit)
    return tuple(name for name, on in zip(REASON_ORDER, flags, strict=True) if on)


def score(
    record: IndexRecord, qtokens: frozenset[str], hints: frozenset[str], now: float
) -> Scored | None:
    """Score one record against a query: the reference formula, in plain Python.

    ``tag_w·tags + 3·jaccard(title) + 2·keywords + content + 2·hint + recency − 2·stale``,
    where each share divides by N = ``len(qtokens)`` (all four are 0 when N is 0), recency is
    ``1 / (1 + days / 30)`` with fractional days ``max(0, (now − updated_at) / 86400)``, and
    stale means more than 90 days. :class:`~memoryapp.recall.core.index.RecallIndex`
    returns bit-identical scores.

    Args:
        record: The memory.
        qtokens: The query tokens (:func:`~memoryapp.recall.core.tokens.query_tokens`).
        hints: The path-hint tokens (:func:`~memoryapp.recall.core.tokens.path_hints`).
        now: The current time, POSIX seconds.

    Returns:
        The hit, or None when none of the first five terms fires (the gate).
    """
    fields = fields_of(record)
    n = len(qtokens)
    tag = len(qtokens & fields.tags)
    title = len(qtokens & fields.title)
    kw = len(qtokens & fields.keywords)
    content = len(qtokens & fields.content)
    hint = not hints.isdisjoint(fields.keywords)
    if not (tag or title or kw or content or hint):
        return None
    if n:
        tag_term = tag_weight(n) * (tag / n)
        title_term = 3.0 * (title / (n + len(fields.title) - title))  # |q ∪ t| = n + |t| − i
        kw_term = 2.0 * (kw / n)
        content_term = 1.0 * (content / n)
    else:
        tag_term = title_term = kw_term = content_term = 0.0
    days = max((now - record.updated_at) / SECONDS_PER_DAY, 0.0)
    stale = days > STALE_DAYS
    # The same operations in the same order as the index's exact pass (recall._Candidates.exact),
    # so the floats agree.
    total = tag_term + title_term + kw_term + content_term + 2.0 * hint + 1.0 / (1.0 + days / 30.0)
    total = total - 2.0 * stale
    return Scored(record.id, total, reasons(tag, title, kw, content, hint, stale, record.explicit))


def rank_key(hit: Scored) -> tuple[float, str]:
    """The result order: highest score first, ties broken by ascending id.

    Args:
        hit: A scored memory.

    Returns:
        A sort key.
    """
    return (-hit.score, hit.id)
