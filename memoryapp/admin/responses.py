"""Responses the admin's own pages share: the styled 403, JSON downloads, erasure notes."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.template.response import TemplateResponse


def forbidden(modeladmin, request, perm: str, page: str) -> TemplateResponse:
    """The admin's own 403 for one of the app's pages: what is missing, in words, and a way back.

    Raising ``PermissionDenied`` gave Django's bare "403 Forbidden", without the
    admin's header or a reason, to a staff user who followed a link to a page
    their account may not open. ``perm`` is ``"app_label.codename"``; ``page``
    names the page as its links do.
    """
    from django.contrib.auth.models import Permission

    app_label, _, codename = perm.partition(".")
    name = (
        Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        .values_list("name", flat=True)
        .first()
    )
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        "memoryapp/admin/forbidden.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Permission needed",
            "page": page,
            "permission": perm,
            "permission_name": name or perm,
        },
        status=403,
    )


def json_download(document: dict, filename: str) -> HttpResponse:
    """A JSON document as a file download (never cached)."""
    body = json.dumps(document, ensure_ascii=False, indent=2, default=str)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def worker_note(receipt) -> str:
    """What to add to an erasure's message when the erasure worker finishes it."""
    from memoryapp.compliance import purge_now
    from memoryapp.models import ReceiptState

    if purge_now() or receipt.state == ReceiptState.COMPLETE:
        return ""
    return " The rows are deleted; the erasure worker purges the files and verifies."
