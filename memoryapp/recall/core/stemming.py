"""English word forms for the ``hybrid`` ranking: a query word matches every index token that
shares its Snowball stem ("deployments" finds a memory about "deploy", "naming" one about
"named").

Pure Python, no Django. The index keeps its tokens as written (the ``agentao`` ranking reads
them, and must not change), so stemming happens at query time only, and exactly: the held
forms of a stem are found by looking the stem up as a prefix in the index's sorted token
list (:class:`StemForms`) and keeping the tokens whose own stem is the query's. Snowball's
English stem is a prefix of its words except where it turns a final ``y`` into ``i``
(``study`` → ``studi``) or restores a final ``e`` (``naming`` → ``name``): for a stem ending
in ``i`` or ``e`` the prefix drops that letter. The few irregular words Snowball maps by
table (``dying`` → ``die``) are the only forms a prefix misses.

Only Latin-script words of letters are stemmed: numbers, identifiers with digits and CJK
tokens (segmented by jieba as before) are matched as they are.
"""

from __future__ import annotations

import bisect
import re
import sys
import threading
from functools import lru_cache

import snowballstemmer

__all__ = ["MEMO_STEMS", "StemForms", "is_word", "stem"]

# Letters of the Latin script as the tokeniser lower-cases them (ASCII, Latin-1, Extended-A/B).
_LATIN_WORD = re.compile("[a-z\u00df-\u00f6\u00f8-\u024f]{3,}")
# snowballstemmer's stemmers keep their state on the object: one per thread.
_local = threading.local()

#: Stems a :class:`StemForms` remembers at most; it starts afresh past that (a bound on its
#: memory whatever the queries, far above the distinct words of a namespace's usual queries).
MEMO_STEMS = 4096
_POINTER = 8  # bytes of one list slot
_ENTRY_BYTES = 40 + 3 * _POINTER  # an empty tuple (sys.getsizeof) and a dict entry


def _stem_word(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def is_word(token: str) -> bool:
    """Whether ``token`` is a Latin-script word of 3+ letters (the tokens that are stemmed)."""
    return _LATIN_WORD.fullmatch(token) is not None


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """The English Snowball stem of a Latin-script word of 3+ letters, else ``token`` itself."""
    if not _LATIN_WORD.fullmatch(token):
        return token
    return _stem_word(token)


def _prefix(root: str) -> str:
    """The prefix every regular form of ``root`` starts with."""
    return root[:-1] if len(root) >= 3 and root[-1] in "ei" else root


class StemForms:
    """One index's memo: stem → the held tokens of that stem.

    Built from the index's sorted token list the first time the ``hybrid`` ranking asks;
    the index tells it of every token it adds (:meth:`added`) and drops it when it repacks
    its postings (tokens may have gone). Not thread-safe: used under the index's lock.
    """

    def __init__(self, tokens: list[str]) -> None:
        """Args: tokens: every token of the index, sorted."""
        self._tokens = tokens
        self._memo: dict[str, tuple[str, ...]] = {}
        self._memo_bytes = 0

    def added(self, token: str) -> None:
        """Take a token the index has just started holding into account."""
        bisect.insort(self._tokens, token)
        if is_word(token):
            root = stem(token)
            held = self._memo.get(root)
            # As a scan would find it (an irregular form outside the prefix is not), so an
            # index ranks alike whatever the order of its writes and queries.
            if held is not None and token.startswith(_prefix(root)):
                self._memo[root] = (*held, token)
                self._memo_bytes += _POINTER

    def forms(self, token: str) -> tuple[str, ...]:
        """Every held token whose stem is ``token``'s (``token`` alone when it is not a word
        that is stemmed, held or not)."""
        if not is_word(token):
            return (token,)
        root = stem(token)
        held = self._memo.get(root)
        if held is None:
            held = self._scan(root)
            if len(self._memo) >= MEMO_STEMS:
                self._memo.clear()
                self._memo_bytes = 0
            self._memo[root] = held
            self._memo_bytes += sys.getsizeof(root) + _ENTRY_BYTES + _POINTER * len(held)
        return held

    def _scan(self, root: str) -> tuple[str, ...]:
        prefix = _prefix(root)
        tokens = self._tokens
        found = []
        for i in range(bisect.bisect_left(tokens, prefix), len(tokens)):
            candidate = tokens[i]
            if not candidate.startswith(prefix):
                break
            if stem(candidate) == root:
                found.append(candidate)
        return tuple(found)

    @property
    def nbytes(self) -> int:
        """Approximate bytes: the sorted list's slots and the memo (token strings are the
        index's own)."""
        return 56 + _POINTER * len(self._tokens) + self._memo_bytes
