"""English word forms for the ``hybrid`` ranking: a query word matches the index tokens that
share its Snowball stem ("deployments" finds a memory about "deploy").

Pure Python, no Django. The index keeps its tokens as written (the ``agentao`` ranking reads
them, and must not change), so stemming happens at query time only: for a query token, the
forms of its stem that an English word takes (the stem plus the suffixes Snowball strips, a
doubled final consonant, a final ``e`` kept or dropped, a ``y`` Snowball turned into ``i``)
are looked up in the postings, and a form counts only when its own stem is the query's.
This needs no vocabulary scan, no second set of postings and no snapshot change, and
costs a few dozen dictionary lookups a query word; its price is that an irregular form
outside these patterns is not found.

Only Latin-script words of letters are stemmed: numbers, identifiers with digits and CJK
tokens (segmented by jieba as before) are matched as they are.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import snowballstemmer

__all__ = ["forms", "stem"]

# Letters of the Latin script as the tokeniser lower-cases them (ASCII, Latin-1, Extended-A/B).
_LATIN_WORD = re.compile("[a-z\u00df-\u00f6\u00f8-\u024f]{3,}")
# snowballstemmer's stemmers keep their state on the object: one per thread.
_local = threading.local()

# What Snowball's English steps strip, so that stem + suffix rebuilds the usual forms.
_SUFFIXES = (
    "",
    "s",
    "es",
    "e",
    "ed",
    "ing",
    "er",
    "ers",
    "ly",
    "ment",
    "ments",
    "ion",
    "ions",
    "ation",
    "ations",
    "ness",
    "al",
    "ally",
    "ity",
    "ive",
    "able",
    "ence",
    "ance",
    "ize",
    "izes",
    "ized",
    "izing",
    "ization",
    "ful",
    "ous",
    "ic",
    "ical",
)


def _stem_word(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """The English Snowball stem of a Latin-script word of 3+ letters, else ``token`` itself."""
    if not _LATIN_WORD.fullmatch(token):
        return token
    return _stem_word(token)


@lru_cache(maxsize=16384)
def _candidates(root: str) -> tuple[str, ...]:
    """The surface forms worth looking up for the stem ``root``."""
    out = [root + suffix for suffix in _SUFFIXES]
    if len(root) >= 2 and root[-1] not in "aeiouy":
        out += [root + root[-1] + suffix for suffix in ("ing", "ed", "er", "ers")]  # run-ning
    if root.endswith("e"):  # Snowball keeps a final e: name → named, naming
        out += [root + "d", root + "r", root + "rs"]
        out += [root[:-1] + suffix for suffix in ("ing", "ion", "ions", "ation", "ations")]
    if root.endswith("i"):
        base = root[:-1]
        out += [base + "y", base + "ying", base + "ies", base + "ied"]  # studi → study
    return tuple(dict.fromkeys(out))


def forms(token: str, posting: Callable[[str], Any]) -> frozenset[str]:
    """``token`` and the forms of its stem that the index holds a posting of.

    Args:
        token: A query token.
        posting: A token's posting in the index, or None (the postings' ``get``).

    Returns:
        ``token`` itself, plus every held form whose stem equals ``token``'s stem.
    """
    root = stem(token)
    if root == token and not _LATIN_WORD.fullmatch(token):
        return frozenset((token,))
    found = {token}
    for form in _candidates(root):
        if form != token and posting(form) is not None and stem(form) == root:
            found.add(form)
    return frozenset(found)
