"""The Django admin as the memory back office (docs/behaviour.md §3, §6, §9, §11).

One module per area: ``memories`` (list, guarded editing, soft delete,
restore, erase, export), ``review`` (the review queue and session summaries),
``audit`` (read-only events, schema metadata and erasure receipts, which also
host the compliance pages), ``compliance`` (erase a subject, wipe a namespace,
export), ``requests`` (the data-subject requests by due date), ``overview`` (the
index chart and the store-problems banner, shown by the ``{% memoryapp_overview %}``
tag of ``memoryapp_admin``).
"""

from memoryapp.admin import audit, memories, requests, review  # noqa: F401  (registers admins)
