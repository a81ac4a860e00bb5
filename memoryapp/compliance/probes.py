"""Byte-scan probes: fragments of erased values, held in this process's memory only.

They are read just before the delete, used to verify the purge and dropped
once it is verified; never written to the database, a log, a receipt or a file.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from collections.abc import Iterable

from memoryapp.compliance.selection import ROW_MODELS, TEXT_FIELDS
from memoryapp.rules.batching import batches

PROBE_ROWS = 1000  # rows per table whose values are probed by the byte scan
MAX_PIECES = 4000  # byte-scan fragments per database (the scan cost does not depend on it)
MIN_PROBE_BYTES = 12  # shorter values cannot be told apart from unrelated bytes
PIECE_BYTES = 48
PIECE_STEP = 1024  # long values are probed every KiB (SQLite overflow pages, TOAST chunks)
_KEPT = 32  # receipts whose probes are remembered for a retry in this process

_probes: OrderedDict[str, dict[str, list[bytes]]] = OrderedDict()
_probes_lock = threading.Lock()


def sample_values(alias: str, ids: dict[str, list[str]]) -> list[str]:
    """The text values of up to ``PROBE_ROWS`` rows per table (memory only, for the scan)."""
    rng = random.Random()
    values: list[str] = []
    for table, model in ROW_MODELS.items():
        pks = ids.get(table) or []
        chosen = pks if len(pks) <= PROBE_ROWS else rng.sample(pks, PROBE_ROWS)
        for batch in batches(chosen):
            for row in (
                model.objects.using(alias)
                .filter(pk__in=list(batch))
                .values_list(*TEXT_FIELDS[table])
            ):
                values.extend(v for v in row if isinstance(v, str) and v)
    return values


def pieces_of(values: Iterable[str]) -> list[bytes]:
    """Byte-scan fragments of erased values: whole short values, 48-byte slices of long ones."""
    seen: dict[bytes, None] = {}
    for value in values:
        raw = value.encode("utf-8")
        if len(raw) < MIN_PROBE_BYTES:
            continue
        if len(raw) <= PIECE_BYTES + 16:
            seen.setdefault(raw)
            continue
        for offset in range(0, len(raw) - PIECE_BYTES, PIECE_STEP):
            seen.setdefault(raw[offset : offset + PIECE_BYTES])
        seen.setdefault(raw[-PIECE_BYTES:])
    pieces = list(seen)
    if len(pieces) > MAX_PIECES:
        pieces = random.Random().sample(pieces, MAX_PIECES)
    return pieces


def remember(receipt_id: str, pieces: dict[str, list[bytes]]) -> None:
    """Keep a receipt's fragments (per database) for its verification in this process."""
    with _probes_lock:
        _probes[receipt_id] = pieces
        _probes.move_to_end(receipt_id)
        while len(_probes) > _KEPT:
            _probes.popitem(last=False)


def recall(receipt_id: str, alias: str) -> list[bytes] | None:
    """A receipt's fragments for one database; None when this process no longer has them."""
    with _probes_lock:
        entry = _probes.get(receipt_id)
        return None if entry is None else entry.get(alias)


def forget(receipt_id: str) -> None:
    """Drop a receipt's fragments (its purge is verified)."""
    with _probes_lock:
        _probes.pop(receipt_id, None)
