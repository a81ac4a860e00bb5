"""What a client's erasure, export and lookup reach: who may erase, export or read what.

The erasure and the export themselves are ``memoryapp.compliance``; this module checks
their targets under the view's declared :class:`~memoryapp.api.permissions.Rule` (404
hidden, 403 not allowed) and narrows the receipts, export records and data-subject
requests a client may read. Staff holding the rule act everywhere (a tenant-scoped
officer: in the tenants their desk grants cover); anyone else through their grants, or
on the erasures they asked for. Data-subject requests carry no namespace: only staff
holding the request view permission see them.
"""

from __future__ import annotations

from rest_framework.exceptions import NotFound, PermissionDenied

from memoryapp.api import permissions
from memoryapp.api.models import ErasureRequest
from memoryapp.api.permissions import REQUEST_READ, Access
from memoryapp.compliance import desk_scope
from memoryapp.compliance.holdings import desk_reach
from memoryapp.compliance.selection import ROW_MODELS
from memoryapp.models import ErasureReceipt, ExportRecord, ExportVia, SubjectRequest


# ---------------------------------------------------------------- who may
def subject_scope(
    access: Access, subject: str, rule: permissions.Rule
) -> tuple[tuple[str, bool], ...] | None:
    """The grants a client's subject-wide erasure or export acts under; None = all (staff).

    404 unless the subject's own key is visible, 403 unless ``rule`` is allowed on
    it. Then: the client's grants giving ``rule``'s right, as ``(namespace,
    is_prefix)`` pairs (:meth:`Access.grant_rule`). The erasure (export) selects
    the subject's rows — pseudonymised authored rows included — in the namespaces
    these cover *when it selects them*, under the erasure locks: a row written
    after this check in a namespace the client may erase in, one that held nothing
    before, goes too, and a row anywhere else is never touched. The answer is the
    same whether or not another tenant holds data about the key: the operator's
    path covers the rest.
    """
    access.require([subject], rule)
    granted = access.grant_rule(rule)
    # Staff acting everywhere: a tenant-scoped officer still reaches their tenants only.
    return desk_reach(access.user, subject) if granted is None else granted


def rows_of_ids(
    access: Access, ids, rule: permissions.Rule, namespace: str | None = None
) -> dict[str, list[tuple[str, str]]]:
    """``table -> [(namespace, id)]``: the rows holding these ids that the client can see.

    Each id is resolved to (table, namespace, id) here, once, within the client's
    visible namespaces (and ``namespace``, if given); the erasure then deletes
    exactly these rows, never another tenant's row that shares an id.
    """
    found: dict[str, list[tuple[str, str]]] = {}
    for table, model in ROW_MODELS.items():
        rows = access.scope_visible(model.objects.filter(pk__in=list(ids)).order_by(), rule)
        if namespace is not None:
            rows = rows.filter(namespace=namespace)
        pairs = [(ns, pk) for pk, ns in rows.values_list("id", "namespace")]
        if pairs:
            found[table] = pairs
    return found


def within_desk(access: Access, rule: permissions.Rule, *keys: str | None) -> None:
    """404 when staff acting under ``rule`` everywhere hold desk tenant grants that do
    not cover every key or namespace given: a tenant-scoped officer's API reaches their
    tenants only, and another tenant's target is hidden as an unknown one is. API
    clients are narrowed by their namespace grants instead (``Access.require``)."""
    if access.is_global(rule) and not desk_scope.may_handle_keys(access.user, *keys):
        raise NotFound("Not found.")


