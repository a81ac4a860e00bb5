"""The Django admin as the memory back office (docs/behaviour.md §3, §6, §9, §11).

One module per area: ``memories`` (list, guarded editing, soft delete,
restore, erase, export), ``review`` (the review queue), ``sessions`` (the
session summaries), ``audit`` (read-only events, schema metadata and erasure
receipts, which also host the compliance pages), the compliance pages
``erasure`` (erase a subject, retry, print a receipt), ``wipe`` (wipe a
namespace), ``exports`` (export, and the export records) and ``lookup`` (look a
user key up), with what they share in ``compliance``; ``subject_requests``
(the data-subject requests by due date, and the desk's tenant grants) with
``desk_actions`` (the actions on one request), ``overview`` (the index chart,
the store-problems banner and the requests' deadlines, shown by the
``{% memoryapp_overview %}`` tag of ``memoryapp_admin``). Shared pieces:
``base`` (model admin bases, the acting user), ``confirm`` (confirmation
pages, "Select all N"), ``filters``, ``labels`` and ``responses``.
"""

from memoryapp.admin import (  # noqa: F401  (registers admins)
    audit,
    exports,
    memories,
    review,
    sessions,
    subject_requests,
)
