"""``{% memoryapp_overview %}``: the memory overview of the admin index (chart, problems, links).

A project shows it by overriding ``admin/index.html``::

    {% extends "admin/index.html" %}
    {% load memoryapp_admin %}
    {% block content %}{% memoryapp_overview %}{{ block.super }}{% endblock %}

The app's own index (``/admin/memoryapp/``) shows it without any override.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django import template

register = template.Library()


@register.filter
def thousands(value):
    """A count with thousands separators, ``1200`` as ``1,200`` (as ``wording.plural`` writes).

    ``f"{n:,}"`` rather than ``humanize``'s ``intcomma``: the host project need
    not install ``django.contrib.humanize``, and the messages, the CLI and the
    pages agree. Anything but an integer is returned as it is.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return f"{value:,}"


_FACET = re.compile(r"\((\d{4,})\)$")


@register.filter
def facet_count(value):
    """A filter choice's facet count with thousands separators: Django writes
    ``"erasure (12345)"``; the pages write counts as ``12,345`` everywhere else."""
    text = str(value)
    found = _FACET.search(text)
    if found is None:
        return value
    return f"{text[: found.start()]}({int(found.group(1)):,})"


@register.inclusion_tag("memoryapp/admin/overview.html", takes_context=True)
def memoryapp_overview(context):
    """Per-namespace memories by type and pending review (SVG), store problems, compliance links."""
    from memoryapp.admin.overview import overview

    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_staff or not user.has_module_perms("memoryapp"):
        return {"hidden": True}
    return {"request": request, **overview(user)}


@dataclass(frozen=True)
class RecentAction:
    """One entry of "Recent actions": Django's log entry, and whether its row is gone."""

    entry: Any  # django.contrib.admin.models.LogEntry
    gone: bool


@register.simple_tag(takes_context=True)
def memoryapp_recent_actions(context, limit: int = 10) -> list[RecentAction]:
    """The signed-in user's last admin actions, each marked ``gone`` when its row no longer exists.

    What Django's ``{% get_admin_log %}`` gives, for the index's "Recent actions":
    Django links every entry but a deletion, so an erased memory ("[erased]") or a
    hard-deleted summary led to "does not exist". One query per content type.
    """
    from django.contrib.admin.models import LogEntry

    user = context.get("user")
    if user is None or not user.is_authenticated:
        return []
    entries = list(
        LogEntry.objects.filter(user__pk=user.pk).select_related("content_type", "user")[:limit]
    )
    wanted: dict[int, set[str]] = {}
    for entry in entries:
        if entry.content_type_id is not None and entry.object_id and not entry.is_deletion():
            wanted.setdefault(entry.content_type_id, set()).add(entry.object_id)
    present: dict[int, set[str]] = {}
    for entry in entries:
        kind = entry.content_type
        if kind is not None and kind.pk in wanted and kind.pk not in present:
            present[kind.pk] = _existing_ids(kind, wanted[kind.pk])
    return [
        RecentAction(
            entry=entry,
            gone=entry.is_deletion()
            or entry.object_id not in present.get(entry.content_type_id or 0, set()),
        )
        for entry in entries
    ]


def _existing_ids(kind, ids: set[str]) -> set[str]:
    """Which of ``ids`` still name a row of the content type ``kind`` (as text)."""
    model = kind.model_class()
    if model is None:
        return set()
    try:
        rows = model._base_manager.filter(pk__in=list(ids))
        return {str(pk) for pk in rows.values_list("pk", flat=True)}
    except (ValueError, TypeError):  # an object id the model's key cannot take
        return set()