# The checks below get the view's declared rule: the view passes them to
# ``check_target_permissions`` once the body is valid (see DeclaredRule).
def authorize(data: dict, access: Access, rule: permissions.Rule) -> None:
    """Check every target of an erasure request (404 hidden, 403 not allowed).

    ``namespace`` with ``subject`` or ``ids`` restricts the erasure to that
    namespace, so only the namespace needs the right then. Ids are resolved to
    the visible rows holding them (``data["rows"]``, each of whose namespaces
    needs the right); a subject alone is erased in the namespaces the client's
    grants let it erase in (``data["grants"]``, see :func:`subject_scope`).
    """
    if data["everything"]:
        if not access.is_global(rule) or desk_scope.grants_of(access.user) is not None:
            raise PermissionDenied(
                f"Erasing everything needs the {' and '.join(rule.perms)} permission "
                "and a desk without tenant grants."
            )
        return
    within_desk(access, rule, data["subject"], data["namespace"])
    if data["namespace"] is not None:
        access.require([data["namespace"]], rule)
    if data["ids"]:
        rows = rows_of_ids(access, data["ids"], rule, data["namespace"])
        if {pk for pairs in rows.values() for _, pk in pairs} != set(data["ids"]):
            raise NotFound("Unknown id(s).")  # unknown or another tenant's: alike
        within_desk(access, rule, *(ns for pairs in rows.values() for ns, _ in pairs))
        access.require(sorted({ns for pairs in rows.values() for ns, _ in pairs}), rule)
        data["rows"] = rows
    if data["subject"] is not None and data["namespace"] is None:
        data["grants"] = subject_scope(access, data["subject"], rule)


def authorize_export(data: dict, access: Access, rule: permissions.Rule) -> None:
    """Check the target of an export: a namespace (alone, or restricting the subject to
    it), else a subject, exported from the namespaces the client may export from
    (``data["grants"]``); the receipts listed are the client's own (``data["receipts"]``)."""
    within_desk(access, rule, data["subject"], data["namespace"])
    if data["namespace"] is not None:
        access.require([data["namespace"]], rule)
    else:
        data["grants"] = subject_scope(access, data["subject"], rule)
    if not access.is_global(rule):
        data["receipts"] = ErasureRequest.objects.filter(user=access.user).values("receipt_id")


def authorize_receipt(pk: str, access: Access, rule: permissions.Rule) -> None:
    """404 unless the client may read receipt ``pk``: staff holding ``rule`` read all,
    anyone else the receipts of the erasures they asked for."""
    if not pk or len(pk) > 64 or "\x00" in pk:
        raise NotFound()
    if access.is_global(rule):
        receipt = ErasureReceipt.objects.filter(pk=pk).only("tenant").first()
        if receipt is not None and not desk_scope.may_handle_record(access.user, receipt):
            raise NotFound()  # another tenant's receipt, to a tenant-scoped officer
        return
    if not ErasureRequest.objects.filter(user=access.user, receipt_id=pk).exists():
        raise NotFound()


# ---------------------------------------------------------------- who reads
def visible_receipts(access: Access, rule: permissions.Rule):
    """The receipts a client may read: all for staff holding ``rule``, else those of the
    erasures it asked for (as :func:`authorize_receipt` decides for one receipt)."""
    receipts = ErasureReceipt.objects.order_by("-created_at", "id")
    if access.is_global(rule):
        return desk_scope.visible_records(access.user, receipts)
    mine = ErasureRequest.objects.filter(user=access.user).exclude(receipt_id="")
    return receipts.filter(pk__in=mine.values("receipt_id"))


def visible_exports(access: Access):
    """The export records a client may read: all for staff who may export everywhere,
    else its own API exports — by account, never by name: a deleted client's records
    lose their account and go to no later client reusing its name."""
    records = ExportRecord.objects.order_by("-created_at", "id")
    if access.is_global(permissions.EXPORT):
        return desk_scope.visible_records(access.user, records)
    if access.user is None or access.user.pk is None:
        return records.none()
    return records.filter(user=access.user, via=ExportVia.API)


def visible_requests(access: Access):
    """The data-subject requests a client may read: for staff holding the request view
    permission, those of the tenants their desk grants cover (no grant: all); none for
    anyone else (API clients' namespace grants do not reach the desk)."""
    if access.is_global(REQUEST_READ):
        return desk_scope.visible_requests(access.user)
    return SubjectRequest.objects.none()
