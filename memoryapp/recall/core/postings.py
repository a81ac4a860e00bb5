"""The posting layout of a recall index: field codes, packed accumulator lanes, postings.

What :class:`~memoryapp.recall.core.index.RecallIndex` stores per token and how a query adds the
per-field counts of every slot it touches; kept apart so the index reads as its operations.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from memoryapp.recall.core.scoring import (
    CONTENT_CHARS,
    SECONDS_PER_DAY,
    STALE_DAYS,
    Fields,
    IndexRecord,
    tag_weight,
)
from memoryapp.recall.core.tokens import token_set

# ----------------------------------------------------------------------------- the index
#
# Slots. Every inserted record gets the next *slot* (a row of the per-slot numpy arrays).
# Replacing a record appends a fresh slot and tombstones the old one; removing tombstones it.
# Postings are never edited in place: a dead slot's entries are skipped at query time and
# dropped by the compaction that runs once a quarter of the slots are dead.
#
# Postings. For each token, one int32 entry per slot whose record holds the token:
#     entry = slot << 5 | code,   code = TAG | TITLE | KW | CONTENT | TAIL  (the fields holding it)
# TAIL marks the tokens of the content only after its first 500 characters: the exact formula
# never counts them (its tables give the bit no value), the hybrid ranking reads the whole text.
# Entries whose code has KW come first (``n_kw`` of them), so a token that is only a path hint
# scans just that part. Entries written by ``add`` wait in small ``array('i')`` buffers and
# are merged into the numpy posting the first time a query touches the token.
TAG, TITLE, KW, CONTENT, TAIL = 1, 2, 4, 8, 16
CODE_BITS = 5
CODES = 1 << CODE_BITS
CODE_MASK = (1 << CODE_BITS) - 1
MAX_SLOTS = 1 << (31 - CODE_BITS)

# The bound P adds, per query token, 2·tag_w·[tag] + 6·[title] + 4·[kw] + 2·[content], so
# P / 2N bounds the four query terms (jaccard = i / |q ∪ t| ≤ i / N). TAG's step is per query.
_BOUND_STEP = {TITLE: 6, KW: 4, CONTENT: 2}
_FIELD_DIGIT = {TAG: "tag", TITLE: "title", KW: "kw", CONTENT: "content"}
_DIGITS = ("tag", "title", "kw", "content", "bound", "hint")

BOUND_REFRESH_SECONDS = 3600.0  # the cached recency bound is recomputed when older
SMALL_CANDIDATES = 64  # up to this many candidates (or 4·top_k), score them all without pruning


@dataclass(frozen=True)
class IndexArrays:
    """The per-slot arrays of a :class:`~memoryapp.recall.core.index.RecallIndex` (its
    ``arrays``), one row per slot: what the rankings (:mod:`.pruning`, :mod:`.hybrid`,
    :mod:`.semantic`) and :mod:`.snapshot` read of it.

    Each array has the index's capacity of rows (at least its slots, ``len(index._ids)``);
    rows past the slots are zero. The index replaces the whole structure when it grows or
    compacts (slots are renumbered then) and changes rows in place otherwise: read
    ``index.arrays`` afresh under the index's lock, never keep it across calls.

    Attributes:
        updated: float64, the record's ``updated_at`` (POSIX seconds).
        fingerprint: int64, :attr:`IndexRecord.fingerprint`.
        title_len: int32, distinct title tokens (the exact formula's title term).
        doc_len: int32, distinct tokens of the whole content: the document length the
            hybrid ranking normalises by; the exact formula never reads it.
        alive: bool, False once the slot's record is removed or replaced.
        explicit: bool, the record's ``explicit`` flag.
        bound: float64, recency − 2·stale evaluated at the index's bound time: the term
            only falls as time passes, so it bounds the term at any later ``now``.
        vec: ``(capacity, dim)`` int8 embeddings (:mod:`.vectors`); dim 0 without any.
        bits: ``(capacity, dim / 8)`` uint8, their packed sign bits (the semantic
            ranking's prefilter).
    """

    updated: np.ndarray
    fingerprint: np.ndarray
    title_len: np.ndarray
    doc_len: np.ndarray
    alive: np.ndarray
    explicit: np.ndarray
    bound: np.ndarray
    vec: np.ndarray
    bits: np.ndarray

    @classmethod
    def empty(cls) -> IndexArrays:
        """Arrays of no rows (and no vector dimension)."""
        return cls(
            updated=np.zeros(0, dtype=np.float64),
            fingerprint=np.zeros(0, dtype=np.int64),
            title_len=np.zeros(0, dtype=np.int32),
            doc_len=np.zeros(0, dtype=np.int32),
            alive=np.zeros(0, dtype=bool),
            explicit=np.zeros(0, dtype=bool),
            bound=np.zeros(0, dtype=np.float64),
            vec=np.zeros((0, 0), dtype=np.int8),
            bits=np.zeros((0, 0), dtype=np.uint8),
        )

    def grown(self, capacity: int) -> IndexArrays:
        """Copies of ``capacity`` rows, the present rows first, zeros after them."""

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity, *a.shape[1:]), dtype=a.dtype)
            out[: len(a)] = a
            return out

        return IndexArrays(*(grow(getattr(self, f.name)) for f in fields(self)))

    def taken(self, rows: np.ndarray, capacity: int) -> IndexArrays:
        """Copies of ``capacity`` rows holding ``rows`` densely (a compaction), zeros after."""

        def take(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity, *a.shape[1:]), dtype=a.dtype)
            out[: len(rows)] = a[rows]
            return out

        return IndexArrays(*(take(getattr(self, f.name)) for f in fields(self)))


class Layout:
    """Where the per-slot counters sit in the int64 accumulator lanes, for one query shape.

    For each posting entry it touches, a query adds a value looked up by the entry's code.
    That value packs *digits* side by side: how many query tokens match a tag, the title, a
    keyword, the content; the bound P; and how many hint tokens are keyword tokens. Each
    digit is as wide as its largest value (N, N, N, N, 20·N, |hints|), so additions never
    carry into the next digit, and the digits fill as few 63-bit lanes as they fit in (one
    lane unless the query has ~1,000 distinct tokens or more).
    """

    def __init__(self, n: int, n_hints: int) -> None:
        count = max(n, 1).bit_length()
        widths = dict.fromkeys(("tag", "title", "kw", "content"), count)
        widths["bound"] = max(20 * n, 1).bit_length()
        widths["hint"] = max(n_hints, 1).bit_length()
        self.where: dict[str, tuple[int, int, int]] = {}  # digit -> (lane, shift, mask)
        lane = shift = 0
        for digit in _DIGITS:
            if shift + widths[digit] > 63:
                lane, shift = lane + 1, 0
            self.where[digit] = (lane, shift, (1 << widths[digit]) - 1)
            shift += widths[digit]
        self.lanes = lane + 1
        steps = dict(_BOUND_STEP)
        steps[TAG] = int(2 * tag_weight(n))
        query = np.zeros((self.lanes, CODES), dtype=np.int64)
        for code in range(CODES):
            for bit, digit in _FIELD_DIGIT.items():
                if code & bit:
                    self._add(query, code, digit, 1)
                    self._add(query, code, "bound", steps[bit])
        hint = np.zeros(self.lanes, dtype=np.int64)
        self._add(hint[:, None], 0, "hint", 1)
        # A token that is both a query token and a hint also counts as a hint on KW entries.
        query_hint = query.copy()
        query_hint[:, [code for code in range(CODES) if code & KW]] += hint[:, None]
        for table in (query, query_hint, hint):
            table.flags.writeable = False
        self.query, self.query_hint, self.hint = query, query_hint, hint

    def _add(self, table: np.ndarray, code: int, digit: str, amount: int) -> None:
        lane, shift, _ = self.where[digit]
        table[lane, code] += amount << shift

    def digit(self, lanes: Sequence[np.ndarray], name: str) -> np.ndarray:
        """Decode one digit from accumulated lane values."""
        lane, shift, mask = self.where[name]
        return (lanes[lane] >> shift) & mask

    def hinted(self, lanes: Sequence[np.ndarray]) -> np.ndarray:
        """Whether the hint digit is non-zero: one comparison, as it is its lane's top digit."""
        lane, shift, _ = self.where["hint"]
        return lanes[lane] >= (1 << shift)


@lru_cache(maxsize=512)
def layout_for(n: int, n_hints: int) -> Layout:
    return Layout(n, n_hints)


EMPTY = np.zeros(0, dtype=np.int32)


#: Approximate bytes of one token of a built index: its string, dict entry, Posting
#: and ndarray view (a loaded snapshot's tokens cost less until asked for).
TOKEN_OBJECT_BYTES = 300


class Posting:
    """One token's entries: a numpy part (keyword entries first) plus append buffers."""

    __slots__ = ("entries", "n_kw", "new_kw", "new_other")

    def __init__(self) -> None:
        self.entries: np.ndarray = EMPTY
        self.n_kw = 0
        self.new_kw: array | None = None
        self.new_other: array | None = None

    def pending(self) -> int:
        return len(self.new_kw or ()) + len(self.new_other or ())

    def merge(self) -> None:
        """Fold the append buffers into ``entries``, keeping the keyword entries first."""
        new_kw = np.frombuffer(self.new_kw, np.int32) if self.new_kw else EMPTY
        new_other = np.frombuffer(self.new_other, np.int32) if self.new_other else EMPTY
        old, n_kw = self.entries, self.n_kw
        self.entries = np.concatenate((old[:n_kw], new_kw, old[n_kw:], new_other))
        self.n_kw = n_kw + len(new_kw)
        self.new_kw = self.new_other = None


class TokenIds(dict[str, int]):
    """token → a dense id, assigned on first sight (for the vectorised bulk build)."""

    def __missing__(self, token: str) -> int:
        self[token] = tid = len(self)
        return tid


def tail_of(record: IndexRecord, fields: Fields) -> set[str]:
    """The content's tokens that its first 500 characters lack (a word cut there included)."""
    if len(record.content) <= CONTENT_CHARS:
        return set()
    return token_set(record.content) - fields.content


def codes_of(fields: Fields, tail: set[str]) -> dict[str, int]:
    """token → the fields of this record holding it (TAG | TITLE | KW | CONTENT | TAIL)."""
    codes = dict.fromkeys(fields.content, CONTENT)
    codes.update(dict.fromkeys(tail, TAIL))
    for bit, tokens in ((KW, fields.keywords), (TITLE, fields.title), (TAG, fields.tags)):
        for token in tokens:
            codes[token] = codes.get(token, 0) | bit
    return codes


def recency_bound(updated: np.ndarray, at: float) -> np.ndarray:
    days = np.maximum((at - updated) / SECONDS_PER_DAY, 0.0)
    return 1.0 / (1.0 + days / 30.0) - 2.0 * (days > STALE_DAYS)
