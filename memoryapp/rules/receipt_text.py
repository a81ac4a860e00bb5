"""Erasure receipts in plain language: what a compliance officer (or the data subject) reads first.

Pure Python (no Django): it takes a receipt as a mapping — the fields of
:func:`memoryapp.compliance.receipt_as_dict` — and returns a headline and a few
sentences. The technical proof (purge method, byte scan, vendor caveats) stays
on the receipt, folded below this summary in the admin.

Every state is named for what it is, and a finished erasure by its outcome
(:mod:`memoryapp.rules.outcomes`): only a receipt verified by a byte scan says the
files were scanned and hold none of the erased text; one whose files could not be
scanned here says the rows are deleted and the files rewritten, that a scan was not
possible and why — never that the files were checked; an unfinished or unverified
one says so in its headline; one from an earlier version that does not record how
it was verified says that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from memoryapp.rules.copy_text import phrases as copy_phrases
from memoryapp.rules.outcomes import REPLICAS_CAVEAT, REPLICAS_PLAIN, Outcome, label, of_receipt
from memoryapp.rules.outcomes import plain_reason as _plain_reason
from memoryapp.rules.wording import plural

__all__ = ["ReceiptSummary", "day", "summarize"]

ADMIN_LOG = "django_admin_log"  # kept with titles replaced: not counted as removed

_WHAT = {
    "subject": ("about this person", "All {n} about this person"),
    "namespace": ("in this workspace", "All {n} in this workspace"),
    "ids": ("selected", "The {n} selected"),
    "everything": ("in the whole store", "All {n} in the whole store"),
    "review_items": ("awaiting review", "The {n} awaiting review"),
    "retention": ("past their retention period", "The {n} past their retention period"),
    "replay": ("erased earlier and brought back by a restore", "The {n} brought back by a restore"),
}


@dataclass(frozen=True)
class ReceiptSummary:
    """A receipt in plain words.

    Attributes:
        headline: the state in a few words ("Erased and verified").
        tone: ``"done"``, ``"pending"`` or ``"problem"`` (for the badge's colour).
        sentences: the summary, first sentence first.
        caveats: what the erasure cannot reach, in plain words.
        outcome: what the verification proved (a :class:`~memoryapp.rules.outcomes.Outcome`
            value, or ``"unknown"``), and ``outcome_text`` the same in words.
    """

    headline: str
    tone: str
    sentences: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    outcome: str = ""
    outcome_text: str = ""
    copies: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The sentences as one paragraph."""
        return " ".join(self.sentences)


def day(value: object) -> str:
    """``"5 Dec 2026"`` from a datetime or ISO text; ``""`` when unknown."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return ""
    if not isinstance(value, dt.datetime | dt.date):
        return ""
    return f"{value.day} {value:%b %Y}"


def _removed(counts: object) -> int:
    if not isinstance(counts, Mapping):
        return 0
    return sum(
        n
        for table, n in counts.items()
        if table != ADMIN_LOG and isinstance(n, int) and not isinstance(n, bool)
    )


def _kept_matches(details: object) -> int:
    """Fragments of erased text that the byte scan also found in rows kept on purpose."""
    if not isinstance(details, Mapping):
        return 0
    n = 0
    for info in (details.get("aliases") or {}).values():
        scan = ((info or {}).get("verification") or {}).get("scan") or {}
        found = scan.get("found_in_kept_rows")
        if isinstance(found, int) and not isinstance(found, bool):
            n += found
    return n


def _caveats(text: str) -> list[str]:
    """The receipt's technical caveats, said plainly (one sentence per kind of limit)."""
    out: list[str] = []
    low = text.lower()
    if not low.strip():
        return out
    if REPLICAS_CAVEAT.lower() in low:
        out.append(REPLICAS_PLAIN)
        low = low.replace(REPLICAS_CAVEAT.lower(), "")
    if "backup" in low or "replica" in low or "snapshot" in low:
        out.append(
            "Backups and copies of the database made before this date still hold the data "
            "until they expire. If one is ever restored, the erasure is applied again."
        )
    if "wear levelling" in low or "below the file system" in low:
        out.append(
            "The storage hardware may keep unused blocks for a while before reusing them; "
            "they are not readable through the database."
        )
    if "secure_delete=on" in low or "without secure_delete" in low:
        out.append(
            "If another program writes to the same database file, old copies of rows it "
            "changed can stay in unused space until the next full clean-up."
        )
    if not out:
        out.append("The technical proof below lists what the erasure cannot reach.")
    return out


def summarize(receipt: Mapping[str, object]) -> ReceiptSummary:
    """The plain-language summary of a receipt (see the module docstring)."""
    outcome, reason = of_receipt(receipt)
    headline, tone, first = _progress(receipt, outcome, reason)
    return ReceiptSummary(
        headline=headline,
        tone=tone,
        sentences=[first, *_kept_sentences(receipt)],
        caveats=_caveats(str(receipt.get("caveats") or "")),
        outcome=outcome,
        outcome_text=label(outcome, reason),
        copies=_copies(receipt.get("details")),
    )


def _copies(details: object) -> list[str]:
    """Each server's check in words ("replica replica_1: verified by byte scan")."""
    listed = details.get("copies") if isinstance(details, Mapping) else None
    if not isinstance(listed, list):
        return []
    return copy_phrases([c for c in listed if isinstance(c, Mapping)])


_STAGES = {
    "requested": (
        "Requested — nothing deleted yet",
        "pending",
        "An erasure of the records {where} was requested on {asked}; "
        "no record has been deleted yet. It will be carried out automatically.",
    ),
    "nothing": (
        "Nothing to erase",
        "done",
        "On {asked} no record {where} was found, so nothing had to be deleted.",
    ),
    "verified": (
        "Erased and verified by byte scan",
        "done",
        "{deleted} permanently deleted on {finished}; a byte scan of the database "
        "files found none of the erased text in them.",
    ),
    # Never "checked": no one looked inside the files.
    "unscanned": (
        "Erased — byte scan not possible here",
        "done",
        "{deleted} permanently deleted on {finished}, and the database files that held "
        "them were rewritten. A byte scan of those files was not possible here "
        "({reason}), so nobody has looked inside them for the erased text.",
    ),
    # The primary is verified; a copy on another server has not reported yet.
    "copies pending": (
        "Erased — not every copy checked yet",
        "pending",
        "{deleted} permanently deleted on {finished}. Not every copy of the database "
        "has reported its check yet; each copy and its result is listed below.",
    ),
    "copy unverified": (
        "Erased — a copy's check not passed",
        "problem",
        "{deleted} permanently deleted on {finished}, but the check of a copy of the "
        "database on another server did not pass (listed below). An operator should look "
        "at the technical proof below.",
    ),
    "unrecorded": (
        "Erased — how it was verified is not recorded",
        "done",
        "{deleted} permanently deleted on {finished}. This receipt comes from an earlier "
        "version of the application and does not record whether the database files "
        "were scanned for the erased text.",
    ),
    "unverified": (
        "Deleted — check not passed",
        "problem",
        "{deleted} deleted on {asked} and the database "
        "files were cleaned, but the check afterwards could not confirm that none of the "
        "erased text remains. An operator should look at the technical proof below.",
    ),
    "not purged": (
        "Deleted — clean-up not complete",
        "problem",
        "{deleted} deleted on {asked}, but clearing "
        "them from the database files did not complete. It is retried; until then "
        "traces may remain in the files (not readable through the application).",
    ),
    "deleted": (
        "Deleted — clean-up in progress",
        "pending",
        "{deleted} deleted on {asked}. Clearing them "
        "from the database files and checking the result is still in progress.",
    ),
    # A state this text does not know: say what is certain, nothing more.
    "unknown": (
        "Erasure not finished",
        "problem",
        "An erasure of {records} {where} was requested on {asked}; it is not finished. "
        "See the technical proof below.",
    ),
}
"""Per stage of an erasure: headline, tone and the sentence saying it."""


_FINISHED = {
    Outcome.VERIFIED_BY_SCAN.value: "verified",
    Outcome.UNSCANNED.value: "unscanned",
    Outcome.NOTHING_ERASED.value: "nothing",
    Outcome.NOT_CHECKED.value: "copies pending",
    Outcome.NOT_VERIFIED.value: "copy unverified",
}
"""A complete, verified receipt's stage by its outcome (any other: "unrecorded")."""


def _stage(state: str, status: str, verified: bool, n: int, outcome: str) -> str:
    """Which of :data:`_STAGES` a receipt is at; the first that holds, in this order."""
    if state == "requested":
        return "requested"
    if n == 0 and state == "complete":
        return "nothing"
    if state == "complete" and verified:
        return _FINISHED.get(outcome, "unrecorded")
    if status == "purged" and not verified:
        return "unverified"
    if status.startswith("not purged") and "deferred" not in status:
        return "not purged"
    return "deleted" if state == "deleted" else "unknown"


def _progress(receipt: Mapping[str, object], outcome: str, reason: str) -> tuple[str, str, str]:
    """How far the erasure got: headline, tone and the sentence saying it."""
    kind = str(receipt.get("target_kind") or "")
    where, all_of = _WHAT.get(kind, ("", "The {n}"))
    n = _removed(receipt.get("counts"))
    records = plural(n, "record", "records")
    asked = day(receipt.get("created_at"))
    deleted = all_of.format(n=records) if n != 1 else f"The 1 record {where}".strip()
    stage = _stage(
        str(receipt.get("state") or ""),
        str(receipt.get("purge_status") or ""),
        bool(receipt.get("verified")),
        n,
        outcome,
    )
    headline, tone, sentence = _STAGES[stage]
    text = sentence.format(
        where=where,
        asked=asked,
        finished=day(receipt.get("purged_at")) or asked,
        deleted=deleted + (" was" if n == 1 else " were"),
        records=records,
        reason=_plain_reason(reason or "no byte scan ran"),
    )
    return headline, tone, text


def _kept_sentences(receipt: Mapping[str, object]) -> list[str]:
    """What the erasure kept on purpose: the subject's shared project records, and
    kept records that hold some of the same words."""
    sentences: list[str] = []
    authored = receipt.get("authored")
    if isinstance(authored, Mapping):
        kept = authored.get("project_memories_kept")
        if isinstance(kept, int) and kept:
            sentences.append(
                f"{plural(kept, 'shared project record', 'shared project records')} this "
                f"person wrote {'was' if kept == 1 else 'were'} kept: they belong to the "
                "project, and this erasure was not asked to include them."
            )
    matches = _kept_matches(receipt.get("details"))
    if matches:
        # For the person: no count of byte-scan fragments (the technical proof has it).
        sentences.append(
            "The same words can also appear in records kept on purpose, such as a sentence "
            "someone else wrote; those records are not yours and were not erased. The "
            "technical proof gives the details."
        )
    return sentences
