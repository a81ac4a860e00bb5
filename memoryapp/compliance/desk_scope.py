"""Which data-subject requests a staff user sees and acts on: their desk tenant grants.

A request carries the tenant of its subject key (``SubjectRequest.tenant``, the key's
namespace up to its last ``/``). A staff user with :class:`~memoryapp.models.DeskGrant`
rows handles only the requests of the tenants those grants cover (an exact tenant, or
a prefix ending in ``/``, compared case-sensitively as the API clients' namespace
grants are); a user with none, or a superuser, handles every tenant's. Every interface
asks here: the admin's list, pages and actions, the front page's counts, the look-up,
and ``/api/subject-requests/`` — a request of another tenant is a 404 at each.
"""

from __future__ import annotations

from memoryapp import permissions as perms
from memoryapp.db.lookups import covering_q
from memoryapp.models import DeskGrant, SubjectRequest

Grants = tuple[tuple[str, bool], ...]


def tenant_of(subject: str) -> str:
    """The tenant of a subject key: its namespace up to and including its last ``/``
    (``acme/`` for ``acme/alice``, ``acme/eu/`` for ``acme/eu/bob``; ``""`` without one)."""
    cut = subject.rfind("/")
    return subject[: cut + 1] if cut >= 0 else ""


def grants_of(user) -> Grants | None:
    """``user``'s desk grants as ``(namespace, is_prefix)`` pairs; None: every tenant
    (a superuser, or a user without any grant row)."""
    if user is None or getattr(user, "is_superuser", False) or user.pk is None:
        return None
    pairs = tuple(sorted({(g.namespace, g.is_prefix) for g in DeskGrant.objects.filter(user=user)}))
    return pairs or None


def covers(grants: Grants | None, tenant: str) -> bool:
    """Whether ``grants`` (None: every tenant) cover ``tenant``."""
    if grants is None:
        return True
    return any(tenant.startswith(ns) if prefix else tenant == ns for ns, prefix in grants)


def may_handle_tenant(user, tenant: str) -> bool:
    """Whether ``user``'s grants cover ``tenant`` (no grant: every tenant)."""
    return covers(grants_of(user), tenant)


def visible_requests(user, queryset=None):
    """``queryset`` (default: every request) narrowed to the tenants ``user`` handles.

    ``user`` None is the command line and the service itself: every request.
    """
    queryset = SubjectRequest.objects.all() if queryset is None else queryset
    grants = grants_of(user)
    return queryset if grants is None else queryset.filter(covering_q("tenant", grants))


def may_see_holdings(user) -> bool:
    """Whether ``user`` may see what is held about a person (rows per namespace, user
    keys with their counts): whoever may export or erase it. The desk's erase page,
    the API's lookup and the admin overview's per-user figures ask this."""
    return bool(user.has_perm(perms.EXPORT_MEMORY) or user.has_perm(perms.ERASE_MEMORY))
