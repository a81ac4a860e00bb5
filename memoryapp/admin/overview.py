"""The admin index overview: memories by type and pending review per namespace (SVG), problems."""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db import DatabaseError
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from memoryapp import permissions as perms
from memoryapp.admin.base import db_for
from memoryapp.admin.labels import namespace_label
from memoryapp.compliance.desk_scope import (
    covers,
    grants_of,
    may_see_holdings,
    tenant_of,
    visible_records,
)
from memoryapp.db.meta import read_change_counter
from memoryapp.facade import MemoryManager
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryType,
    ReviewItem,
    Scope,
    SessionSummary,
)
from memoryapp.rules.wording import plural

logger = logging.getLogger(__name__)

TOP_NAMESPACES = 12
PROBE_NAMESPACE = "memoryapp:admin-probe"  # matches no rows: the store probe stays cheap

TYPE_COLORS: dict[str, str] = {
    MemoryType.PREFERENCE: "#417690",
    MemoryType.PROFILE: "#79aec8",
    MemoryType.PROJECT_FACT: "#5b8c5a",
    MemoryType.WORKFLOW: "#d4a72c",
    MemoryType.DECISION: "#c0504d",
    MemoryType.CONSTRAINT: "#8064a2",
    MemoryType.NOTE: "#9aa5ab",
}
PENDING_COLOR = "#e07b39"

# Geometry of the chart (pixels).
LABEL_W, BAR_W, TOTAL_W, GAP, PENDING_W, PENDING_TEXT_W = 190, 380, 54, 24, 90, 40
ROW_H, BAR_H, TOP = 26, 16, 40
WIDTH = LABEL_W + BAR_W + TOTAL_W + GAP + PENDING_W + PENDING_TEXT_W


def store_problems() -> list[str]:
    """``take_store_problems()`` of a manager that probed every configured store."""
    mm = MemoryManager(project=PROBE_NAMESPACE, user=PROBE_NAMESPACE)
    mm.get_all_entries()
    mm.get_cross_session_tail()
    return mm.take_store_problems()


def overview(user) -> dict:
    """Everything the overview template shows; a database error becomes a problem line."""
    try:
        problems = store_problems()
    except Exception as exc:  # the index must render even when probing fails
        logger.warning("admin overview: store probe failed", exc_info=True)
        problems = [f"The stores could not be probed: {type(exc).__name__}"]
    data: dict = {"problems": problems, "chart": None, "namespaces": [], "totals": {}}
    data.update(opens(user))
    try:
        data.update(_counts(data, per_user=may_see_holdings(user), user=user))
    except DatabaseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"The overview could not be counted: {first}")
    from memoryapp.admin.compliance import links
    from memoryapp.admin.erasure import attention_summary

    try:
        data["erasures"] = attention_summary(user)
    except DatabaseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"The unfinished erasures could not be counted: {first}")
    try:
        data["copies_late"] = _late_copies()
    except DatabaseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"The copies' checks could not be counted: {first}")
    from memoryapp.admin.subject_requests import deadlines_line

    try:
        data["requests"] = deadlines_line(user)
    except DatabaseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        problems.append(f"The data-subject requests could not be counted: {first}")
    data.update(links(user))
    return data


def opens(user) -> dict:
    """Which of the overview's links ``user`` may open: a tile or a bar without the
    permission is shown as plain text, not as a link to a 403."""
    return {
        "can_memories": user.has_perm(perms.VIEW_MEMORY) or user.has_perm(perms.CHANGE_MEMORY),
        "can_review": user.has_perm(perms.VIEW_REVIEWITEM)
        or user.has_perm(perms.CHANGE_REVIEWITEM),
        "can_summaries": user.has_perm(perms.VIEW_SESSIONSUMMARY),
        "can_add_request": user.has_perm(perms.ADD_SUBJECTREQUEST),
    }


