"""Each copy of the data and what its check proved, in plain words.

Pure Python (no Django). A receipt's ``details["copies"]`` (mappings with the keys of
:class:`memoryapp.rules.outcomes.CopyResult`) become one phrase per server — "primary:
verified by byte scan", "replica replica_1: not checked (no verifier reported)" — said the
same way on the receipt page, the printable letter, ``memory erase`` and the API. A phrase
names only what ran: a copy is "verified by byte scan" only when its files were scanned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memoryapp.rules.outcomes import Outcome, worst

__all__ = ["label", "line", "phrase", "phrases", "verified_everywhere", "weakest"]

_WORDS = {
    Outcome.VERIFIED_BY_SCAN: "verified by byte scan",
    Outcome.UNSCANNED: "rows gone and files rewritten, but not scanned",
    Outcome.NOT_VERIFIED: "not verified",
    Outcome.NOT_CHECKED: "not checked",
}
NO_REPORT = "no verifier reported"


def _outcome(copy: Mapping[str, object]) -> Outcome:
    try:
        return Outcome(str(copy.get("outcome") or ""))
    except ValueError:  # a value this code does not know claims nothing
        return Outcome.NOT_CHECKED


def label(copy: Mapping[str, object]) -> str:
    """Which server: ``"primary"``, ``"replica <name>"``, or a second primary's name."""
    server = str(copy.get("server") or "")
    if copy.get("role") == "replica":
        return f"replica {server}"
    return "primary" if server in ("", "primary", "default") else server


def phrase(copy: Mapping[str, object]) -> str:
    """One copy and its outcome: ``"replica replica_1: verified by byte scan"``."""
    outcome = _outcome(copy)
    words = _WORDS[outcome]
    reason = str(copy.get("reason") or "")
    if outcome == Outcome.NOT_CHECKED and not reason:
        reason = NO_REPORT
    if reason and outcome != Outcome.VERIFIED_BY_SCAN:
        words += f" ({reason})"
    return f"{label(copy)}: {words}"


def phrases(copies: Sequence[Mapping[str, object]]) -> list[str]:
    """Every copy's phrase, the primary first."""
    ordered = sorted(copies, key=lambda c: (c.get("role") == "replica", str(c.get("server"))))
    return [phrase(c) for c in ordered]


def line(copies: Sequence[Mapping[str, object]]) -> str:
    """All copies on one line, separated by semicolons ("" when none is recorded)."""
    return "; ".join(phrases(copies))


def weakest(copies: Sequence[Mapping[str, object]]) -> Outcome:
    """The receipt's outcome over its copies (:func:`memoryapp.rules.outcomes.worst`)."""
    return worst([_outcome(c) for c in copies])


def verified_everywhere(copies: Sequence[Mapping[str, object]]) -> bool:
    """True when copies are recorded and every one was verified by byte scan."""
    return bool(copies) and weakest(copies) == Outcome.VERIFIED_BY_SCAN
