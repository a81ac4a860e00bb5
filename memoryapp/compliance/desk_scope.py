"""Which data-subject requests a staff user sees and acts on: their desk tenant grants.

A request carries the tenant of its subject key (``SubjectRequest.tenant``, the key's
namespace up to its last ``/``). A staff user with :class:`~memoryapp.models.DeskGrant`
rows handles only the requests of the tenants those grants cover (an exact tenant, or
a prefix ending in ``/``, compared case-sensitively as the API clients' namespace
grants are); a user with none, or a superuser, handles every tenant's. Every interface
asks here: the admin's list, pages and actions, the front page's counts, the look-up,
and ``/api/subject-requests/`` — a request of another tenant is a 404 at each.

Erasure receipts and export records carry a tenant too (``tenant``: the one of the
subject key, else of the namespace, the erasure or export named; NULL when it named no
single tenant — everything, retention, ids across tenants — or was recorded before
tenants were and could not be traced back). A scoped officer sees those of their
tenants only (:func:`visible_records`); a NULL tenant is for unscoped officers alone.
The command line is the operator's tool and is never narrowed.
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
    return visible_records(user, SubjectRequest.objects.all() if queryset is None else queryset)


def tenant_of_target(subject: str | None, namespace: str | None) -> str | None:
    """The tenant an erasure or export of ``subject`` / ``namespace`` belongs to: the
    subject key's, else the namespace's; None when it names neither (everything)."""
    if subject is not None:
        return tenant_of(subject)
    if namespace is not None:
        return tenant_of(namespace)
    return None


def tenant_of_targets(targets) -> str | None:
    """The one tenant an erasure's targets name (its receipt's ``tenant``): a subject's,
    else a namespace's, else that of every row an ids target resolved to; None when
    they name none (everything, retention) or several."""
    tenants: set[str] = set()
    for target in targets:
        if target.subject is not None or target.namespace is not None:
            tenants.add(tenant_of_target(target.subject, target.namespace) or "")
        elif target.rows:
            tenants.update(tenant_of(ns) for pairs in target.rows.values() for ns, _ in pairs)
        else:
            return None
    return tenants.pop() if len(tenants) == 1 else None


def visible_records(user, queryset):
    """``queryset`` of requests, erasure receipts or export records (any model with a
    ``tenant``) narrowed to the tenants ``user`` handles: unchanged for an unscoped
    officer (no grant, superuser, the command line); for a scoped one, the records
    whose ``tenant`` their grants cover (NULL: none)."""
    grants = grants_of(user)
    return queryset if grants is None else queryset.filter(covering_q("tenant", grants))


def may_handle_keys(user, *keys: str | None) -> bool:
    """Whether ``user``'s grants cover the tenant of every key or namespace given
    (``None`` entries skipped): what an erase, export or wipe page asks before it acts."""
    grants = grants_of(user)
    return all(covers(grants, tenant_of(k)) for k in keys if k is not None)


def may_handle_record(user, record) -> bool:
    """Whether ``user`` handles the tenant of one receipt or export record (NULL: only
    an unscoped officer)."""
    grants = grants_of(user)
    if grants is None:
        return True
    return record.tenant is not None and covers(grants, record.tenant)


OUTSIDE_DESK = "The {what}'s tenant is not one your desk handles (yours: {tenants})."


def outside_desk(user, what: str) -> str:
    """The refusal a scoped officer reads for a key or namespace outside their grants."""
    grants = grants_of(user) or ()
    tenants = ", ".join(ns or "(no tenant)" for ns, _ in grants)
    return OUTSIDE_DESK.format(what=what, tenants=tenants)


def may_see_holdings(user) -> bool:
    """Whether ``user`` may see what is held about a person (rows per namespace, user
    keys with their counts): whoever may export or erase it. The desk's erase page,
    the API's lookup and the admin overview's per-user figures ask this."""
    return bool(user.has_perm(perms.EXPORT_MEMORY) or user.has_perm(perms.ERASE_MEMORY))
