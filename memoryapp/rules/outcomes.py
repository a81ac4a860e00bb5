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
- ``NOT_CHECKED``: a copy (a replica) that has not reported a result yet; for a whole
  receipt, an erasure whose verification has not run yet.
- ``NOTHING_ERASED``: the erasure found nothing to delete on that database, so there was
  nothing to verify (neutral: it never weakens another database's outcome).

A receipt written before outcomes were recorded has no ``details["outcome"]``:
:func:`of_receipt` derives one from the facts it holds (a scan's counts, its
verification text) and says :data:`UNKNOWN` where they do not tell — never
"verified by byte scan" without a scan's recorded counts.

A receipt keeps the outcome of the whole erasure in ``details["outcome"]`` (and the reason a
scan was not possible in ``details["scan_unavailable"]``); the per-copy results of a
deployment with replicas in ``details["copies"]``: a list of mappings with the keys of
:class:`CopyResult`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "RECEIPT_OUTCOMES",
    "REPLICAS_CAVEAT",
    "REPLICAS_PLAIN",
    "UNKNOWN",
    "CopyResult",
    "Outcome",
    "label",
    "of_check",
    "of_receipt",
    "plain_reason",
    "worst",
]


class Outcome(enum.StrEnum):
    """One verification's outcome (stored as its value)."""

    VERIFIED_BY_SCAN = "verified_by_byte_scan"
    UNSCANNED = "rewritten_not_scanned"
    NOT_VERIFIED = "not_verified"
    NOT_CHECKED = "not_checked"
    NOTHING_ERASED = "nothing_erased"


# From the strongest proof to none: the receipt's outcome is its weakest copy's.
# Nothing erased proves nothing and needs nothing: it never weakens another copy's outcome.
_ORDER = (
    Outcome.NOTHING_ERASED,
    Outcome.VERIFIED_BY_SCAN,
    Outcome.UNSCANNED,
    Outcome.NOT_CHECKED,
    Outcome.NOT_VERIFIED,
)


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


UNKNOWN = "unknown"
"""Not a stored value: a receipt from before outcomes were recorded whose facts do not say."""

RECEIPT_OUTCOMES = (
    Outcome.VERIFIED_BY_SCAN.value,
    Outcome.UNSCANNED.value,
    Outcome.NOT_VERIFIED.value,
    Outcome.NOT_CHECKED.value,
    Outcome.NOTHING_ERASED.value,
    UNKNOWN,
)
"""Every outcome a receipt can show (the labels ``/metrics`` and ``/healthz`` count by)."""

REPLICAS_CAVEAT = (
    "Replicas are verified only where configured (DATABASE_REPLICA_URLS): each configured "
    "replica's own check is listed per copy on this receipt; a replica not configured here "
    "is outside this verification, and no replica's own WAL and backups are purged."
)
"""The receipt's technical caveat about replicas (one place: the per-copy checks change it)."""

REPLICAS_PLAIN = (
    "Copies of the database kept on other servers (replicas) are looked at only when this "
    "application is configured with them, each listed above with its result; their own "
    "backups are not cleaned."
)
"""The same caveat in plain words, for the receipt's summary and its printable letter."""

_LABELS = {
    Outcome.VERIFIED_BY_SCAN.value: "verified by byte scan",
    Outcome.UNSCANNED.value: "rows deleted and files rewritten, byte scan not possible here",
    Outcome.NOT_VERIFIED.value: "not verified (needs attention)",
    Outcome.NOT_CHECKED.value: "not checked yet",
    Outcome.NOTHING_ERASED.value: "nothing erased, so nothing to verify",
    UNKNOWN: "outcome not recorded (a receipt from an earlier version)",
}

# The scan's technical reasons (db/purge's ``ScanFiles.note``), said plainly; first match wins.
_PLAIN_REASONS = (
    ("not on this machine", "the database runs on another machine"),
    ("belongs to another server", "the files on this machine belong to another database server"),
    ("not visible", "the database does not tell this application where its files are"),
    ("not readable", "this application is not allowed to read the database's files"),
    ("no file access", "the database service gives no access to its files"),
    ("role lacks", "the database does not let this application read its files through SQL"),
    ("in-memory", "the database is kept in memory and has no files"),
    ("no files to scan", "this kind of database gives no access to its files"),
    ("no erased value", "no erased value was long enough to search the files for"),
    ("fragments", "the erased values were no longer at hand to search the files for"),
)


def label(outcome: str, reason: str = "") -> str:
    """The outcome's name in words (``memory erase``, the admin, the API's ``outcome_text``);
    the reason a scan was not possible follows in brackets, in plain words."""
    text = _LABELS.get(outcome, _LABELS[UNKNOWN])
    if outcome == Outcome.UNSCANNED and reason:
        text += f" ({plain_reason(reason)})"
    return text


