"""A recall index as bytes: what a process persists so that another one need not rebuild it.

Building a slice's index means reading and tokenising every row of it (~45 µs a
row); loading a snapshot means reading one blob, inflating it and wrapping its arrays
(about a millisecond for 1,000 memories, most of it zlib): no object per token until a
query asks for that token. :func:`dump` writes
a compacted :class:`~memoryapp.recall.RecallIndex`; :func:`load` gives an index that
answers every query exactly as the dumped one did and accepts further writes.

Pure Python and numpy, no Django: :mod:`memoryapp.snapshots` stores the bytes.

The format (all numbers little-endian)::

    magic "MRIX" | u32 format | u32 rules-length | rules (utf-8)
    u32 slots | u32 tokens | u32 ids-bytes | u32 token-bytes | u32 entries
    ids joined by NUL | tokens (sorted) joined by NUL
    updated f8[slots] | fingerprint i8[slots] | title-length i4[slots] | explicit u1[slots]
    keyword-entries i4[tokens] | entries-per-token i4[tokens] | entries i4[entries]

then zlib (level 1: the entries are small integers and compress ~2×). ``rules``
names what the token sets depend on (:func:`memoryapp.tokens.rules_id`); a
snapshot written under other rules — another release, jieba installed or not —
is not loaded, so a change of tokenisation can never serve stale postings.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_left

import numpy as np

from .recall import _CODE_BITS, TOKEN_OBJECT_BYTES, RecallIndex, _Posting
from .tokens import rules_id

__all__ = ["FORMAT", "dump", "load"]

#: Bump when the meaning of a posting entry or of a section changes. 2: tokens sorted
#: (format 1 snapshots are not loaded: the first use rebuilds and rewrites them).
FORMAT = 2
_MAGIC = b"MRIX"
_COUNTS = struct.Struct("<5I")
_LE = {np.dtype(t).newbyteorder("<") for t in ("f8", "i8", "i4")}
_STR_HEADER = 49  # sys.getsizeof("") of an ASCII str; its text adds a byte a character


class _PackedPostings(dict[str, _Posting]):
    """A snapshot's postings, each made into a :class:`_Posting` the first time it is asked for.

    A query reads a handful of tokens' postings; creating all of them (thousands of
    objects) would cost more than the rest of a load, and so would a dict of every
    token: the tokens stay one sorted list (a snapshot stores them sorted) searched by
    bisection, beside three arrays of where each token's entries are. Anything that
    needs every posting (a write's repack, a compaction) calls
    :meth:`RecallIndex._own_postings` first, which turns this into a plain dict.
    """

    def __init__(
        self,
        tokens: list[str],
        token_bytes: int,
        arena: np.ndarray,
        n_kw: np.ndarray,
        sizes: np.ndarray,
    ):
        super().__init__()
        self._tokens = tokens  # sorted
        self._ends = np.cumsum(sizes, dtype=np.int64)
        self._sizes = sizes
        self._n_kw = n_kw
        self._arena = arena
        # The token table's memory: each string (header + text), its list slot and its
        # three array cells. Postings made into objects since are counted as a dict's.
        self._packed_bytes = token_bytes + len(tokens) * (_STR_HEADER + 8 + 16)

    def get(self, token: str, default=None):
        found = dict.get(self, token)
        if found is not None:
            return found
        tokens = self._tokens
        i = bisect_left(tokens, token)
        if i == len(tokens) or tokens[i] != token:
            return default
        end = int(self._ends[i])
        posting = _Posting()
        posting.entries = self._arena[end - int(self._sizes[i]) : end]
        posting.n_kw = int(self._n_kw[i])
        self[token] = posting
        return posting

    def token_bytes(self) -> int:
        """Approximate bytes of the token table (see :attr:`RecallIndex.nbytes`)."""
        return self._packed_bytes + TOKEN_OBJECT_BYTES * dict.__len__(self)

    def unpacked(self) -> dict[str, _Posting]:
        """Every posting as a plain dict: the snapshot's tokens, then any added since."""
        out = {token: self.get(token) for token in self._tokens}
        for token, posting in dict.items(self):
            out.setdefault(token, posting)
        return out


def _join(strings: list[str]) -> bytes | None:
    """``strings`` joined by NUL, or None when one of them holds a NUL (never stored)."""
    if any("\x00" in s for s in strings):
        return None
    return "\x00".join(strings).encode("utf-8", "surrogatepass")


def _split(blob: bytes, count: int) -> list[str]:
    if count == 0:
        return []
    parts = blob.decode("utf-8", "surrogatepass").split("\x00")
    if len(parts) != count:
        raise ValueError("snapshot string table does not match its count")
    return parts


def dump(index: RecallIndex) -> bytes | None:
    """The index as snapshot bytes (compacting it first), or None if it cannot be written.

    Args:
        index: Any recall index; it is compacted in place (same answers, dense slots).

    Returns:
        The compressed snapshot, or None when an id or token holds a NUL character.
    """
    with index._lock:
        if index._dead or index._pending:
            index._compact()  # dense slots, every append buffer merged
        n = len(index._ids)
        ids = [i for i in index._ids if i is not None]
        postings = index._own_postings()
        tokens = sorted(postings)  # load() finds a token by bisection
        id_blob, token_blob = _join(ids), _join(tokens)
        if id_blob is None or token_blob is None or len(ids) != n:
            return None
        parts = [postings[t].entries for t in tokens]
        arena = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        n_kw = np.array([postings[t].n_kw for t in tokens], dtype="<i4")
        sizes = np.array([len(part) for part in parts], dtype="<i4")
        rules = rules_id().encode()
        head = _MAGIC + struct.pack("<II", FORMAT, len(rules)) + rules
        counts = _COUNTS.pack(n, len(tokens), len(id_blob), len(token_blob), len(arena))
        body = b"".join(
            (
                head,
                counts,
                id_blob,
                token_blob,
                index._updated[:n].astype("<f8").tobytes(),
                index._fingerprint[:n].astype("<i8").tobytes(),
                index._title_len[:n].astype("<i4").tobytes(),
                index._explicit[:n].astype(np.uint8).tobytes(),
                n_kw.tobytes(),
                sizes.tobytes(),
                arena.astype("<i4").tobytes(),
            )
        )
    return zlib.compress(body, 1)


def load(data: bytes) -> RecallIndex | None:
    """An index from :func:`dump`'s bytes; None when they were written under other rules.

    Raises:
        ValueError: the bytes are not a snapshot (truncated, corrupt).
    """
    try:
        body = zlib.decompress(data)
    except zlib.error as error:
        raise ValueError(f"not a recall snapshot: {error}") from None
    if body[:4] != _MAGIC:
        raise ValueError("not a recall snapshot")
    fmt, rules_len = struct.unpack_from("<II", body, 4)
    at = 12 + rules_len
    if fmt != FORMAT or body[12:at].decode() != rules_id():
        return None
    n, n_tokens, id_bytes, token_bytes, n_entries = _COUNTS.unpack_from(body, at)
    at += _COUNTS.size
    ids = _split(body[at : at + id_bytes], n)
    at += id_bytes
    tokens = _split(body[at : at + token_bytes], n_tokens)
    at += token_bytes
    if tokens != sorted(tokens):  # C-speed: one pass over tokens already in order
        raise ValueError("recall snapshot tokens are not sorted")

    def take(dtype: str, count: int) -> np.ndarray:
        nonlocal at
        array = np.frombuffer(body, dtype=dtype, count=count, offset=at)
        at += array.nbytes
        return array

    updated, fingerprint = take("<f8", n), take("<i8", n)
    title_len, explicit = take("<i4", n), take("u1", n)
    n_kw, sizes, arena = take("<i4", n_tokens), take("<i4", n_tokens), take("<i4", n_entries)
    if at != len(body) or int(sizes.sum()) != n_entries:
        raise ValueError("recall snapshot sections do not add up")
    if n_entries and int(arena.max() >> _CODE_BITS) >= n:
        raise ValueError("recall snapshot entry points past its slots")

    index = RecallIndex()
    index._reserve(n)
    index._ids = list(ids)
    index._slot_of = dict(zip(ids, range(n), strict=True))
    index._updated[:n] = updated
    index._fingerprint[:n] = fingerprint
    index._title_len[:n] = title_len
    index._alive[:n] = True
    index._explicit[:n] = explicit.astype(bool)
    # The entries are copied out of the decompressed body (and entries are views of
    # that copy: postings are never edited in place, only replaced by merges and
    # repacks), so that nothing keeps the body alive: every other section was
    # copied above, and the cache counts what the index holds, not the body too.
    arena = arena.astype(np.int32, copy=True)
    index._postings = _PackedPostings(
        tokens, token_bytes, arena, n_kw.astype(np.int32), sizes.astype(np.int32)
    )
    index._posting_bytes = arena.nbytes
    return index
