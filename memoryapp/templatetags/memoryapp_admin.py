"""``{% memoryapp_overview %}``: the memory overview of the admin index (chart, problems, links).

A project shows it by overriding ``admin/index.html``::

    {% extends "admin/index.html" %}
    {% load memoryapp_admin %}
    {% block content %}{% memoryapp_overview %}{{ block.super }}{% endblock %}

The app's own index (``/admin/memoryapp/``) shows it without any override.
"""

from __future__ import annotations

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


@register.inclusion_tag("memoryapp/admin/overview.html", takes_context=True)
def memoryapp_overview(context):
    """Per-namespace memories by type and pending review (SVG), store problems, compliance links."""
    from ..admin.overview import overview

    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_staff or not user.has_module_perms("memoryapp"):
        return {"hidden": True}
    return {"request": request, **overview(user)}