def plain_reason(reason: str) -> str:
    """Why a byte scan was not possible, in words a non-engineer reads (each database's
    reason, ``"alias: reason"`` joined by ``"; "``, keeps its alias)."""
    out = []
    for part in (p.strip() for p in reason.split("; ")):
        alias, sep, rest = part.partition(": ")
        if not sep or " " in alias:
            alias, rest = "", part
        low = rest.lower()
        said = next((plain for key, plain in _PLAIN_REASONS if key in low), "")
        said = said or "it could not run where this application runs"
        out.append(f"{alias}: {said}" if alias else said)
    return "; ".join(dict.fromkeys(out))


def of_check(ok: bool, scan: Mapping | None) -> tuple[Outcome, str]:
    """One database's outcome from its verification: ``(outcome, reason)``.

    ``ok``: the SQL, structural and byte checks passed or could not apply; ``scan``:
    the byte scan's facts — counts (``"files"``) when it ran, ``"unavailable"`` (the
    reason) when it could not. Only a scan that ran makes ``VERIFIED_BY_SCAN``.
    """
    scan = scan if isinstance(scan, Mapping) else {}
    reason = str(scan.get("unavailable") or "")
    if not ok:
        return Outcome.NOT_VERIFIED, reason
    if "files" in scan:
        return Outcome.VERIFIED_BY_SCAN, ""
    return Outcome.UNSCANNED, reason or "no byte scan ran"


# For receipts from before outcomes were recorded: the legacy texts of _byte_scan.
_NOT_POSSIBLE = re.compile(r"byte scan: not possible \((.*)\)")
_LEGACY_UNSCANNED = (
    ("byte scan: not performed", "the fragments of the erased values were not at hand"),
    ("byte scan: no erased value", "no erased value long enough to probe"),
)
_RANK = {
    Outcome.NOTHING_ERASED.value: 0,
    Outcome.VERIFIED_BY_SCAN.value: 1,
    Outcome.UNSCANNED.value: 2,
    UNKNOWN: 3,
    Outcome.NOT_CHECKED.value: 4,
    Outcome.NOT_VERIFIED.value: 5,
}


def of_receipt(receipt: Mapping[str, object]) -> tuple[str, str]:
    """A receipt's outcome and the reason a scan was not possible: ``(outcome, reason)``.

    ``receipt`` is a mapping of the receipt's fields. The recorded ``details["outcome"]``
    when there is one; else derived (a receipt from an earlier version): not checked
    when no verification ran, not verified when it did not pass, and per database
    verified by byte scan only when the scan's counts were recorded, rewritten but not
    scanned when its text says the scan was not possible, :data:`UNKNOWN` otherwise.
    """
    details = _mapping(receipt.get("details"))
    stored = details.get("outcome")
    if stored in _RANK and stored != UNKNOWN:
        return str(stored), str(details.get("scan_unavailable") or "")
    text = str(receipt.get("verification") or "")
    if not text.strip():
        return Outcome.NOT_CHECKED.value, ""
    if not receipt.get("verified"):
        return Outcome.NOT_VERIFIED.value, ""
    return _derived(receipt.get("databases"), _mapping(details.get("aliases")), text)


def _mapping(value: object) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _names(listed: object) -> list[str]:
    """The receipt's database aliases (``[""]`` when it lists none)."""
    names = [str(a) for a in listed if a] if isinstance(listed, list | tuple) else []
    return names or [""]


def _derived(listed: object, aliases: Mapping, text: str) -> tuple[str, str]:
    """A verified earlier receipt's outcome: its weakest database's, with their reasons."""
    databases = _names(listed)
    multi = len(databases) > 1
    results: list[tuple[str, str]] = []
    for alias in databases:
        part = text
        if multi:
            part = next((p for p in text.split(" | ") if p.startswith(f"{alias}: ")), "")
        outcome, reason = _legacy(_mapping(aliases.get(alias)), part)
        results.append((outcome, f"{alias}: {reason}" if multi and reason else reason))
    outcome = max((o for o, _ in results), key=_RANK.__getitem__)
    reasons = [r for o, r in results if o == Outcome.UNSCANNED and r]
    return outcome, "; ".join(reasons) if outcome == Outcome.UNSCANNED else ""


def _legacy(info: Mapping, text: str) -> tuple[str, str]:
    """One database's outcome on an earlier receipt, from its recorded facts and text."""
    verification = info.get("verification")
    scan = verification.get("scan") if isinstance(verification, Mapping) else None
    if isinstance(scan, Mapping) and "files" in scan and not scan.get("found"):
        return Outcome.VERIFIED_BY_SCAN.value, ""  # the scan's own counts: it ran
    if "nothing was deleted" in text:
        return Outcome.NOTHING_ERASED.value, ""
    match = _NOT_POSSIBLE.search(text)
    if match:
        return Outcome.UNSCANNED.value, match.group(1)
    for needle, reason in _LEGACY_UNSCANNED:
        if needle in text:
            return Outcome.UNSCANNED.value, reason
    return UNKNOWN, ""
