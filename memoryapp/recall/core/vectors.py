"""Memory embeddings as stored data: int8 quantisation, the embedded text, the index's matrix.

No Django. A memory's vector is its embedder's unit vector scaled by 127 and rounded
to int8 (``dim`` bytes: 256 for the shipped model, a quarter of float32); the cosine
of a float query with it is ``q · v / 127`` to within about 0.4 % (the rounding of
each component is at most 1/254). The row keeps the bytes with the model id
(``Memory.embedding``, ``Memory.embedding_model``): a vector of another model is
never compared, it is recomputed (lazily on read, or by ``memory reembed``).

The recall index holds the vectors of its slots in one ``(capacity, dim)`` int8
matrix (``RecallIndex.arrays.vec``, renumbered with the other per-slot arrays); a slot
without a vector is all zeros, which is similar to nothing.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

__all__ = [
    "SCALE", "decode", "embed", "encode", "encode_many", "put", "sign_bits", "similarities",
    "text_of",
]  # fmt: skip

INDEX_DIMS = 128  # components the recall index keeps of each vector (index_form)
SCALE = 127.0  # int8 full scale of a unit vector's components (all within [-1, 1])
_TEXT_CHARS = 2000  # what is embedded of a memory: the title and the content's start


def text_of(title: str, content: str) -> str:
    """The text embedded for a memory: its title, then the start of its content.

    A static model's vector is a mean of word vectors: a longer tail only dilutes it.
    """
    return f"{title}\n{content[:_TEXT_CHARS]}"


def encode_many(vectors: np.ndarray) -> list[bytes]:
    """Each unit vector of ``vectors`` (rows) as its int8 bytes."""
    quantised = np.clip(np.rint(vectors * SCALE), -127, 127).astype(np.int8)
    return [row.tobytes() for row in quantised]


logger = logging.getLogger(__name__)

_recent: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
_RECENT = 1024  # texts: a write embeds a row, and the cache's own-write fold reads it back
_recent_lock = threading.Lock()


def _digest(text: str) -> bytes:
    # The cache is keyed by a digest, never the text: an erased memory's words must not
    # stay in a process's memory (docs/compliance.md, process memory).
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def embed_or_none(embedder, texts: Sequence[str]) -> list[bytes | None]:
    """:func:`embed`, or None for each text when the embedder fails (logged).

    Vectors are derived data: a write whose embedder fails (a remote model down, a
    bug in a user's callable) stores its row without one, and a recall reads the
    row by its words alone; ``memory reembed`` fills the vector in later.
    """
    try:
        return list(embed(embedder, texts))
    except Exception:
        logger.warning(
            "memoryapp: the embedder %r failed on %d text(s); stored without vectors",
            getattr(embedder, "model_id", "?"),
            len(texts),
            exc_info=True,
        )
        return [None] * len(texts)


def embed(embedder, texts: Sequence[str]) -> list[bytes]:
    """The int8 vectors of ``texts`` by ``embedder``, the recently embedded ones reused.

    A single write embeds its row, then folds the same row into the cached index
    (memoryapp.recall.rows.record_of): the second embedding is a dictionary hit.
    """
    model = embedder.model_id
    with _recent_lock:
        keys = [(model, _digest(text)) for text in texts]
        found = [_recent.get(key) for key in keys]
    missing = [n for n, blob in enumerate(found) if blob is None]
    if missing:
        made = encode_many(embedder.embed([texts[n] for n in missing]))
        with _recent_lock:
            for n, blob in zip(missing, made, strict=True):
                found[n] = _recent[keys[n]] = blob
            while len(_recent) > _RECENT:
                _recent.popitem(last=False)
    return found  # type: ignore[return-value]


def encode(vector: np.ndarray) -> bytes:
    """One unit vector as its int8 bytes."""
    return encode_many(vector.reshape(1, -1))[0]


def decode(data: bytes | memoryview | None) -> np.ndarray | None:
    """Stored bytes as an int8 vector (None for None or empty)."""
    if not data:
        return None
    return np.frombuffer(bytes(data), dtype=np.int8)


def put(index, slot: int, vector: bytes | None) -> None:
    """Store ``vector`` (int8 bytes) at ``slot`` of ``index``'s matrix, growing it as needed.

    The matrix is created at the first vector (its dimension is the model's); a vector
    of another dimension (an embedder changed under a running process) is dropped:
    the slot stays similar to nothing until the row is embedded again.
    """
    arrays = index.arrays
    values = None if vector is None else index_form(np.frombuffer(vector, dtype=np.int8))
    if values is not None and not arrays.vec.shape[1] and len(values) % 8 == 0:
        capacity = len(arrays.updated)
        arrays = index.arrays = replace(
            arrays,
            vec=np.zeros((capacity, len(values)), dtype=np.int8),
            bits=np.zeros((capacity, len(values) // 8), dtype=np.uint8),
        )
    if not arrays.vec.shape[1]:
        return
    if values is None or len(values) != arrays.vec.shape[1]:
        arrays.vec[slot] = 0
        arrays.bits[slot] = 0
        return
    arrays.vec[slot] = values
    arrays.bits[slot] = np.packbits(values > 0)


def index_form(values: np.ndarray) -> np.ndarray:
    """A stored int8 vector as the index holds it: its first :data:`INDEX_DIMS` components,
    scaled back to unit length (int8).

    The shipped model is Matryoshka-trained (WordLlama: its leading components are an
    embedding on their own), so the index keeps 128 of the 256 stored components: half
    the bytes, for the index-memory bound (bench/SEMANTIC.md measures both).
    """
    if len(values) <= INDEX_DIMS:
        return values
    head = values[:INDEX_DIMS].astype(np.float32)
    norm = float(np.linalg.norm(head))
    if norm == 0.0:
        return np.zeros(INDEX_DIMS, dtype=np.int8)
    return np.clip(np.rint(head * (SCALE / norm)), -127, 127).astype(np.int8)


def query_form(query: np.ndarray, dims: int) -> np.ndarray:
    """The query's unit vector cut to the index's ``dims`` components, unit length again."""
    head = np.asarray(query[:dims], dtype=np.float32)
    norm = float(np.linalg.norm(head))
    return head / norm if norm else head


def sign_bits(matrix: np.ndarray) -> np.ndarray:
    """The sign bits of int8 rows, packed (a loaded snapshot's prefilter)."""
    return np.packbits(matrix > 0, axis=1)


def similarities(
    matrix: np.ndarray, query: np.ndarray, rows: Sequence[int] | np.ndarray | None = None
) -> np.ndarray:
    """Cosine of the float unit vector ``query`` with each int8 row (all, or ``rows``), float64.

    Computed in float64 by ``einsum``, not BLAS: exact to ~1e-15 whatever the rows' number
    or order, and on the calling thread. A float32 BLAS product rounded to ~1e-7 and its
    rounding moved with OpenBLAS's thread split; and on 2 busy cores that product's
    threads made a warm 100,000-memory recall ~6× slower (p50 16 ms
    against 2.5 ms with OPENBLAS_NUM_THREADS=1, bench/SEMANTIC.md).
    """
    block = matrix if rows is None else matrix[np.asarray(rows, dtype=np.int64)]
    q = np.asarray(query, dtype=np.float64) / SCALE
    out = np.empty(len(block), dtype=np.float64)
    step = 4096  # int8 → float64 blocks of 4 MiB: no float copy of the whole matrix
    for start in range(0, len(block), step):
        part = block[start : start + step]
        np.einsum("ij,j->i", part, q, out=out[start : start + len(part)], casting="unsafe")
    return out
