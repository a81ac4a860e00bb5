"""The exact, incremental in-memory recall index (numpy), scoring as :mod:`.scoring` does.

The posting layout lives in :mod:`memoryapp.recall.core.postings`, the bounds and exact top-k in
:mod:`memoryapp.recall.core.pruning`; this module keeps the index's own operations.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np

from memoryapp.recall.core import pruning, vectors
from memoryapp.recall.core.postings import (
    BOUND_REFRESH_SECONDS,
    CODE_BITS,
    CODE_MASK,
    EMPTY,
    KW,
    MAX_SLOTS,
    TOKEN_OBJECT_BYTES,
    IndexArrays,
    Layout,
    Posting,
    TokenIds,
    codes_of,
    layout_for,
    recency_bound,
    tail_of,
)
from memoryapp.recall.core.scoring import (
    Fields,
    IndexRecord,
    Scored,
    fields_of,
)
from memoryapp.recall.core.tokens import path_hints, query_tokens


class RecallIndex:
    """Exact in-memory index of one namespace's live memories; incremental.

    :meth:`query` returns exactly what scoring every record with :func:`score`, dropping the
    gated and excluded ones and sorting by :func:`rank_key` (score descending, then id
    ascending) returns: the same ids, order and float scores. It scatter-adds packed
    per-field counts from the postings of the query and hint tokens, bounds every
    candidate's score from those counts and a cached recency bound, and runs the exact
    formula only on the candidates whose bound can reach the top k.

    A lock serialises all methods, so one index can be shared between threads.
    """

    def __init__(self, records: Iterable[IndexRecord] = ()) -> None:
        """Create an index, optionally bulk-loading ``records``.

        Args:
            records: Initial records (see :meth:`bulk_load`).
        """
        self._lock = threading.RLock()
        self._postings: dict[str, Posting] = {}
        self._slot_of: dict[str, int] = {}
        # slot -> id, None once dead. A tuple until the first change (see _writable_ids).
        self._ids: list[str | None] | tuple[str | None, ...] = []
        self._dead = 0
        self.arrays = IndexArrays.empty()  # the per-slot arrays (replaced as they grow)
        self._bound_time: float | None = None  # when arrays.bound was evaluated
        # Accumulator lanes; all zero between queries (a query re-zeroes what it touched).
        self._acc: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        self._posting_bytes = 0  # numpy entries, kept up to date by _merge and _repack
        self._pending = 0  # entries still in append buffers
        # The hybrid ranking's memo of English word forms
        # (memoryapp.recall.core.stemming.StemForms),
        # made on its first query: told of each new token, dropped when the postings repack.
        self._stem_forms: Any = None
        self._reserve(64)
        self.bulk_load(records)

    # ------------------------------------------------------------------ size and membership
    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, id: object) -> bool:
        return id in self._slot_of

    def ids(self) -> set[str]:
        """The ids of the indexed records, as a new set."""
        with self._lock:
            return set(self._slot_of)

    def fingerprint(self, id: str) -> int | None:
        """The :attr:`IndexRecord.fingerprint` indexed for ``id``, or None when not indexed."""
        with self._lock:
            slot = self._slot_of.get(id)
            return None if slot is None else int(self.arrays.fingerprint[slot])

    @property
    def nbytes(self) -> int:
        """Approximate memory footprint in bytes: numpy data plus Python object overhead."""
        with self._lock:
            per_slot = 8 + 8 + 4 + 4 + 1 + 1 + 8 + 8 * len(self._acc)
            return (
                self._posting_bytes
                + 4 * self._pending
                + per_slot * len(self.arrays.updated)
                + self._token_bytes()
                + 175 * len(self._ids)  # the id string, dict entry, slot int, list slot
                + (0 if self._stem_forms is None else self._stem_forms.nbytes)
                + self.arrays.vec.nbytes
                + self.arrays.bits.nbytes
            )

    def _token_bytes(self) -> int:
        packed = getattr(self._postings, "token_bytes", None)  # a loaded snapshot's
        return TOKEN_OBJECT_BYTES * len(self._postings) if packed is None else packed()

    def _own_postings(self) -> dict[str, Posting]:
        """The postings as a plain dict (a loaded snapshot makes its postings lazily)."""
        if type(self._postings) is not dict:
            self._postings = self._postings.unpacked()  # type: ignore[attr-defined]
        return self._postings

    # ------------------------------------------------------------------------------ writes
    def add(self, record: IndexRecord) -> None:
        """Insert ``record``, or replace the record with the same id (no rebuild).

        Args:
            record: The record.
        """
        fields = fields_of(record)
        with self._lock:
            tail = tail_of(record, fields)
            base = self._new_slot(record, fields, len(tail)) << CODE_BITS
            codes = codes_of(fields, tail)
            postings = self._postings
            for token, code in codes.items():
                posting = postings.get(token)
                if posting is None:
                    posting = postings[token] = Posting()
                    if self._stem_forms is not None:
                        self._stem_forms.added(token)
                if code & KW:
                    if posting.new_kw is None:
                        posting.new_kw = array("i")
                    posting.new_kw.append(base | code)
                else:
                    if posting.new_other is None:
                        posting.new_other = array("i")
                    posting.new_other.append(base | code)
            self._pending += len(codes)
            if self._needs_compaction():
                self._compact()

    def remove(self, id: str) -> bool:
        """Drop the record with this id.

        Args:
            id: The memory id.

        Returns:
            Whether it was indexed.
        """
        with self._lock:
            if not self._kill(id):
                return False
            if self._needs_compaction():
                self._compact()
            return True

    def remove_many(self, ids: Iterable[str]) -> int:
        """Drop the records with these ids, compacting at most once.

        Args:
            ids: Memory ids (unknown ones are ignored).

        Returns:
            How many were indexed.
        """
        with self._lock:
            removed = sum(map(self._kill, ids))
            if self._needs_compaction():
                self._compact()
            return removed

    def compact(self) -> None:
        """Drop every dead slot's entries now, and the tokens no live record holds.

        Used after an erasure: until a compaction, a removed record's tokens stay
        in the index's token table.
        """
        with self._lock:
            if self._dead or self._pending:
                self._compact()

    def bulk_load(self, records: Iterable[IndexRecord]) -> None:
        """Insert many records at once; a record replaces any earlier one with its id.

        Postings are built with vector operations rather than per-entry appends. ``records``
        is consumed once, in order, so a generator streams the build.

        Args:
            records: The records (any iterable, including a generator).
        """
        token_ids = TokenIds()
        tids, codes, counts = array("i"), array("b"), array("i")
        with self._lock:
            first = len(self._ids)
            # One pass over an iterable: a streamed build never holds all the records
            # at once (at 100,000 memories they would outweigh the index several times).
            for record in records:
                fields = fields_of(record)
                tail = tail_of(record, fields)
                self._new_slot(record, fields, len(tail))
                record_codes = codes_of(fields, tail)
                tids.extend(map(token_ids.__getitem__, record_codes))
                codes.extend(record_codes.values())
                counts.append(len(record_codes))
            if len(self._ids) == first:
                return
            entries = np.repeat(
                np.arange(first, len(self._ids), dtype=np.int32), np.frombuffer(counts, np.int32)
            )
            entries <<= CODE_BITS
            entries |= np.frombuffer(codes, np.int8)
            del codes
            new = (list(token_ids), np.frombuffer(tids, np.int32), entries)
            if self._needs_compaction():
                self._compact(new)
            else:
                self._repack(new=new)
            self._ids = tuple(self._ids)  # see _writable_ids

    def _reserve(self, capacity: int) -> None:
        if capacity <= len(self.arrays.updated):
            return
        capacity = max(capacity, 2 * len(self.arrays.updated))

        self.arrays = self.arrays.grown(capacity)
        self._acc = [np.concatenate((a, np.zeros(capacity - len(a), a.dtype))) for a in self._acc]

    def _new_slot(self, record: IndexRecord, fields: Fields, tail: int) -> int:
        """Tombstone any older slot of this id and fill in a fresh one."""
        self._kill(record.id)
        slot = len(self._ids)
        if slot >= MAX_SLOTS:
            raise OverflowError("recall index is full")
        self._reserve(slot + 1)
        self._writable_ids().append(record.id)
        self._slot_of[record.id] = slot
        self.arrays.updated[slot] = record.updated_at
        self.arrays.fingerprint[slot] = record.fingerprint
        self.arrays.title_len[slot] = len(fields.title)
        self.arrays.doc_len[slot] = len(fields.content) + tail
        self.arrays.alive[slot] = True
        self.arrays.explicit[slot] = record.explicit
        vectors.put(self, slot, record.vector)
        if self._bound_time is not None:
            self.arrays.bound[slot] = recency_bound(self.arrays.updated[slot], self._bound_time)
        return slot

    def _kill(self, id: str) -> bool:
        slot = self._slot_of.pop(id, None)
        if slot is None:
            return False
        self._writable_ids()[slot] = None
        self.arrays.alive[slot] = False
        self._dead += 1
        return True

    def _writable_ids(self) -> list[str | None]:
        """The slot ids as a list, to change them.

        A loaded or freshly built index keeps them in a tuple: Python's cycle collector
        stops visiting a tuple of strings once it has seen it, while it reads every item
        of a list on each full collection. With ~600 indexes of 1,000 ids held, a full
        collection spent ~30 ms on those reads (one cache miss per id), a pause every
        few hundred requests of a worker.
        """
        ids = self._ids
        if not isinstance(ids, list):
            ids = self._ids = list(ids)
        return ids

    def _needs_compaction(self) -> bool:
        return self._dead > 0 and 4 * self._dead >= len(self._ids)

    def _compact(self, new: tuple[list[str], np.ndarray, np.ndarray] | None = None) -> None:
        """Renumber the live slots densely and drop the dead slots' entries."""
        live = np.flatnonzero(self.arrays.alive[: len(self._ids)])
        remap = np.full(len(self._ids), -1, dtype=np.int64)
        remap[live] = np.arange(len(live))
        self._ids = [self._ids[slot] for slot in live.tolist()]
        self._slot_of = {id: slot for slot, id in enumerate(self._ids) if id is not None}
        capacity = max(64, 2 * len(live))
        self.arrays = self.arrays.taken(live, capacity)
        self._acc = [np.zeros(capacity, dtype=np.int64) for _ in self._acc]
        self._dead = 0
        self._repack(remap, new)

    def _merge(self, posting: Posting) -> None:
        # An arena view's bytes stay counted in the arena; an owned array is replaced.
        before = posting.entries.nbytes if posting.entries.base is None else 0
        self._pending -= posting.pending()
        posting.merge()
        self._posting_bytes += posting.entries.nbytes - before

    def _repack(
        self,
        remap: np.ndarray | None = None,
        new: tuple[list[str], np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Rebuild every posting as a view of one shared arena, with vector operations.

        Args:
            remap: old slot → new slot (−1: dropped), to renumber after a compaction.
            new: Bulk entries to add: (tokens by id, token id per entry, entries).
        """
        tokens = list(self._own_postings())
        parts: list[Any] = []
        for token in tokens:
            p = self._postings[token]
            parts += (p.entries[: p.n_kw], p.new_kw or (), p.entries[p.n_kw :], p.new_other or ())
        # Part 2i holds token i's keyword entries, part 2i + 1 the others.
        lengths = np.array([len(part) for part in parts], dtype=np.int64)
        lengths = lengths.reshape(-1, 2, 2).sum(axis=2).ravel()
        arena = np.concatenate([np.asarray(part, dtype=np.int32) for part in parts] + [EMPTY])
        if new is not None:
            new_tokens, tids, entries = new
            position = {token: i for i, token in enumerate(tokens)}
            for token in new_tokens:
                if token not in position:
                    position[token] = len(tokens)
                    tokens.append(token)
                    self._postings[token] = Posting()
            # Group the new entries by part after the old ones (a stable sort keeps each
            # part in slot order). int32 keys halve the temporaries of a 100k build.
            final = np.array([position[token] for token in new_tokens], dtype=np.int32)
            part = np.concatenate(
                (
                    np.repeat(np.arange(len(lengths), dtype=np.int32), lengths),
                    2 * final[tids] + ((entries & KW) == 0).astype(np.int32),
                )
            )
            order = np.argsort(part, kind="stable")
            lengths = np.bincount(part, minlength=2 * len(tokens))
            del part
            arena = np.concatenate((arena, entries))[order]
            del order
        if remap is not None:
            part = np.repeat(np.arange(len(lengths)), lengths)
            slot = remap[arena >> CODE_BITS]
            keep = slot >= 0
            lengths = np.bincount(part[keep], minlength=len(lengths))
            arena = ((slot[keep] << CODE_BITS) | (arena[keep] & CODE_MASK)).astype(np.int32)
        ends = np.cumsum(lengths).tolist()
        sizes = lengths.tolist()
        postings: dict[str, Posting] = {}
        for i, token in enumerate(tokens):
            end = ends[2 * i + 1]
            start = end - sizes[2 * i] - sizes[2 * i + 1]
            if start == end:
                continue
            p = self._postings[token]
            p.entries, p.n_kw = arena[start:end], sizes[2 * i]
            p.new_kw = p.new_other = None
            postings[token] = p
        self._postings = postings
        self._posting_bytes = arena.nbytes
        self._pending = 0
        self._stem_forms = None  # tokens may have gone: the next hybrid query lists them anew

    # ------------------------------------------------------------------------------- query
    def query(
        self,
        query: str,
        messages: Iterable[Any] | None = None,
        top_k: int = 5,
        exclude_ids: Iterable[str] = (),
        now: float | None = None,
    ) -> list[Scored]:
        """The top ``top_k`` records for ``query``, highest score first.

        Args:
            query: The current user message.
            messages: Recent chat messages, for the path hints (:func:`path_hints`).
            top_k: How many hits at most.
            exclude_ids: Ids never returned (e.g. those shown in the stable block).
            now: The current time, POSIX seconds; defaults to ``time.time()``.

        Returns:
            The hits in :func:`rank_key` order; identical to brute-force :func:`score`.
        """
        return self.query_tokenized(
            query_tokens(query), path_hints(messages), top_k, exclude_ids, now
        )

    def query_tokenized(
        self,
        qtokens: frozenset[str],
        hints: frozenset[str] = frozenset(),
        top_k: int = 5,
        exclude_ids: Iterable[str] = (),
        now: float | None = None,
    ) -> list[Scored]:
        """Like :meth:`query`, from already computed query and hint tokens.

        Args:
            qtokens: The query tokens (:func:`query_tokens`).
            hints: The path-hint tokens (:func:`path_hints`).
            top_k: How many hits at most.
            exclude_ids: Ids never returned.
            now: The current time, POSIX seconds; defaults to ``time.time()``.

        Returns:
            The hits in :func:`rank_key` order.
        """
        now = time.time() if now is None else float(now)
        if top_k <= 0 or not (qtokens or hints):
            return []
        with self._lock:
            if not self._slot_of:
                return []
            layout = layout_for(len(qtokens), len(hints))
            self._scatter(layout, qtokens, hints)
            for id in exclude_ids:
                slot = self._slot_of.get(id)
                if slot is not None:
                    for acc in self._acc:
                        acc[slot] = 0
            cand, lanes = pruning.collect(self)
            if not len(cand):
                return []
            return pruning.rank(
                self, pruning.Candidates(self, layout, len(qtokens), cand, lanes, now), top_k
            )

    def _scatter(self, layout: Layout, qtokens: frozenset[str], hints: frozenset[str]) -> None:
        while len(self._acc) < layout.lanes:
            self._acc.append(np.zeros(len(self.arrays.updated), dtype=np.int64))
        accs = self._acc
        for token in qtokens | hints:
            posting = self._postings.get(token)
            if posting is None:
                continue
            if posting.new_kw is not None or posting.new_other is not None:
                self._merge(posting)
            entries = posting.entries
            if token in qtokens:
                table = layout.query_hint if token in hints else layout.query
                slots = entries >> CODE_BITS
                codes = entries & CODE_MASK
                for lane in range(layout.lanes):
                    np.add.at(accs[lane], slots, table[lane].take(codes))
            elif posting.n_kw:  # a hint only: just the keyword entries, one constant
                slots = entries[: posting.n_kw] >> CODE_BITS
                for lane in range(layout.lanes):
                    if layout.hint[lane]:
                        np.add.at(accs[lane], slots, layout.hint[lane])

    def _refresh_bound(self, now: float) -> None:
        if (
            self._bound_time is None
            or now < self._bound_time  # the clock went back: the old bound may be too low
            or now - self._bound_time > BOUND_REFRESH_SECONDS
        ):
            n = len(self._ids)
            self.arrays.bound[:n] = recency_bound(self.arrays.updated[:n], now)
            self._bound_time = now