def _fold_users(rows: list[dict], user_namespaces: set[str]) -> list[dict]:
    """``rows`` with every user namespace (a user key) folded into one unnamed row.

    A user key with its memory count is what is held about a person: shown only to
    those who may see holdings (:func:`~memoryapp.compliance.desk_scope.may_see_holdings`),
    as the desk shows them only on its erase page.
    """
    users = [r for r in rows if r["namespace"] in user_namespaces]
    if not users:
        return rows
    types: dict[str, int] = defaultdict(int)
    for row in users:
        for mem_type, n in row["types"].items():
            types[mem_type] += n
    folded = {
        "namespace": None,
        "label": f"user namespaces ({plural(len(users), 'user', 'users')})",
        "types": dict(types),
        "memories": sum(r["memories"] for r in users),
        "pending": sum(r["pending"] for r in users),
    }
    return [r for r in rows if r["namespace"] not in user_namespaces] + [folded]


def _late_copies() -> list[str]:
    """One line per server that has not reported its check of erasures in time."""
    from memoryapp import conf
    from memoryapp.compliance import copies
    from memoryapp.rules.wording import plural

    after = int(conf.copy_report_after())
    return [
        f"{'primary' if server == 'primary' else 'replica ' + server}: no check reported for "
        f"{plural(n, 'erasure', 'erasures')} after {after} s (MEMORYAPP_COPY_REPORT_AFTER)"
        for server, n in sorted(copies.late_by_server().items())
    ]


def _count_in(queryset, grants) -> int:
    """``queryset``'s rows, or (``grants`` given: a tenant-scoped officer) those of the
    namespaces whose tenant the grants cover, counted per namespace in one query."""
    if grants is None:
        return queryset.count()
    per_ns = queryset.order_by().values_list("namespace").annotate(n=Count("pk"))
    return sum(n for ns, n in per_ns if covers(grants, tenant_of(ns)))


def _counts(links: dict, *, per_user: bool, user=None) -> dict:
    """The chart's rows and the tiles' totals; a tenant-scoped officer's are those of
    their tenants' namespaces (and receipts) only."""
    grants = grants_of(user)
    using = db_for(Memory)
    by_type: dict[str, dict[str, int]] = defaultdict(dict)
    for ns, mem_type, n in (
        Memory.objects.using(using)
        .live()
        .order_by()
        .values_list("namespace", "type")
        .annotate(n=Count("pk"))
    ):
        by_type[ns][mem_type] = n
    pending = dict(
        ReviewItem.objects.using(using)
        .pending()
        .order_by()
        .values_list("namespace")
        .annotate(n=Count("pk"))
    )
    rows = [
        {
            "namespace": ns,
            "label": namespace_label(ns),
            "types": by_type.get(ns, {}),
            "memories": sum(by_type.get(ns, {}).values()),
            "pending": pending.get(ns, 0),
        }
        for ns in set(by_type) | set(pending)
        if covers(grants, tenant_of(ns))
    ]
    namespaces = len(rows)
    if not per_user:
        user_namespaces = set(
            Memory.objects.using(using)
            .filter(scope=Scope.USER)
            .order_by()
            .values_list("namespace", flat=True)
            .distinct()
        )
        rows = _fold_users(rows, user_namespaces)
    rows.sort(key=lambda r: (-(r["memories"] + r["pending"]), r["label"]))
    shown = rows[:TOP_NAMESPACES]
    chart = (
        render_chart(shown, memories=links["can_memories"], review=links["can_review"])
        if shown
        else None
    )
    return {
        "namespaces": shown,
        "more_namespaces": max(len(rows) - TOP_NAMESPACES, 0),
        "chart": chart,
        "users_folded": any(r["namespace"] is None for r in rows),
        "totals": {
            "live": sum(r["memories"] for r in rows),
            "deleted": _count_in(Memory.objects.using(using).deleted(), grants),
            "pending": sum(r["pending"] for r in rows),
            "summaries": _count_in(SessionSummary.objects.using(using), grants),
            "receipts": visible_records(user, ErasureReceipt.objects.using(using)).count(),
            "namespaces": namespaces,
            "change_counter": read_change_counter(using),
        },
    }


def _linked(href: str | None, inner: SafeString) -> SafeString:
    """``inner`` inside a link to ``href``; alone when there is nowhere (allowed) to go."""
    return format_html('<a href="{}">{}</a>', href, inner) if href else inner


