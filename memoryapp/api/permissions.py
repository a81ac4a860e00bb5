"""Who may do what where: namespace grants for API clients, model permissions for staff.

Every view declares the :class:`Rule` of each thing it does (``rule`` or
``rules``) and :class:`DeclaredRule`, its permission class, enforces it: a view
or action without a rule refuses (fail closed); rows are checked as objects;
namespaces a request body or query names are checked through
:meth:`DeclaredRule.has_target_permission`. The request's :class:`Access` answers:

* a staff user holding the rule's model permissions acts in every namespace;
* anyone else acts through their :class:`~memoryapp.api.models.NamespaceGrant` rows:
  a namespace no grant covers answers **404** (its existence is not revealed),
  a covered namespace whose grants lack the right answers **403**.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db.models import Q
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import BasePermission

from memoryapp import permissions as perms
from memoryapp.api.authentication import PREFETCHED_GRANTS
from memoryapp.api.models import NamespaceGrant
from memoryapp.db.lookups import covering_q

READ, WRITE, ERASE = "read", "write", "erase"


@dataclass(frozen=True)
class Rule:
    """What one action needs.

    Attributes:
        right: the grant right an API client needs (``read``, ``write`` or ``erase``).
        perms: the model permissions that let a staff user do it in every namespace
            (codenames from the registry, :mod:`memoryapp.permissions`).
        see: model permissions that let staff *see* every namespace; staff who see a
            namespace but lack ``perms`` get 403 rather than 404.
    """

    right: str
    perms: tuple[str, ...]
    see: tuple[str, ...] = ()


MEMORY_READ = Rule(READ, (perms.VIEW_MEMORY,))
MEMORY_WRITE = Rule(WRITE, (perms.ADD_MEMORY, perms.CHANGE_MEMORY), (perms.VIEW_MEMORY,))
MEMORY_DELETE = Rule(WRITE, (perms.DELETE_MEMORY,), (perms.VIEW_MEMORY,))
MEMORY_ERASE = Rule(ERASE, (perms.ERASE_MEMORY,), (perms.VIEW_MEMORY,))
WIPE = Rule(ERASE, (perms.WIPE_MEMORY,), (perms.VIEW_MEMORY,))
EXPORT = Rule(READ, (perms.EXPORT_MEMORY,), (perms.VIEW_MEMORY,))
SUMMARY_READ = Rule(READ, (perms.VIEW_SESSIONSUMMARY,))
SUMMARY_WRITE = Rule(WRITE, (perms.ADD_SESSIONSUMMARY,), (perms.VIEW_SESSIONSUMMARY,))
# Agentao's /clear deletes the summaries (an agent's working state, not erasure).
SUMMARY_DELETE = Rule(WRITE, (perms.DELETE_SESSIONSUMMARY,), (perms.VIEW_SESSIONSUMMARY,))
CRYSTALLIZE = Rule(WRITE, (perms.ADD_REVIEWITEM,), (perms.VIEW_REVIEWITEM,))
REVIEW_READ = Rule(READ, (perms.VIEW_REVIEWITEM,))
REVIEW_REJECT = Rule(WRITE, (perms.CHANGE_REVIEWITEM,), (perms.VIEW_REVIEWITEM,))
REVIEW_APPROVE = Rule(
    WRITE,
    (perms.CHANGE_REVIEWITEM, perms.ADD_MEMORY, perms.CHANGE_MEMORY),
    (perms.VIEW_REVIEWITEM,),
)
REVIEW_PURGE = Rule(ERASE, (perms.PURGE_REVIEWITEM,), (perms.VIEW_REVIEWITEM,))
EVENTS_READ = Rule(READ, (perms.VIEW_MEMORYEVENT,))
# Staff with this permission read every receipt; anyone else reads the receipts
# of the erasures they asked for (receipts carry no namespace to grant on).
RECEIPT_READ = Rule(ERASE, (perms.VIEW_ERASURERECEIPT,))
# The compliance desk's data-subject requests (/api/subject-requests/, and the lookup
# that lists them). Requests carry no namespace to grant on: staff only.
REQUEST_READ = Rule(READ, (perms.VIEW_SUBJECTREQUEST,))
REQUEST_ADD = Rule(WRITE, (perms.ADD_SUBJECTREQUEST,), (perms.VIEW_SUBJECTREQUEST,))
REQUEST_CHANGE = Rule(WRITE, (perms.CHANGE_SUBJECTREQUEST,), (perms.VIEW_SUBJECTREQUEST,))
REQUEST_EXPORT = Rule(
    READ, (perms.CHANGE_SUBJECTREQUEST, perms.EXPORT_MEMORY), (perms.VIEW_SUBJECTREQUEST,)
)
REQUEST_ERASE = Rule(
    ERASE, (perms.CHANGE_SUBJECTREQUEST, perms.ERASE_MEMORY), (perms.VIEW_SUBJECTREQUEST,)
)


# The 404 of a namespace the client may not name. Visibility is decided by the grants
# alone, never by what a namespace holds, so the answer is the same for a namespace
# that exists and one that does not; the hint only says where to look.
OUTSIDE_GRANTS = (
    "Not found: the namespace is outside your client's grants. Namespace grants, given by "
    "an administrator, decide which namespaces a client may name."
)


class Access:
    """The namespaces one user may act in, evaluated once per request."""

    def __init__(self, user) -> None:
        self.user = user
        self._grants: list[NamespaceGrant] | None = None

    @property
    def grants(self) -> list[NamespaceGrant]:
        """The user's grants: read with the token (:mod:`memoryapp.api.authentication`),
        else by one query per request."""
        if self._grants is None:
            if self.user is None or not self.user.is_authenticated:
                self._grants = []
            else:
                read = getattr(self.user, PREFETCHED_GRANTS, None)
                if read is None:
                    read = NamespaceGrant.objects.filter(user=self.user)
                self._grants = list(read)
        return self._grants

    def _is_staff(self) -> bool:
        user = self.user
        return bool(user and user.is_active and (user.is_staff or user.is_superuser))

    def is_global(self, rule: Rule) -> bool:
        """True when the user may do ``rule`` in every namespace (staff with the permissions)."""
        return self._is_staff() and self.user.has_perms(rule.perms)

    def _sees_all(self, rule: Rule) -> bool:
        return self._is_staff() and any(self.user.has_perm(p) for p in rule.see)

    def covering(self, namespace: str) -> list[NamespaceGrant]:
        """The grants that apply to ``namespace``."""
        return [g for g in self.grants if g.covers(namespace)]

    def allows(self, namespace: str, rule: Rule) -> bool:
        """Whether the user may do ``rule`` in ``namespace``."""
        if self.is_global(rule):
            return True
        return any(g.rights()[rule.right] for g in self.covering(namespace))

    def visible(self, namespace: str, rule: Rule) -> bool:
        """Whether the namespace exists for this user at all (else: 404)."""
        return self.is_global(rule) or self._sees_all(rule) or bool(self.covering(namespace))

    def require(self, namespaces: Iterable[str | None], rule: Rule) -> None:
        """Raise 404 unless every namespace is visible, then 403 unless ``rule`` is allowed.

        ``None`` entries (an omitted user namespace) are skipped. Visibility is
        checked for all of them first, so a 403 never hints at a hidden one.
        """
        wanted = [ns for ns in namespaces if ns is not None]
        if any(not self.visible(ns, rule) for ns in wanted):
            raise NotFound(OUTSIDE_GRANTS)
        if any(not self.allows(ns, rule) for ns in wanted):
            raise PermissionDenied()

    def namespace_q(self, rule: Rule, field: str = "namespace") -> Q | None:
        """A filter for the rows whose ``field`` the user may do ``rule`` on; ``None`` = all."""
        if self.is_global(rule):
            return None
        return _covering_q([g for g in self.grants if g.rights()[rule.right]], field)

    def grant_rule(self, rule: Rule) -> tuple[tuple[str, bool], ...] | None:
        """The grants giving ``rule``'s right as ``(namespace, is_prefix)`` pairs (the rule
        :meth:`namespace_q` filters by, in a serialisable form); ``None`` = all (staff)."""
        if self.is_global(rule):
            return None
        return grant_pairs(g for g in self.grants if g.rights()[rule.right])

    def scope(self, queryset, rule: Rule, field: str = "namespace"):
        """``queryset`` narrowed to the namespaces the user may do ``rule`` in."""
        q = self.namespace_q(rule, field)
        return queryset if q is None else queryset.filter(q)

    def scope_visible(self, queryset, rule: Rule, field: str = "namespace"):
        """``queryset`` narrowed to the namespaces that exist for the user (any grant).

        Detail routes look objects up here, then :meth:`require` the action's
        right: a row in a hidden namespace is 404, a visible one without the right 403.
        """
        if self.is_global(rule) or self._sees_all(rule):
            return queryset
        return queryset.filter(_covering_q(self.grants, field))


def _covering_q(grants: Iterable[NamespaceGrant], field: str) -> Q:
    """Rows whose ``field`` some grant covers (an empty list matches nothing)."""
    return covering_q(field, grant_pairs(grants))


def grant_pairs(grants: Iterable[NamespaceGrant]) -> tuple[tuple[str, bool], ...]:
    """``grants`` as sorted, distinct ``(namespace, is_prefix)`` pairs: the plain form of
    :func:`_covering_q`'s rule, which an erasure target can carry (and be sealed with)."""
    return tuple(sorted({(g.namespace, g.is_prefix) for g in grants}))


