"""Agentao's dataclasses from this app's rows, and Agentao's timestamp text.

``agentao`` is imported on first use only (:func:`agentao_models`): this
module, like the rest of the app, imports without the optional extra.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from typing import TYPE_CHECKING

from memoryapp.models import Memory, ReviewItem, SessionSummary
from memoryapp.rules.validation import check_stamp

if TYPE_CHECKING:
    from agentao.memory.models import MemoryRecord, MemoryReviewItem, SessionSummaryRecord

logger = logging.getLogger(__name__)

# A naive, whole-second stamp this close to the clock is Agentao's "now"
# (``datetime.now().strftime("%Y-%m-%dT%H:%M:%S")``): it is replaced by the
# store's own microsecond clock so that rows saved within one second keep
# their order. Anything else (an import, a backfill) is kept as given.
_NOW_TOLERANCE = dt.timedelta(seconds=2)


@functools.cache
def agentao_models():
    """``agentao.memory.models``, or an ImportError saying which extra to install."""
    try:
        from agentao.memory import models
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
        raise ImportError(
            "DjangoMemoryStore needs the Agentao runtime: pip install 'memoryapp[agentao]'"
        ) from exc
    return models


def iso(value: dt.datetime | None) -> str | None:
    """A stored datetime as Agentao's timestamp text: naive UTC ISO 8601, ``T`` separator.

    Agentao compares and sorts these strings and parses them with
    ``datetime.fromisoformat`` treating naive values as UTC. Microseconds
    appear when non-zero (a whole-second value prints exactly as Agentao's
    own ``YYYY-MM-DDTHH:MM:SS``); on SQLite the result is the stored text.
    """
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat()


def parse_iso(text: str | None, clock: dt.datetime) -> dt.datetime:
    """An Agentao timestamp as a datetime; ``clock`` when empty, unparsable or "now".

    Raises:
        MemoryValidationError: a readable stamp outside the years 2–9998, which a
            time-zone conversion could carry out of datetime's range.

    Naive values are UTC (as Agentao's retriever reads them). A naive,
    whole-second value within two seconds of ``clock`` — read as UTC or as
    local time, which is what Agentao's ``datetime.now()`` writes — is the
    caller stamping "now" at one-second resolution, and ``clock`` (full
    resolution) is used instead. The result is aware when ``clock`` is
    (``USE_TZ = True``), else naive UTC.
    """
    if not isinstance(text, str) or not text.strip():
        return clock
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        logger.debug("unparsable timestamp from an Agentao record; using the clock")
        return clock
    check_stamp(value)  # a readable stamp out of range is refused, not taken as "now"
    aware_clock = clock if clock.tzinfo is not None else clock.replace(tzinfo=dt.UTC)
    if value.tzinfo is None:
        as_utc = value.replace(tzinfo=dt.UTC)
        if value.microsecond == 0:
            for candidate in (as_utc, value.astimezone()):
                if abs(aware_clock - candidate) < _NOW_TOLERANCE:
                    return clock
        value = as_utc
    # In UTC either way: Python accepts offsets up to 24 h, PostgreSQL only up to 15:59.
    utc = value.astimezone(dt.UTC)
    return utc if clock.tzinfo is not None else utc.replace(tzinfo=None)


def to_record(row: Memory) -> MemoryRecord:
    """A memories row as Agentao's ``MemoryRecord``."""
    return agentao_models().MemoryRecord(
        id=row.id,
        scope=row.scope,
        type=row.type,
        key_normalized=row.key_normalized,
        title=row.title,
        content=row.content,
        tags=row.tags,
        keywords=row.keywords,
        source=row.source,
        confidence=row.confidence,
        sensitivity=row.sensitivity,
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
        deleted_at=iso(row.deleted_at),
    )


def to_summary(row: SessionSummary) -> SessionSummaryRecord:
    """A session_summaries row as Agentao's ``SessionSummaryRecord``."""
    return agentao_models().SessionSummaryRecord(
        id=row.id,
        session_id=row.session_id,
        summary_text=row.summary_text,
        tokens_before=row.tokens_before,
        messages_summarized=row.messages_summarized,
        created_at=iso(row.created_at),
    )


def to_review_item(row: ReviewItem) -> MemoryReviewItem:
    """A memory_review_queue row as Agentao's ``MemoryReviewItem``."""
    return agentao_models().MemoryReviewItem(
        id=row.id,
        scope=row.scope,
        type=row.type,
        key_normalized=row.key_normalized,
        title=row.title,
        content=row.content,
        tags=row.tags,
        evidence=row.evidence,
        source_session=row.source_session,
        occurrences=int(row.occurrences),
        confidence=row.confidence,
        status=row.status,
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
    )


__all__ = ["agentao_models", "iso", "parse_iso", "to_record", "to_review_item", "to_summary"]