def _type_bars(row: dict, y: int, max_total: int) -> list[tuple[SafeString, float]]:
    """A row's stacked bars, one per memory type it holds, each with its width."""
    bars = []
    x = float(LABEL_W)
    for mem_type in MemoryType.values:
        n = row["types"].get(mem_type, 0)
        if not n:
            continue
        w = BAR_W * n / max_total
        bar = format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {} {}</title></rect>',
            f"{x:.1f}",
            y,
            f"{max(w, 1):.1f}",
            BAR_H,
            TYPE_COLORS[mem_type],
            row["label"],
            f"{n:,}",
            mem_type.replace("_", " "),
        )
        bars.append((bar, w))
        x += w
    return bars


def render_chart(rows: list[dict], *, memories: bool = True, review: bool = True) -> SafeString:
    """A horizontal stacked bar per namespace (memories by type) and its pending review bar.

    ``memories`` and ``review``: whether the viewer may open the memories' and the
    review queue's lists, which the labels and the pending bars link to; a row
    without a namespace (the folded user namespaces) links nowhere.
    """
    max_total = max((r["memories"] for r in rows), default=0) or 1
    max_pending = max((r["pending"] for r in rows), default=0) or 1
    height = TOP + ROW_H * len(rows) + 8
    memories_url = reverse("admin:memoryapp_memory_changelist")
    review_url = reverse("admin:memoryapp_reviewitem_changelist")
    parts: list[str] = [_legend()]
    pending_x = LABEL_W + BAR_W + TOTAL_W + GAP
    parts.append(
        format_html(
            '<text x="{}" y="{}" class="mem-chart-head">pending review</text>',
            pending_x,
            TOP - 8,
        )
    )
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H
        mid = y + BAR_H / 2 + 4
        named = row["namespace"] is not None
        link = memories_url + "?" + urlencode({"namespace": row["namespace"] or ""})
        label = format_html(
            '<text x="{}" y="{}" text-anchor="end" class="mem-chart-label">'
            "<title>{}</title>{}</text>",
            LABEL_W - 10,
            mid,
            row["label"],
            Truncator(row["label"]).chars(26),
        )
        parts.append(_linked(link if memories and named else None, label))
        x = float(LABEL_W)
        for bar, w in _type_bars(row, y, max_total):
            parts.append(bar)
            x += w
        parts.append(
            format_html(
                '<text x="{}" y="{}" class="mem-chart-num">{}</text>',
                f"{x + 6:.1f}",
                mid,
                f"{row['memories']:,}",
            )
        )
        pw = PENDING_W * row["pending"] / max_pending
        review_link = (
            review_url + "?" + urlencode({"namespace": row["namespace"] or "", "status": "pending"})
        )
        bar = format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" rx="2">'
            "<title>{}: {} pending review</title></rect>"
            '<text x="{}" y="{}" class="mem-chart-num">{}</text>',
            pending_x,
            y,
            f"{max(pw, 1 if row['pending'] else 0):.1f}",
            BAR_H,
            PENDING_COLOR,
            row["label"],
            f"{row['pending']:,}",
            f"{pending_x + pw + 6:.1f}",
            mid,
            f"{row['pending']:,}",
        )
        parts.append(_linked(review_link if review and named else None, bar))
    summary = "; ".join(
        f"{r['label']}: {plural(r['memories'], 'memory', 'memories')}, "
        f"{r['pending']:,} pending review"
        for r in rows
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="mem-chart" viewBox="0 0 {} {}" '
        'width="{}" height="{}" role="img" aria-label="{}">{}</svg>',
        WIDTH,
        height,
        WIDTH,
        height,
        "Memories by type and pending review items per namespace. " + summary,
        mark_safe("".join(parts)),  # noqa: S308 - every part is built by format_html
    )


def _legend() -> str:
    items = [(TYPE_COLORS[t], label) for t, label in MemoryType.choices]
    items.append((PENDING_COLOR, "pending review"))
    x = 0
    out = []
    for color, label in items:
        out.append((x, color, x + 14, label))
        x += 22 + 7 * len(label)
    return format_html_join(
        "",
        '<rect x="{}" y="4" width="10" height="10" fill="{}"></rect>'
        '<text x="{}" y="13" class="mem-chart-legend">{}</text>',
        out,
    )
