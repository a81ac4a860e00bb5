"""Erasure that really removes the bytes, with receipts; replay after restore; export; retention.

``from memoryapp.erasure import erase, export`` (docs/behaviour.md §13). See
``docs/compliance.md`` for what each vendor's purge guarantees and what it
cannot reach. The package: ``selection`` (which rows), ``engine`` (delete,
purge, verify), ``service`` (the requests), ``replay``, ``export``,
``receipts`` (HMACs, JSON form, ledger file), ``sealed`` (what an unfinished
erasure needs, encrypted), ``worker`` (completes receipts off the request), ``attention``
(bounded retries; receipts a person must look at); vendor SQL lives in
:mod:`memoryapp.db.purge`.
"""

from __future__ import annotations

from memoryapp.erasure import attention, phases
from memoryapp.erasure.engine import ReceiptInProgress
from memoryapp.erasure.export import export, retention_statement
from memoryapp.erasure.receipts import as_dict as receipt_as_dict
from memoryapp.erasure.receipts import subject_hmac
from memoryapp.erasure.replay import ReplayReport, replay
from memoryapp.erasure.selection import rows_removed
from memoryapp.erasure.service import (
    ErasureRequestError,
    authored_count,
    build_target,
    erase,
    erase_review_items,
    preview,
    preview_expired,
    purge_expired,
    purge_now,
    receipts_for,
    retention_cutoffs,
    retry_purge,
)

__all__ = [
    "ErasureRequestError",
    "attention",
    "phases",
    "authored_count",
    "build_target",
    "ReceiptInProgress",
    "ReplayReport",
    "erase",
    "erase_review_items",
    "export",
    "preview",
    "preview_expired",
    "purge_expired",
    "purge_now",
    "receipt_as_dict",
    "receipts_for",
    "replay",
    "retention_cutoffs",
    "retention_statement",
    "retry_purge",
    "rows_removed",
    "subject_hmac",
]
