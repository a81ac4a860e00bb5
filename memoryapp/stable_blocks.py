"""The process's cache of rendered stable blocks, keyed by the slice counters they read."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["StableBlocks"]


class StableBlocks:
    """A small LRU of rendered stable blocks shared by the managers of one process.

    Keyed by the cross-session tail and the (alias, namespace, scope, counter) of
    every slice a block reads, so a block is reused exactly while none of its rows
    changed: an API request or an agent turn that starts a fresh manager does not
    select and render it again. Values are ``(text, ids)``, about 2 KB each.
    """

    MAX = 256

    def __init__(self) -> None:
        self._blocks: OrderedDict[tuple, tuple[str, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> tuple[str, tuple[str, ...]] | None:
        """The block stored under ``key``, or None."""
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
            return found

    def put(self, key: tuple, text: str, ids: Iterable[str]) -> None:
        """Keep one rendered block, dropping the least recently used past :data:`MAX`."""
        with self._lock:
            self._blocks[key] = (text, tuple(ids))
            self._blocks.move_to_end(key)
            while len(self._blocks) > self.MAX:
                self._blocks.popitem(last=False)

    def clear(self) -> None:
        """Forget every block."""
        with self._lock:
            self._blocks.clear()
