"""Multi-pattern byte search whose cost follows the searched bytes, not the number of patterns.

Used by the erasure's byte scan (:func:`memoryapp.db.purge.scan.scan`, over database
files) and by its kept-row check (:mod:`memoryapp.compliance.kept`, over the text
of the rows an erasure kept).
"""

from __future__ import annotations

from collections.abc import Sequence


class Finder:
    """Multi-pattern search: an 8-byte anchor per piece, looked up for every offset at once.

    For each of the 8 byte alignments the window is viewed as little-endian
    64-bit words (numpy); a multiplicative hash of each word indexes a bitmap
    of the anchors' hashes, and only the few candidate offsets are compared
    exactly in Python. ``bytes.find`` per piece would cost pieces × bytes.

    Each candidate costs Python time, so each piece's anchor is its 8 bytes
    least shared with the other pieces: in text made of common words (a
    value's prefix, "the con…") the middle of a piece recurs in much of the
    searched text; its rarest 8 bytes seldom do.
    """

    TABLE_BITS = 22
    MULTIPLIER = 0x9E3779B97F4A7C15
    ALIGNMENTS: tuple[int, ...] = tuple(range(8))
    """The byte offsets (mod 8) at which the searched words are hashed."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        import numpy as np

        self.np = np
        self.pieces = list(pieces)
        self.anchors: dict[int, list[tuple[int, int]]] = {}
        if any(len(piece) < 8 for piece in self.pieces):
            raise ValueError("scan pieces must be at least 8 bytes long")
        for index, (piece, offset) in enumerate(
            zip(self.pieces, _anchor_offsets(np, self.pieces), strict=True)
        ):
            word = int.from_bytes(piece[offset : offset + 8], "little")
            self.anchors.setdefault(word, []).append((index, offset))
        self.table = np.zeros(1 << self.TABLE_BITS, dtype=bool)
        self._mark(list(self.anchors))
        self._known = 0  # len(found) when the bitmap was last refreshed

    def _mark(self, words: list[int]) -> None:
        np = self.np
        self.table[:] = False
        if words:
            self.table[self._hash(np.array(words, dtype=np.uint64))] = True

    def _refresh(self, found: set[int]) -> None:
        """Drop from the bitmap the anchors whose pieces are all found.

        Text shared between rows repeats the same anchors over and over: once
        their pieces are found, each later occurrence would still cost a
        Python-level lookup.
        """
        if len(found) == self._known:
            return
        self._known = len(found)
        self._mark(
            [w for w, entries in self.anchors.items() if any(i not in found for i, _ in entries)]
        )

    def _hash(self, words):
        np = self.np
        with np.errstate(over="ignore"):
            return (words * np.uint64(self.MULTIPLIER)) >> np.uint64(64 - self.TABLE_BITS)

    def search(self, window: bytes, found: set[int]) -> None:
        """Add to ``found`` the index of every piece that occurs in ``window``.

        Pieces already in ``found`` are not compared again, so a caller can
        search chunk after chunk and stop once every piece is found.
        """
        np = self.np
        if len(found) >= len(self.pieces):
            return
        self._refresh(found)
        for align in self.ALIGNMENTS:
            count = (len(window) - align) // 8
            if count <= 0:
                continue
            words = np.frombuffer(window, dtype="<u8", count=count, offset=align)
            for c in np.flatnonzero(self.table[self._hash(words)]):
                for index, offset in self.anchors.get(int(words[c]), ()):
                    if index in found:
                        continue
                    start = align + 8 * int(c) - offset
                    piece = self.pieces[index]
                    if start >= 0 and window[start : start + len(piece)] == piece:
                        found.add(index)


def _anchor_offsets(np, pieces: Sequence[bytes]) -> list[int]:
    """Each piece's anchor offset: its least common 8-byte window, nearest the middle.

    "Common" is estimated by how often a window occurs in all the pieces (text
    shared by many values recurs in them too). Vectorised: it runs for every
    scan, over up to thousands of pieces.
    """
    if not pieces:
        return []
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    windows = lengths - 7  # 8-byte windows per piece
    seg = np.repeat(np.arange(len(pieces)), windows)
    first = np.cumsum(windows) - windows  # index of each piece's first window
    j = np.arange(int(windows.sum())) - np.repeat(first, windows)  # offset in its piece
    at = np.repeat(np.cumsum(lengths) - lengths, windows) + j  # offset in ``data``
    words = np.lib.stride_tricks.sliding_window_view(data, 8)[at].view("<u8").ravel()
    _, inverse, counts = np.unique(words, return_inverse=True, return_counts=True)
    middle = np.repeat((lengths - 8) // 2, windows)
    order = np.lexsort((np.abs(j - middle), counts[inverse.ravel()], seg))
    return j[order][first].tolist()


class FileFinder(Finder):
    """:class:`Finder` for the byte scan of database files: 2 word alignments, not 8.

    ``Finder`` hashes the 64-bit word at every byte offset (eight numpy passes
    over each chunk), and one anchor per piece is enough. Here words are hashed
    at offsets 0 and 4 (mod 8) only: a piece that starts at offset ``s`` has one
    of those words inside it at an offset ``o ≡ -s (mod 4)``, ``o <= 3``, so
    each piece gets four anchors — one per class of ``o`` mod 4, each the least
    common 8 bytes of its class — and pieces must be at least 11 bytes long.
    The hashing is most of the cost per byte: a gigabyte reads about three
    times faster (bench/ERASURE.md), for the same answer (tests/compliance/test_purge_method.py).
    """

    ALIGNMENTS = (0, 4)
    MIN_BYTES = 11

    def __init__(self, pieces: Sequence[bytes]) -> None:
        import numpy as np

        self.np = np
        self.pieces = list(pieces)
        if any(len(piece) < self.MIN_BYTES for piece in self.pieces):
            raise ValueError(f"file scan pieces must be at least {self.MIN_BYTES} bytes long")
        self.anchors: dict[int, list[tuple[int, int]]] = {}
        for index, offsets in enumerate(_anchor_classes(np, self.pieces)):
            piece = self.pieces[index]
            for offset in offsets:
                word = int.from_bytes(piece[offset : offset + 8], "little")
                self.anchors.setdefault(word, []).append((index, offset))
        self.table = np.zeros(1 << self.TABLE_BITS, dtype=bool)
        self._mark(list(self.anchors))
        self._known = 0


def _anchor_classes(np, pieces: Sequence[bytes]) -> list[list[int]]:
    """Per piece, four anchor offsets: per class of offset mod 4, its least common 8 bytes.

    As :func:`_anchor_offsets`: "common" is how often an 8-byte window
    occurs in all the pieces; ties go to the offset nearest the middle.
    """
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    windows = lengths - 7
    seg = np.repeat(np.arange(len(pieces)), windows)
    first = np.cumsum(windows) - windows
    j = np.arange(int(windows.sum())) - np.repeat(first, windows)  # offset in its piece
    at = np.repeat(np.cumsum(lengths) - lengths, windows) + j
    words = np.lib.stride_tricks.sliding_window_view(data, 8)[at].view("<u8").ravel()
    _, inverse, counts = np.unique(words, return_inverse=True, return_counts=True)
    middle = np.repeat((lengths - 8) // 2, windows)
    group = seg * 4 + j % 4
    order = np.lexsort((np.abs(j - middle), counts[inverse.ravel()], group))
    grouped = group[order]
    heads = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    out: list[list[int]] = [[] for _ in pieces]
    for s, o in zip(seg[order][heads].tolist(), j[order][heads].tolist(), strict=True):
        out[s].append(o)
    return out
