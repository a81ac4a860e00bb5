"""Erasure receipts: keyed HMACs of subjects, JSON form, and the append-only ledger file."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import hmac
import json
import logging
import os
from pathlib import Path

from django.utils.dateparse import parse_datetime

from memoryapp import conf
from memoryapp.models import ErasureReceipt, ReceiptState
from memoryapp.rules.outcomes import label, of_receipt

logger = logging.getLogger(__name__)

_KEY_ID_LABEL = b"memoryapp.compliance.key-id"
SUBJECT_PLACEHOLDER = "(the subject)"


def keyed_hmac(value: str, key: bytes | None = None) -> str:
    """``HMAC-SHA256(key, value)`` in hex: how receipts name a subject or a namespace."""
    key = conf.erasure_key() if key is None else key
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def subject_hmac(subject: str) -> str:
    """The keyed HMAC a receipt stores for ``subject`` (to look receipts up by subject)."""
    return keyed_hmac(subject)


def key_id(key: bytes | None = None) -> str:
    """A short public fingerprint of the HMAC key, stored with each receipt."""
    key = conf.erasure_key() if key is None else key
    return hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:12]


def known_keys() -> dict[str, bytes]:
    """The current key and its fallbacks, by key id (replay matches receipts by key id)."""
    keys: dict[str, bytes] = {}
    for key in [conf.erasure_key(), *conf.erasure_key_fallbacks()]:
        keys.setdefault(key_id(key), key)
    return keys


def safe_actor(actor: str, subject: str | None) -> str:
    """The actor as recorded: a self-service request must not put the subject in clear."""
    actor = str(actor or "")[:255]
    if subject and subject in actor:
        actor = actor.replace(subject, SUBJECT_PLACEHOLDER)
    return actor


_DATETIME_FIELDS = ("created_at", "updated_at", "purged_at")
PRIVATE_FIELDS = ("sealed", "claimed_by", "claimed_until")
"""Working state of an unfinished erasure: never in the ledger, an export or the API."""


def as_dict(receipt: ErasureReceipt) -> dict:
    """The receipt as a JSON-serialisable dict (API body, ledger line, export), with its
    ``outcome`` and ``scan_unavailable`` (:func:`memoryapp.rules.outcomes.of_receipt`)."""
    out = {}
    for f in ErasureReceipt._meta.concrete_fields:
        if f.name in PRIVATE_FIELDS:
            continue
        value = getattr(receipt, f.attname)
        if isinstance(value, dt.datetime):
            value = value.isoformat()
        out[f.name] = value
    out["purged"] = receipt.purged
    # What the verification proved, by name (recorded, or derived for an older receipt).
    out["outcome"], out["scan_unavailable"] = of_receipt(out)
    return out


def outcome_of(receipt: ErasureReceipt) -> tuple[str, str]:
    """The receipt's named outcome and why a byte scan was not possible (``""`` else)."""
    return of_receipt(
        {
            "details": receipt.details,
            "verification": receipt.verification,
            "verified": receipt.verified,
            "databases": receipt.databases,
        }
    )


def outcome_words(receipt: ErasureReceipt) -> str:
    """The receipt's outcome said by name ("verified by byte scan", "rows deleted and files
    rewritten, byte scan not possible here (…)", "not verified (needs attention)" …)."""
    return label(*outcome_of(receipt))


def from_dict(data: dict) -> ErasureReceipt:
    """Rebuild an (unsaved) receipt from :func:`as_dict` output."""
    names = {f.name for f in ErasureReceipt._meta.concrete_fields} - set(PRIVATE_FIELDS)
    fields = {k: v for k, v in data.items() if k in names}
    if "state" not in fields:  # a line written before receipts had states
        done = fields.get("purge_status") == "purged" and fields.get("verified")
        fields["state"] = ReceiptState.COMPLETE if done else ReceiptState.DELETED
    for name in _DATETIME_FIELDS:
        if isinstance(fields.get(name), str):
            fields[name] = parse_datetime(fields[name])
    return ErasureReceipt(**fields)


def append_ledger(receipt: ErasureReceipt, path: str | None = None) -> bool:
    """Append the receipt as one JSON line to the ledger file; False (logged) on failure.

    The line holds exactly what the receipt holds: no erased text. A later line
    for the same id (a retried purge) supersedes the earlier one.
    """
    path = path or conf.erasure_ledger_path()
    if not path:
        return False
    line = json.dumps(as_dict(receipt), sort_keys=True, ensure_ascii=True) + "\n"
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        logger.warning("erasure ledger %s not written: %s", path, exc)
        return False
    return True


def read_ledger(path: str) -> list[dict]:
    """The receipts of a ledger file, the last line per id winning, oldest first.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line is not a receipt.
    """
    latest: dict[str, dict] = {}
    with open(path, encoding="ascii") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON receipt line") from exc
            if not isinstance(data, dict) or "id" not in data or "target_kind" not in data:
                raise ValueError(f"{path}:{number}: not an erasure receipt")
            latest[data["id"]] = data
    return sorted(latest.values(), key=lambda d: (d.get("created_at") or "", d["id"]))


def write_ledger(path: str, receipts) -> int:
    """Append receipts to a (new or existing) ledger file; the number written.

    The file is opened before ``receipts`` is read, so a path that cannot be
    written fails before any work, and every failure raises instead of being
    counted as written (an operator copying the ledger must know it did not happen).

    Raises:
        OSError: the directory does not exist, or the file cannot be opened or written.
    """
    if not Path(path).parent.is_dir():
        raise FileNotFoundError(
            errno.ENOENT, "the directory does not exist", str(Path(path).parent)
        )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    n = 0
    try:
        for receipt in receipts:
            line = json.dumps(as_dict(receipt), sort_keys=True, ensure_ascii=True) + "\n"
            os.write(fd, line.encode("ascii"))
            n += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    return n


def parse_stamp(value) -> dt.datetime | None:
    """A datetime from a receipt field (already a datetime, or ISO text)."""
    if value is None or isinstance(value, dt.datetime):
        return value
    return parse_datetime(str(value))
