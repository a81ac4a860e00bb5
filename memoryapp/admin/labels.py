"""How the admin names and shows things: namespaces, times, list cells, event details, tables."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary

MEMORIES = Memory._meta.db_table
SUMMARIES = SessionSummary._meta.db_table
REVIEW = ReviewItem._meta.db_table
EVENTS = MemoryEvent._meta.db_table
ADMIN_LOG = "django_admin_log"

TABLE_LABELS = {
    MEMORIES: "Memories (live and soft-deleted)",
    SUMMARIES: "Session summaries",
    REVIEW: "Review items",
    EVENTS: "Audit events (memory_events)",
    ADMIN_LOG: "Admin history entries (titles replaced by “[erased]”)",
}
"""How each table an erasure touches is named on the pages (table name shown beside it)."""


def namespace_label(namespace: str | None) -> str:
    """A namespace as shown to people: the empty (single-tenant) namespace has a name."""
    return "(default namespace)" if namespace == "" else str(namespace)


def admin_time(value) -> str:
    """A timestamp as every admin page shows one: ``DATETIME_FORMAT``, current time zone.

    Django formats its own date columns, read-only fields and History pages
    with ``DATETIME_FORMAT``; the app's columns, tooltips and templates
    (``|date:"DATETIME_FORMAT"``) use it too, so one project setting (the
    project's is ``2025-12-03 14:32:05``, see ``project/formats``) sets them all.
    """
    if value is None:
        return "—"
    return date_format(timezone.localtime(value), "DATETIME_FORMAT")


def chips(values, css: str = "mem-chip") -> str:
    """Tags or keywords as small labels."""
    return format_html_join(" ", '<span class="{}">{}</span>', ((css, v) for v in values))


def two_lines(first: str, second: str) -> str:
    """A list cell with a main value and a quieter second line."""
    return format_html('{}<span class="mem-excerpt">{}</span>', first, second)


TITLE_CHARS = 60  # a list shows this much of a title; its tooltip holds all of it


def title_cell(title: str, excerpt: str) -> str:
    """A list's first cell: the title cut to :data:`TITLE_CHARS` over a quieter excerpt.

    One long unbroken title (a URL, a key without spaces) widened the column
    until the state, namespace, type, source and date columns left the
    screen. The title is cut here, kept whole in its ``title`` tooltip, and
    the stylesheet ends either line with an ellipsis where the column is
    narrower still (``.mem-title``, ``.mem-excerpt`` in ``#result_list``).
    """
    return format_html(
        '<span class="mem-title" title="{}">{}</span><span class="mem-excerpt">{}</span>',
        title,
        Truncator(title).chars(TITLE_CHARS),
        excerpt,
    )


def namespace_cell(namespace: str | None) -> str:
    """A namespace in a list: named as :func:`namespace_label` does, whole in its tooltip."""
    label = namespace_label(namespace)
    return format_html('<span class="mem-ns" title="{}">{}</span>', label, label)


def format_detail(detail: str | None) -> str:
    """An event's JSON detail as ``key=value, …`` (it holds ids, labels and counts only)."""
    if not detail:
        return ""
    try:
        data = json.loads(detail)
    except ValueError:
        return detail
    if not isinstance(data, dict):
        return detail
    return ", ".join(f"{k}={v}" for k, v in sorted(data.items()))


def event_rows(events) -> list[dict]:
    """Events as the history tables show them."""
    return [
        {
            "timestamp": e.timestamp,
            "event_type": e.event_type,
            "actor": e.actor,
            "detail": format_detail(e.detail),
        }
        for e in events
    ]


def count_rows(counts: Mapping[str, int], tables: Iterable[str] = ()) -> list[dict]:
    """``[{table, label, count}]`` for a counts-per-table dict, every content table included."""
    order = [MEMORIES, SUMMARIES, REVIEW, EVENTS, ADMIN_LOG, *tables]
    rows = []
    for table in dict.fromkeys(order):
        if table not in counts and table == ADMIN_LOG:
            continue
        rows.append(
            {
                "table": table,
                "label": TABLE_LABELS.get(table, table),
                "count": int(counts.get(table, 0) or 0),
            }
        )
    return rows
