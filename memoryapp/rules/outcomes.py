"""What an erasure's verification proved, per copy of the data: three named outcomes.

Pure Python (no Django). The receipt, its printable letter, ``memory erase``, the API,
``/healthz`` and ``/metrics`` all speak of a verification in these words and no others,
so none of them can claim a check that did not run:

- ``VERIFIED_BY_SCAN``: the erased rows are gone (SQL) *and* a byte scan of the server's
  files found none of the erased text (or only bytes that rows kept on purpose explain).
- ``UNSCANNED``: the erased rows are gone and the files that held them were rewritten, but
  no byte scan could run on that server (``reason`` says why: the database is on another
  machine, its data directory is unreadable, a managed service allows no file access).
  Its plain words never say the files were checked.
- ``NOT_VERIFIED``: a check failed or could not finish (needs attention).
- ``NOT_CHECKED``: a copy (a replica) that has not reported a result yet.

A receipt keeps the outcome of the whole erasure in ``details["outcome"]`` (and the reason a
scan was not possible in ``details["scan_unavailable"]``); the per-copy results of a
deployment with replicas in ``details["copies"]``: a list of mappings with the keys of
:class:`CopyResult`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["CopyResult", "Outcome", "worst"]


class Outcome(enum.StrEnum):
    """One verification's outcome (stored as its value)."""

    VERIFIED_BY_SCAN = "verified_by_byte_scan"
    UNSCANNED = "rewritten_not_scanned"
    NOT_VERIFIED = "not_verified"
    NOT_CHECKED = "not_checked"


# From the strongest proof to none: the receipt's outcome is its weakest copy's.
_ORDER = (Outcome.VERIFIED_BY_SCAN, Outcome.UNSCANNED, Outcome.NOT_CHECKED, Outcome.NOT_VERIFIED)


def worst(outcomes: list[Outcome]) -> Outcome:
    """The weakest of several copies' outcomes (``NOT_CHECKED`` when there are none)."""
    if not outcomes:
        return Outcome.NOT_CHECKED
    return max(outcomes, key=_ORDER.index)


@dataclass(frozen=True)
class CopyResult:
    """One server's result for one receipt.

    Attributes:
        server: the name the operator configured (``"primary"``, a replica alias).
        role: ``"primary"`` or ``"replica"``.
        system_identifier: PostgreSQL's ``system_identifier`` (``""`` for SQLite).
        outcome: an :class:`Outcome` value.
        reason: why a scan was not possible or failed (``""`` when verified).
        at: ISO time of the result (``""`` when not checked).
    """

    server: str
    role: str
    system_identifier: str
    outcome: Outcome
    reason: str = ""
    at: str = ""
