"""What the compliance pages share: who may open which, the namespaces they suggest, and the
admin frame they render in. The pages themselves: ``erasure``, ``wipe``, ``exports``, ``lookup``."""

from __future__ import annotations

import functools

from django.template.response import TemplateResponse

from memoryapp import permissions as perms
from memoryapp.admin.base import db_for
from memoryapp.admin.responses import forbidden
from memoryapp.compliance.desk_scope import covers, grants_of, tenant_of
from memoryapp.models import Memory, ReviewItem, SessionSummary

ERASE_PERM = perms.ERASE_MEMORY
WIPE_PERM = perms.WIPE_MEMORY
EXPORT_PERM = perms.EXPORT_MEMORY


def links(user) -> dict:
    """Which compliance pages ``user`` may open (for the index and the receipts list)."""
    return {
        "can_erase_subject": user.has_perm(ERASE_PERM),
        "can_wipe": user.has_perm(WIPE_PERM),
        "can_export": user.has_perm(EXPORT_PERM),
        "can_see_receipts": perms.can_see_receipts(user),
        "can_lookup": can_lookup(user),
    }


def can_lookup(user) -> bool:
    """Who may look a subject key up: whoever may read receipts, export or view requests."""
    return (
        perms.can_see_receipts(user)
        or user.has_perm(EXPORT_PERM)
        or user.has_perm(perms.VIEW_SUBJECTREQUEST)
    )


def known_namespaces(user=None, limit: int = 500) -> list[str]:
    """Namespaces that hold something, for the forms' suggestions: those of the tenants
    ``user``'s desk grants cover (a scoped officer is never offered another tenant's)."""
    grants = grants_of(user)
    found: set[str] = set()
    for model in (Memory, SessionSummary, ReviewItem):
        found.update(
            model.objects.using(db_for(model))
            .order_by()
            .values_list("namespace", flat=True)
            .distinct()[:limit]
        )
    return sorted(ns for ns in found if covers(grants, tenant_of(ns)))[:limit]


def page(modeladmin, request, template: str, **context) -> TemplateResponse:
    """A compliance page in the admin's frame (header, breadcrumbs) with ``context``."""
    request.current_app = modeladmin.admin_site.name
    return TemplateResponse(
        request,
        template,
        {**modeladmin.admin_site.each_context(request), "opts": modeladmin.model._meta, **context},
    )


def requires(perm: str, page_name: str):
    """A compliance view opens only with ``perm``; without it, the admin's styled 403."""

    def decorate(view):
        @functools.wraps(view)
        def checked(modeladmin, request):
            if not request.user.has_perm(perm):
                return forbidden(modeladmin, request, perm, page_name)
            return view(modeladmin, request)

        return checked

    return decorate


def can_see_exports(user) -> bool:
    """Export records are for whoever may export or read receipts."""
    return user.has_perm(EXPORT_PERM) or perms.can_see_receipts(user)
