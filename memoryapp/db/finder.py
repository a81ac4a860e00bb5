"""Multi-pattern byte search whose cost follows the searched bytes, not the number of patterns.

Used by the erasure's byte scan (:func:`memoryapp.db.purge.scan`, over database
files) and by its kept-row check (:mod:`memoryapp.erasure.kept`, over the text
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
    """

    TABLE_BITS = 22
    MULTIPLIER = 0x9E3779B97F4A7C15

    def __init__(self, pieces: Sequence[bytes]) -> None:
        import numpy as np

        self.np = np
        self.pieces = list(pieces)
        self.anchors: dict[int, list[tuple[int, int]]] = {}
        for index, piece in enumerate(self.pieces):
            if len(piece) < 8:
                raise ValueError("scan pieces must be at least 8 bytes long")
            offset = (len(piece) - 8) // 2  # the middle: value prefixes are often shared
            word = int.from_bytes(piece[offset : offset + 8], "little")
            self.anchors.setdefault(word, []).append((index, offset))
        self.table = np.zeros(1 << self.TABLE_BITS, dtype=bool)
        words = np.array(list(self.anchors), dtype=np.uint64)
        self.table[self._hash(words)] = True

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
        for align in range(8):
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
