"""Erasure that really removes the bytes, with receipts; replay after restore; export; retention.

``from memoryapp.compliance import erase, export`` (docs/behaviour.md §13). See
``docs/compliance.md`` for what each vendor's purge guarantees and what it
cannot reach. The package: ``targets`` (a request's shape and target, one rule
for every interface), ``selection`` (which rows), ``engine`` (record, delete,
hand to the purge), ``deletion`` (one target's rows on one database),
``leases`` (who runs a receipt), ``purging`` (purge and verify), ``service``
(the requests), ``replay``, ``export``, ``receipts`` (HMACs, JSON form, ledger
file), ``sealed`` (what an unfinished erasure needs, encrypted), ``worker``
(completes receipts off the request), ``attention`` (bounded retries; receipts a
person must look at); vendor SQL lives in :mod:`memoryapp.db.purge`.
"""

from __future__ import annotations

from memoryapp.compliance import attention, phases
from memoryapp.compliance.export import export, retention_statement
from memoryapp.compliance.leases import ReceiptInProgress
from memoryapp.compliance.receipts import as_dict as receipt_as_dict
from memoryapp.compliance.receipts import outcome_of, outcome_words, subject_hmac
from memoryapp.compliance.replay import ReplayReport, replay
from memoryapp.compliance.selection import rows_removed
from memoryapp.compliance.service import (
    authored_count,
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
from memoryapp.compliance.targets import ErasureRequestError, build_target, check_request_shape

__all__ = [
    "ErasureRequestError",
    "attention",
    "phases",
    "authored_count",
    "build_target",
    "check_request_shape",
    "ReceiptInProgress",
    "ReplayReport",
    "erase",
    "erase_review_items",
    "export",
    "outcome_of",
    "outcome_words",
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
