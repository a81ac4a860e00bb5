"""What an unfinished erasure needs in order to be finished by another process, encrypted.

A receipt is written before any row is deleted; whoever completes it later (the
worker, ``memory erase --retry`` after a crash) must know the request — the
subject key or namespace in clear — and, to byte-scan the files, fragments of
the erased values. Both are personal data, so the receipt keeps them only as a
Fernet token (AES-128-CBC + HMAC-SHA256) under a key derived from
``MEMORYAPP_ERASURE_KEY`` for this purpose (:mod:`memoryapp.compliance.sealing`),
which lives in the settings, never in the database, and drops the token once
the purge is verified. The byte scan never finds the fragments in the token: it
is ciphertext.
"""

from __future__ import annotations

import base64
import datetime as dt
import json

from memoryapp.compliance import sealing
from memoryapp.compliance.selection import Target

# The HKDF label of the erasures' sealed requests; the receipts stored were sealed under it:
# never change it.
PURPOSE = b"memoryapp.compliance.sealed-request"


def seal(targets: list[Target], probes: dict[str, list[bytes]] | None = None) -> str:
    """The encrypted form of an erasure's targets and (once read) its byte-scan fragments."""
    body = {
        "targets": [target_to_dict(t) for t in targets],
        "probes": {
            alias: [base64.b64encode(p).decode("ascii") for p in pieces]
            for alias, pieces in (probes or {}).items()
        },
    }
    return sealing.seal(PURPOSE, json.dumps(body, separators=(",", ":")))


def unseal(token: str | None) -> tuple[list[Target], dict[str, list[bytes]]] | None:
    """Targets and fragments from :func:`seal`; None when absent or no known key opens it."""
    body = sealing.unseal_json(PURPOSE, token)
    if body is None:
        return None
    targets = [target_from_dict(d) for d in body.get("targets", [])]
    probes = {
        alias: [base64.b64decode(p) for p in pieces]
        for alias, pieces in body.get("probes", {}).items()
    }
    return targets, probes


def target_to_dict(t: Target) -> dict:
    """A :class:`Target` as JSON-ready data (datetimes as ISO text)."""
    return {
        "kind": str(t.kind),
        "subject": t.subject,
        "namespace": t.namespace,
        "ids": list(t.ids),
        "include_authored": t.include_authored,
        "statuses": list(t.statuses) if t.statuses is not None else None,
        "cutoffs": {table: c.isoformat() for table, c in t.cutoffs.items()},
        "before": t.before.isoformat() if t.before is not None else None,
        "extra_ids": {table: list(ids) for table, ids in t.extra_ids.items()},
        "rows": {table: [list(r) for r in rows] for table, rows in t.rows.items()},
        "within": list(t.within) if t.within is not None else None,
        "grants": [list(g) for g in t.grants] if t.grants is not None else None,
    }


def target_from_dict(d: dict) -> Target:
    """The inverse of :func:`target_to_dict`."""
    return Target(
        d["kind"],
        subject=d.get("subject"),
        namespace=d.get("namespace"),
        ids=tuple(d.get("ids") or ()),
        include_authored=bool(d.get("include_authored")),
        statuses=tuple(d["statuses"]) if d.get("statuses") is not None else None,
        cutoffs={t: dt.datetime.fromisoformat(c) for t, c in (d.get("cutoffs") or {}).items()},
        before=dt.datetime.fromisoformat(d["before"]) if d.get("before") else None,
        extra_ids={t: tuple(ids) for t, ids in (d.get("extra_ids") or {}).items()},
        rows={t: tuple((ns, pk) for ns, pk in rows) for t, rows in (d.get("rows") or {}).items()},
        within=tuple(d["within"]) if d.get("within") is not None else None,
        grants=(
            tuple((str(ns), bool(prefix)) for ns, prefix in d["grants"])
            if d.get("grants") is not None
            else None
        ),
    )
