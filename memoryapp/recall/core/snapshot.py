"""A recall index as bytes: what a process persists so that another one need not rebuild it.

Building a slice's index means reading and tokenising every row of it (~45 µs a
row); loading a snapshot means reading one blob and wrapping its arrays (about a
third of a millisecond for 1,000 memories): no object per token until a query asks
for that token, which is found by bisection in the stored token table. :func:`dump` writes
a compacted :class:`~memoryapp.recall.core.index.RecallIndex`; :func:`load` gives an index that
answers every query exactly as the dumped one did and accepts further writes.

Pure Python and numpy, no Django: :mod:`memoryapp.db.snapshots` stores the bytes.

The format (all numbers little-endian)::

    magic "MRIX" | u32 format | u32 rules-length | rules (utf-8)
    u32 slots | u32 tokens | u32 ids-bytes | u32 token-bytes | u32 entries | u32 narrow
    ids joined by NUL | tokens (sorted, UTF-8) joined by NUL | token-ends int[tokens]
    updated f8[slots] | fingerprint i8[slots] | title-length int[slots] | explicit u1[slots]
    keyword-entries int[tokens] | entries-per-token int[tokens] | entries int[entries]
    content-length int[slots] | u32 dim | vectors i1[slots × dim]

``dim`` is 0 for an index without embeddings (the ``semantic`` ranking's int8 vectors,
:mod:`memoryapp.recall.core.vectors`); the embedder's model id is part of ``rules``, so a
snapshot written under another model is not loaded either.

Each ``int`` section is u2 when all its values fit in 16 bits (bit k of ``narrow``, in
the order the six are listed), else i4: at a thousand memories every one fits, and
the entries (slot << 5 | field bits) are most of a snapshot's bytes.

``token-ends`` is where each token's bytes end in the token table, so that a
query's token is found by bisection over the bytes without decoding the table.
UTF-8 keeps code-point order, so bytes sort as the tokens do.

Not compressed (format 3): inflating was ~0.9 ms of a 1.2 ms load, most of what a
cold recall of a 1,000-memory tenant cost, for a snapshot about 1.4× larger. Stored
as they are, the bytes are also what the erasure's byte scan can read: tokens of an
erased text left in a snapshot would be found (PostgreSQL keeps the column out of
line and uncompressed, migration 0009). ``rules`` names what the token sets depend
on (:func:`memoryapp.recall.core.tokens.rules_id`); a snapshot written under other rules —
another release, jieba installed or not — is not loaded, so a change of
tokenisation can never serve stale postings.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import replace

import numpy as np

from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.postings import CODE_BITS, TOKEN_OBJECT_BYTES, Posting
from memoryapp.recall.core.tokens import rules_id
from memoryapp.recall.core.vectors import sign_bits

__all__ = ["FORMAT", "dump", "load", "strings"]

#: Bump when the meaning of a posting entry or of a section changes. 2: tokens sorted;
#: 3: not compressed, token ends stored; 4: content lengths (the hybrid ranking's) and the
#: tokens of the content after its first 500 characters (a fifth field bit); 5: vectors.
#: Snapshots of another format are not loaded: the first use rebuilds and rewrites them.
FORMAT = 5
_MAGIC = b"MRIX"
_COUNTS = struct.Struct("<6I")
_WIDE, _NARROW = np.dtype("<i4"), np.dtype("<u2")
_LE = {np.dtype(t).newbyteorder("<") for t in ("f8", "i8", "i4")}
_BYTES_HEADER = 33  # sys.getsizeof(b""): the token table is one bytes object


class _PackedPostings(dict[str, Posting]):
    """A snapshot's postings, each made into a :class:`Posting` the first time it is asked for.

    A query reads a handful of tokens' postings; creating all of them (thousands of
    objects) would cost more than the rest of a load, and so would decoding every
    token: the tokens stay the snapshot's sorted UTF-8 table, searched by bisection,
    beside three arrays of where each token's entries are. Anything that needs every
    posting (a write's repack, a compaction) calls
    :meth:`RecallIndex._own_postings` first, which turns this into a plain dict.
    """

    def __init__(
        self,
        table: bytes,
        token_ends: array[int],
        arena: np.ndarray,
        n_kw: np.ndarray,
        sizes: np.ndarray,
    ):
        super().__init__()
        self._table = table  # sorted tokens, UTF-8, NUL between them
        # A C array of int32: 4 bytes a token where a list of ints costs 36, and its
        # items come back as Python ints as fast as a list's (a numpy array's do not).
        self._token_ends = token_ends
        self._ends = np.cumsum(sizes, dtype=np.int32)
        self._sizes = sizes
        self._n_kw = n_kw
        self._arena = arena
        # The token table, its ends and each token's three array cells (4 bytes
        # each). Postings made into objects since are counted as a dict's.
        self._packed_bytes = len(table) + _BYTES_HEADER + len(token_ends) * (4 + 12)

    def _token(self, i: int) -> bytes:
        ends = self._token_ends
        return self._table[ends[i - 1] + 1 if i else 0 : ends[i]]

    def _find(self, key: bytes) -> int:
        """The position of ``key`` in the token table, or -1."""
        ends, table = self._token_ends, self._table
        lo, hi = 0, len(ends)
        while lo < hi:
            mid = (lo + hi) // 2
            if table[ends[mid - 1] + 1 if mid else 0 : ends[mid]] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(ends) and self._token(lo) == key else -1

    def get(self, token: str, default=None):
        found = dict.get(self, token)
        if found is not None:
            return found
        i = self._find(token.encode("utf-8", "surrogatepass"))
        if i < 0:
            return default
        return self._make(token, i)

    def _make(self, token: str, i: int) -> Posting:
        end = int(self._ends[i])
        posting = Posting()
        posting.entries = self._arena[end - int(self._sizes[i]) : end]
        posting.n_kw = int(self._n_kw[i])
        self[token] = posting
        return posting

    def token_bytes(self) -> int:
        """Approximate bytes of the token table (see :attr:`RecallIndex.nbytes`)."""
        return self._packed_bytes + TOKEN_OBJECT_BYTES * dict.__len__(self)

    def tokens(self) -> list[str]:
        """Every token, sorted: the snapshot's (its table is sorted), then any added since."""
        tokens = _split(self._table, len(self._token_ends))
        added = [t for t in dict.keys(self) if self._find(t.encode("utf-8", "surrogatepass")) < 0]
        return sorted(tokens + added) if added else tokens

    def unpacked(self) -> dict[str, Posting]:
        """Every posting as a plain dict: the snapshot's tokens, then any added since."""
        tokens = _split(self._table, len(self._token_ends))
        out = {
            token: dict.get(self, token) or self._make(token, i) for i, token in enumerate(tokens)
        }
        for token, posting in dict.items(self):
            out.setdefault(token, posting)
        return out


def _join(strings: list[str]) -> bytes | None:
    """``strings`` joined by NUL, or None when one of them holds a NUL (never stored)."""
    if any("\x00" in s for s in strings):
        return None
    return "\x00".join(strings).encode("utf-8", "surrogatepass")


def _split(blob: bytes | memoryview, count: int) -> list[str]:
    if count == 0:
        return []
    parts = bytes(blob).decode("utf-8", "surrogatepass").split("\x00")
    if len(parts) != count:
        raise ValueError("snapshot string table does not match its count")
    return parts


def _rules(model: str) -> str:
    return f"{rules_id()}|{model}" if model else rules_id()


def dump(index: RecallIndex, model: str = "") -> bytes | None:
    """The index as snapshot bytes (compacting it first), or None if it cannot be written.

    Args:
        index: Any recall index; it is compacted in place (same answers, dense slots).
        model: The embedder's model id of the index's vectors ("" without embeddings).

    Returns:
        The snapshot, or None when an id or token holds a NUL character.
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
        token_ends, n_kw, sizes, arena = _posting_arrays(postings, tokens)
        rules = _rules(model).encode()
        head = _MAGIC + struct.pack("<II", FORMAT, len(rules)) + rules
        sections: list[np.ndarray] = [token_ends, index.arrays.title_len[:n], n_kw, sizes, arena]
        sections.append(index.arrays.doc_len[:n])
        narrow, packed = _pack(sections)
        counts = _COUNTS.pack(n, len(tokens), len(id_blob), len(token_blob), len(arena), narrow)
        return b"".join(
            (
                head,
                counts,
                id_blob,
                token_blob,
                packed[0],
                index.arrays.updated[:n].astype("<f8").tobytes(),
                index.arrays.fingerprint[:n].astype("<i8").tobytes(),
                packed[1],
                index.arrays.explicit[:n].astype(np.uint8).tobytes(),
                *packed[2:],
                struct.pack("<I", index.arrays.vec.shape[1]),
                index.arrays.vec[:n].tobytes(),
            )
        )


def _posting_arrays(
    postings: dict, tokens: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where each token's text ends in the token blob, its keyword count, its size, the arena."""
    encoded = np.array([len(t.encode("utf-8", "surrogatepass")) + 1 for t in tokens])
    token_ends = np.cumsum(encoded, dtype=np.int64) - 1
    parts = [postings[t].entries for t in tokens]
    arena = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    n_kw = np.array([postings[t].n_kw for t in tokens], dtype=np.int64)
    sizes = np.array([len(part) for part in parts], dtype=np.int64)
    return token_ends, n_kw, sizes, arena


def _pack(sections: list[np.ndarray]) -> tuple[int, list[bytes]]:
    """Each section as bytes, 2-byte wide when all its values fit (bit k of ``narrow``)."""
    narrow = sum(1 << k if _fits_u2(values) else 0 for k, values in enumerate(sections))
    packed = [
        values.astype(_NARROW if narrow >> k & 1 else _WIDE).tobytes()
        for k, values in enumerate(sections)
    ]
    return narrow, packed


def _fits_u2(values: np.ndarray) -> bool:
    return not len(values) or (int(values.min()) >= 0 and int(values.max()) <= 0xFFFF)


def _header(
    data: bytes, model: str | None = ""
) -> tuple[int, tuple[int, int, int, int, int, int]] | None:
    """Where the sections start, the five counts and ``narrow``; None for another format
    or rules.

    Raises:
        ValueError: the bytes are not a snapshot.
    """
    if data[:4] != _MAGIC or len(data) < 12:
        raise ValueError("not a recall snapshot")
    fmt, rules_len = struct.unpack_from("<II", data, 4)
    at = 12 + rules_len
    rules = data[12:at].decode("utf-8", "replace")
    if model is None:  # any embedder's (the erasure reads a snapshot's strings whatever made it)
        rules = rules.split("|", 1)[0]
    if fmt != FORMAT or rules != _rules(model or ""):
        return None
    if len(data) < at + _COUNTS.size:
        raise ValueError("recall snapshot is truncated")
    return at + _COUNTS.size, _COUNTS.unpack_from(data, at)


def strings(data: bytes) -> bytes:
    """The snapshot's ids and tokens (NUL-separated UTF-8), for the erasure's kept-row check.

    Empty for bytes of another format (nothing a current snapshot could explain).
    """
    try:
        found = _header(data, None)
    except ValueError:
        return b""
    if found is None:
        return b""
    at, (_n, _tokens, id_bytes, token_bytes, _entries, _narrow) = found
    return data[at : at + id_bytes] + b"\x00" + data[at + id_bytes : at + id_bytes + token_bytes]


def _load_vectors(index: RecallIndex, vec: np.ndarray) -> None:
    """The snapshot's vectors (and their sign bits) into the freshly reserved index."""
    n, dim = vec.shape
    if dim:
        capacity = len(index.arrays.updated)
        matrix = np.zeros((capacity, dim), dtype=np.int8)
        matrix[:n] = vec
        bits = np.zeros((capacity, dim // 8), dtype=np.uint8)
        bits[:n] = sign_bits(vec)
        index.arrays = replace(index.arrays, vec=matrix, bits=bits)


def load(data: bytes, model: str | None = None) -> RecallIndex | None:
    """An index from :func:`dump`'s bytes; None when they were written in another format,
    under other rules or by another embedder (the caller rebuilds the index and writes it
    anew). ``model``: the current embedder's model id ("" without embeddings; None: any).

    Raises:
        ValueError: the bytes are not a snapshot (truncated, corrupt).
    """
    if data[:4] != _MAGIC:
        if data[:1] == b"\x78":  # a format 1-2 snapshot: zlib, whose stream starts 0x78
            return None
        raise ValueError("not a recall snapshot")
    found = _header(data, model)
    if found is None:
        return None
    at, (n, n_tokens, id_bytes, token_bytes, n_entries, narrow) = found
    if narrow >> 6:
        raise ValueError("recall snapshot names sections it does not have")
    ints = [_NARROW if narrow >> k & 1 else _WIDE for k in range(6)]
    ids = _split(data[at : at + id_bytes], n)
    at += id_bytes
    table = data[at : at + token_bytes]  # a copy: nothing keeps ``data`` alive
    at += token_bytes

    def take(dtype: str | np.dtype, count: int) -> np.ndarray:
        nonlocal at
        if at + np.dtype(dtype).itemsize * count > len(data):
            raise ValueError("recall snapshot is truncated")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=at)
        at += array.nbytes
        return array

    token_ends = take(ints[0], n_tokens)
    updated, fingerprint = take("<f8", n), take("<i8", n)
    title_len, explicit = take(ints[1], n), take("u1", n)
    n_kw, sizes, arena = take(ints[2], n_tokens), take(ints[3], n_tokens), take(ints[4], n_entries)
    doc_len = take(ints[5], n)
    (dim,) = take("<u4", 1).tolist()
    vec = take("i1", n * dim)
    if at != len(data) or int(sizes.sum()) != n_entries:
        raise ValueError("recall snapshot sections do not add up")
    if n_tokens and (
        int(token_ends[-1]) != len(table)
        or int(token_ends[0]) < 1
        or bool((np.diff(token_ends.astype(np.int64)) < 2).any())
    ):
        raise ValueError("recall snapshot token table does not match its ends")
    if n_entries and int(arena.max() >> CODE_BITS) >= n:
        raise ValueError("recall snapshot entry points past its slots")

    index = RecallIndex()
    index._reserve(n)
    index._ids = tuple(ids)  # untracked by the cycle collector (RecallIndex._writable_ids)
    index._slot_of = dict(zip(ids, range(n), strict=True))
    index.arrays.updated[:n] = updated
    index.arrays.fingerprint[:n] = fingerprint
    index.arrays.title_len[:n] = title_len
    index.arrays.doc_len[:n] = doc_len
    index.arrays.alive[:n] = True
    index.arrays.explicit[:n] = explicit.astype(bool)
    _load_vectors(index, vec.reshape(n, dim))
    # Every section is copied out of ``data`` (entries are views of the arena's copy:
    # postings are never edited in place, only replaced by merges and repacks), so
    # that nothing keeps the fetched bytes alive and the cache counts what the index
    # holds, not those bytes too.
    arena = arena.astype(np.int32, copy=True)
    index._postings = _PackedPostings(
        table,
        array("i", token_ends.astype(np.int32).tobytes()),
        arena,
        n_kw.astype(np.int32),
        sizes.astype(np.int32),
    )
    index._posting_bytes = arena.nbytes
    return index
