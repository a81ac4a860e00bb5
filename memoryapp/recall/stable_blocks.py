"""The process's cache of rendered stable blocks, keyed by the slice counters they read."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["StableBlocks"]


class StableBlocks:
    """A small LRU of rendered stable blocks shared by the managers of one process.

    Keyed by the cross-session tail and the (alias, namespace, scope, counter) of
    every slice a block reads — ``(tail, (alias, ns, scope, counter), …)`` — so a block
    is reused exactly while none of its rows changed: an API request or an agent turn
    that starts a fresh manager does not select and render it again. Values are
    ``(text, ids)``, a few KB each.

    A block stored for newer counters of the same slices drops the blocks of their
    older counters: those can never be served again, and they may hold text that has
    since been edited or erased, which should not linger in a worker's memory until
    the LRU happens to evict it. Blocks of the same counters under other tails (other
    sessions of the tenant) stay.
    """

    MAX = 1024  # ~2–4 KB each: a few MiB per process at most

    def __init__(self) -> None:
        self._blocks: OrderedDict[tuple, tuple[str, tuple[str, ...]]] = OrderedDict()
        self._by_slices: dict[tuple, set[tuple]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _slices(key: tuple) -> tuple:
        return tuple(version[:3] for version in key[1:])

    def get(self, key: tuple) -> tuple[str, tuple[str, ...]] | None:
        """The block stored under ``key``, or None."""
        with self._lock:
            found = self._blocks.get(key)
            if found is not None:
                self._blocks.move_to_end(key)
            return found

    def put(self, key: tuple, text: str, ids: Iterable[str]) -> None:
        """Keep one rendered block, dropping its slices' blocks of other counters and the
        least recently used past :data:`MAX`."""
        slices = self._slices(key)
        with self._lock:
            kept = self._by_slices.setdefault(slices, set())
            for other in [k for k in kept if k[1:] != key[1:]]:
                self._drop(other)
            self._blocks[key] = (text, tuple(ids))
            self._blocks.move_to_end(key)
            self._by_slices.setdefault(slices, set()).add(key)
            while len(self._blocks) > self.MAX:
                self._drop(next(iter(self._blocks)))

    def _drop(self, key: tuple) -> None:
        self._blocks.pop(key, None)
        slices = self._slices(key)
        kept = self._by_slices.get(slices)
        if kept is not None:
            kept.discard(key)
            if not kept:
                del self._by_slices[slices]

    def __len__(self) -> int:
        with self._lock:
            return len(self._blocks)

    def clear(self) -> None:
        """Forget every block."""
        with self._lock:
            self._blocks.clear()
            self._by_slices.clear()
