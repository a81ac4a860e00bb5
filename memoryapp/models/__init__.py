"""The tables of docs/behaviour.md §1, with Agentao-compatible names and columns, and our own.

One module per concern (``memories``, ``review``, ``meta``, ``compliance``, ``requests``; shared
choices and ids in ``base``); Django and the rest of the code import them from ``memoryapp.models``.
"""

# Migration 0001 names ``memoryapp.models._TagsMixin`` as a base of two models.
from memoryapp.models.base import (
    Confidence,
    MemoryType,
    ReviewStatus,
    Scope,
    Sensitivity,
    Source,
    _TagsMixin,  # noqa: F401
    dump_list,
    json_list,
    new_id,
)
from memoryapp.models.compliance import (
    RETRIED_STATES,
    UNFINISHED_STATES,
    CopyCheck,
    ErasureReceipt,
    ErasureTarget,
    ExportRecord,
    ExportVia,
    ReceiptState,
    new_request_id,
)
from memoryapp.models.memories import EVENT_TYPES, Memory, MemoryEvent, SessionSummary
from memoryapp.models.meta import RecallSnapshot, SchemaMeta, SliceChange
from memoryapp.models.requests import (
    CLOSED_STATUSES,
    OPEN_STATUSES,
    DeskGrant,
    RequestAction,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
    SubjectRight,
)
from memoryapp.models.review import ReviewItem

__all__ = [
    "CLOSED_STATUSES",
    "OPEN_STATUSES",
    "EVENT_TYPES",
    "RETRIED_STATES",
    "UNFINISHED_STATES",
    "Confidence",
    "CopyCheck",
    "DeskGrant",
    "ErasureReceipt",
    "ErasureTarget",
    "ExportRecord",
    "ExportVia",
    "Memory",
    "MemoryEvent",
    "MemoryType",
    "RecallSnapshot",
    "ReceiptState",
    "RequestAction",
    "RequestStatus",
    "ReviewItem",
    "ReviewStatus",
    "SchemaMeta",
    "Scope",
    "Sensitivity",
    "SessionSummary",
    "SliceChange",
    "Source",
    "SubjectRequest",
    "SubjectRequestEvent",
    "SubjectRight",
    "dump_list",
    "json_list",
    "new_id",
    "new_request_id",
]
