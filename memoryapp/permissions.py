"""The one registry of memoryapp's permission codenames, shared by the admin and the API.

Every ``has_perm`` of the back office, every :class:`~memoryapp.api.permissions.Rule`
of the API and the models' ``Meta.permissions`` name a permission through the
constants below, so a codename is spelled once. Django creates the ``view_``,
``add_``, ``change_`` and ``delete_`` permissions of every model; the custom ones
are declared here with their labels (:data:`MEMORY_CUSTOM`, :data:`REVIEW_CUSTOM`).

This module imports nothing of memoryapp: the models import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # django-stubs' alias for a label, str or lazy (no run-time import)
    from django_stubs_ext import StrOrPromise

APP_LABEL = "memoryapp"


def _perm(codename: str) -> str:
    return f"{APP_LABEL}.{codename}"


def codename(perm: str) -> str:
    """``"memoryapp.erase_memory"`` → ``"erase_memory"``."""
    return perm.partition(".")[2]


# Memory (table memory_entries)
VIEW_MEMORY = _perm("view_memory")
ADD_MEMORY = _perm("add_memory")
CHANGE_MEMORY = _perm("change_memory")
DELETE_MEMORY = _perm("delete_memory")  # a soft delete; removing for good is ERASE_MEMORY
ERASE_MEMORY = _perm("erase_memory")
WIPE_MEMORY = _perm("wipe_memory")
EXPORT_MEMORY = _perm("export_memory")

# Session summaries
VIEW_SESSIONSUMMARY = _perm("view_sessionsummary")
ADD_SESSIONSUMMARY = _perm("add_sessionsummary")
DELETE_SESSIONSUMMARY = _perm("delete_sessionsummary")  # Agentao's clear_session_summaries

# The review queue
VIEW_REVIEWITEM = _perm("view_reviewitem")
ADD_REVIEWITEM = _perm("add_reviewitem")
CHANGE_REVIEWITEM = _perm("change_reviewitem")  # approve or reject
PURGE_REVIEWITEM = _perm("purge_reviewitem")

# The audit log and erasure receipts
VIEW_MEMORYEVENT = _perm("view_memoryevent")
VIEW_ERASURERECEIPT = _perm("view_erasurereceipt")

# ``Meta.permissions`` of the models: (codename, label).
MEMORY_CUSTOM: list[tuple[str, StrOrPromise]] = [
    (codename(ERASE_MEMORY), "Can erase memories permanently"),
    (codename(WIPE_MEMORY), "Can wipe a namespace (soft reset)"),
    (codename(EXPORT_MEMORY), "Can export memories"),
]
REVIEW_CUSTOM: list[tuple[str, StrOrPromise]] = [
    (codename(PURGE_REVIEWITEM), "Can purge review items permanently")
]

# Whoever holds one of these may read erasure receipts (they erase, or purge the queue).
RECEIPT_READERS = (VIEW_ERASURERECEIPT, ERASE_MEMORY, PURGE_REVIEWITEM)


def can_see_receipts(user) -> bool:
    """Receipts are for whoever may read them, erase, or purge the review queue.

    Here, beside :data:`RECEIPT_READERS`, because both the receipts' admin and the
    compliance pages ask it (and the receipts' admin imports the compliance pages).
    """
    return any(user.has_perm(p) for p in RECEIPT_READERS)


ALL = (
    VIEW_MEMORY,
    ADD_MEMORY,
    CHANGE_MEMORY,
    DELETE_MEMORY,
    ERASE_MEMORY,
    WIPE_MEMORY,
    EXPORT_MEMORY,
    VIEW_SESSIONSUMMARY,
    ADD_SESSIONSUMMARY,
    DELETE_SESSIONSUMMARY,
    VIEW_REVIEWITEM,
    ADD_REVIEWITEM,
    CHANGE_REVIEWITEM,
    PURGE_REVIEWITEM,
    VIEW_MEMORYEVENT,
    VIEW_ERASURERECEIPT,
)

# Data-subject requests (the compliance desk): Django's view/add/change of the model.
VIEW_SUBJECTREQUEST = _perm("view_subjectrequest")
ADD_SUBJECTREQUEST = _perm("add_subjectrequest")
CHANGE_SUBJECTREQUEST = _perm("change_subjectrequest")

# The compliance role: answers data-subject requests (see, export, erase, read the
# proofs) without the operators' rights to edit memories or run the review queue.
COMPLIANCE_GROUP = "Compliance"
COMPLIANCE_PERMS = (
    VIEW_SUBJECTREQUEST,
    ADD_SUBJECTREQUEST,
    CHANGE_SUBJECTREQUEST,
    EXPORT_MEMORY,
    ERASE_MEMORY,
    VIEW_ERASURERECEIPT,
    _perm("view_exportrecord"),
)