Check = Callable[[Access, Rule], object]
"""A check of what one request names: raises NotFound (hidden) or PermissionDenied."""


def in_namespaces(*namespaces: str | None) -> Check:
    """The check that every namespace (``None`` skipped) is visible, then allows the rule."""

    def check(access: Access, rule: Rule) -> None:
        access.require(namespaces, rule)

    return check


def holding_rule(access: Access, rule: Rule) -> None:
    """The check that the user may do ``rule`` somewhere (staff permissions or a grant's right).

    For a request that names no namespace and acts on all of the user's: without
    the right anywhere it is a 403, not an empty success.
    """
    if not access.is_global(rule) and not any(g.rights()[rule.right] for g in access.grants):
        raise PermissionDenied()


def access_for(request) -> Access:
    """The request's :class:`Access`, built once and cached on the request."""
    access = getattr(request, "_memory_access", None)
    if access is None or access.user is not request.user:
        access = Access(request.user)
        request._memory_access = access
    return access


class IsActiveUser(BasePermission):
    """An authenticated, active user (namespace rights are :class:`DeclaredRule`'s business)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_active)


def declared_rule(view) -> Rule | None:
    """The :class:`Rule` a view declares for the request being served, or None.

    A viewset declares ``rules`` (action → rule); any other view ``rule`` (one
    rule for all its methods) or ``rules`` keyed by lower-case HTTP method.
    """
    rules = getattr(view, "rules", None)
    if isinstance(rules, dict):
        key = getattr(view, "action", None)
        if key is None and getattr(view, "request", None) is not None:
            key = view.request.method.lower()
        found = rules.get(key)
        if isinstance(found, Rule):
            return found
    found = getattr(view, "rule", None)
    return found if isinstance(found, Rule) else None


def _unserved(request, view) -> bool:
    """Whether no handler of the view runs for this method (DRF answers 405 instead)."""
    method = request.method.lower()
    if method == "options":
        return True
    action_map = getattr(view, "action_map", None)
    if action_map is not None:  # a viewset route
        return method not in action_map
    return not hasattr(view, method)


class DeclaredRule(IsActiveUser):
    """Fail closed: an active user, on a view that declares the rule of what it is asked to do.

    A view (or a new action of a viewset) without a declared :class:`Rule`
    refuses every request, so forgetting to authorise is a 403, never an open
    endpoint. Object routes check the row's namespace (404 when hidden, 403 when
    the right is missing) in :meth:`has_object_permission`, which DRF's
    ``get_object`` calls; rows without a namespace are refused. What a request
    body or query names (namespaces, a subject, ids) is checked in
    :meth:`has_target_permission`, which the view calls once it has validated
    the input (``MemoryAPIMixin.check_target_permissions``).
    """

    def has_permission(self, request, view) -> bool:
        if getattr(view, "swagger_fake_view", False):  # schema generation, no request user
            return True
        if not super().has_permission(request, view):
            return False
        # A method the view does not serve answers 405 (or the view's own 404) as before;
        # OPTIONS describes the endpoint's shape, never data.
        return declared_rule(view) is not None or _unserved(request, view)

    def has_object_permission(self, request, view, obj) -> bool:
        rule = declared_rule(view)
        namespace = getattr(obj, "namespace", None)
        if rule is None or not isinstance(namespace, str):
            return False
        access_for(request).require([namespace], rule)
        return True

    def has_target_permission(self, request, view, check: Check) -> bool:
        """Run ``check`` with the declared rule (it raises 404/403); no rule: refused."""
        rule = declared_rule(view)
        if rule is None:
            return False
        check(access_for(request), rule)
        return True
