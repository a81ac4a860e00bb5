"""Session summaries (docs/behaviour.md §4): save, list, delete, and the rows of the tail.

Summaries live in the project namespace of a binding, on its project database;
they are stored and rendered into prompts like memories, so the same guard
refuses a credential in one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

from memoryapp.db import compiled, locks
from memoryapp.models import MemoryEvent, SessionSummary
from memoryapp.rules import validation
from memoryapp.rules.batching import batches
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services.slices import Binding

logger = logging.getLogger("memoryapp.facade")

TAIL_WINDOW = 10  # latest summaries the cross-session tail looks at (docs/behaviour.md §4)


def summaries(binding: Binding):
    """The session summaries of ``binding``'s project namespace."""
    s = binding.project_store
    return SessionSummary.objects.using(s.using).in_namespace(s.namespace)


def save(
    *,
    binding: Binding,
    guard: MemoryGuard,
    session_id: str,
    text: str,
    tokens_before: int = 0,
    messages_summarized: int = 0,
) -> SessionSummary | None:
    """Record the summary of a complete compaction; never raises (None when not saved).

    Refused (None, and a log line without the text): invalid text, more than
    64,000 characters, a credential, or a count that is not an integer, is negative
    or is over 2**31-1.
    """
    try:
        if not isinstance(text, str) or not text.strip():
            return None
        summary = validation.check_summary(text)
        # Checked before the INSERT: a count the integer column cannot hold made it
        # fail, and PostgreSQL logs a failing statement with its values.
        tokens = validation.check_counter(tokens_before, "tokens_before")
        messages = validation.check_counter(messages_summarized, "messages_summarized")
        guard.detect_sensitive(summary)
    except SensitiveMemoryError:
        logger.warning("save_session_summary refused: it looks like a credential")
        return None
    except MemoryValidationError as exc:
        logger.warning("save_session_summary refused: %s", exc)  # the reason, never the text
        return None
    using = binding.project_store.using
    try:
        with transaction.atomic(using=using):
            # An erasure of the namespace or the subject runs wholly before or after.
            locks.for_write(
                using, namespaces=[binding.project_store.namespace], subjects=[binding.subject]
            )
            return SessionSummary.objects.using(using).create(
                session_id=session_id,
                summary_text=summary,
                tokens_before=tokens,
                messages_summarized=messages,
                namespace=binding.project_store.namespace,
                subject=binding.subject,
            )
    except Exception:
        logger.warning("save_session_summary failed", exc_info=True)
        return None


def delete(*, binding: Binding, session_id: str | None = None) -> int:
    """Hard-delete the project namespace's summaries (of one session if given); the count."""
    rows = summaries(binding)
    if session_id is not None:
        rows = rows.for_session(session_id)
    with transaction.atomic(using=binding.project_store.using):
        deleted, _ = rows.delete()
    return deleted


@validation.checked_arguments
def delete_ids(*, ids: Iterable[str], using: str, actor: str = "") -> int:
    """Hard-delete the summaries with these ids, any namespace (an operator's selection).

    One ``summary_delete`` event per summary names ``actor``. In batches of 500
    ids (SQLite's bound-variable limit), in one transaction. Returns the count.
    """
    rows = SessionSummary.objects.using(using)
    deleted = 0
    with transaction.atomic(using=using):
        for batch in batches(list(ids)):
            found = list(rows.filter(pk__in=batch).values_list("pk", "namespace"))
            rows.filter(pk__in=batch).delete()
            MemoryEvent.objects.using(using).bulk_create(
                MemoryEvent(memory_id=pk, event_type="summary_delete", namespace=ns, actor=actor)
                for pk, ns in found
            )
            deleted += len(found)
    return deleted


def recent(*, binding: Binding, session_id: str, limit: int | None = 5) -> list[SessionSummary]:
    """A session's summaries, newest first, at most ``limit`` (None or negative: no limit).

    Raises:
        MemoryValidationError: ``session_id`` is not storable text, or ``limit`` is
            neither None nor an integer.
    """
    session_id = validation.require_str(session_id, "session_id")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise MemoryValidationError("limit must be an integer or None")
    qs = summaries(binding).for_session(session_id).order_by("-created_at", "-id")
    # A limit past any count the database can hold is no limit (and no overflow).
    if limit is not None and 0 <= limit <= validation.MAX_COUNTER:
        qs = qs[:limit]
    return list(qs)


def listed(*, binding: Binding, session_id: str | None = None) -> list[SessionSummary]:
    """Summaries of the project namespace (optionally one session), oldest first."""
    qs = summaries(binding)
    if session_id is not None:
        qs = qs.for_session(session_id)
    return list(qs.order_by("created_at", "id"))


def tail_rows(*, binding: Binding) -> list[tuple[str, str]]:
    """``(session id, text)`` of the latest summaries, oldest first: what the tail picks from.

    Every recall turn reads it: its statement is compiled once (:mod:`memoryapp.db.compiled`),
    since building the queryset cost more than the query.
    """
    s = binding.project_store

    def build(namespaces):
        return (
            SessionSummary.objects.using(s.using)
            .in_namespace(namespaces[0])
            .order_by("-created_at", "-id")
            .values_list("session_id", "summary_text")[:TAIL_WINDOW]
        )

    latest = compiled.run(("summary-tail", s.using), build, [s.namespace])
    return [(session_id, text) for session_id, text in reversed(latest)]
