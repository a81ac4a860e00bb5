"""Erasure through the API: who may erase what, ``Idempotency-Key`` replay, receipts.

The erasure itself is ``memoryapp.compliance`` (hard delete, vendor purge,
verification, receipt); this module decides whether the client may ask for it
and makes a retried request return the receipt of the first one.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils.crypto import salted_hmac
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from memoryapp import compliance, conf
from memoryapp.api import permissions
from memoryapp.api.exceptions import Conflict, Unprocessable
from memoryapp.api.models import ErasureRequest
from memoryapp.api.patterns import HEADER_KEY_PATTERN, NON_BLANK_PATTERN, TEXT_PATTERN
from memoryapp.api.permissions import Access
from memoryapp.api.serializers.erasures import ErasurePreviewSerializer, ReceiptSerializer
from memoryapp.api.serializers.errors import ErrorSerializer
from memoryapp.api.serializers.fields import NAMESPACE_MAX
from memoryapp.compliance import desk_scope, erase, worker
from memoryapp.compliance import engine as erasure_engine
from memoryapp.compliance.leases import worker_name
from memoryapp.compliance.selection import ROW_MODELS
from memoryapp.fields import now
from memoryapp.models import (
    ErasureReceipt,
    ExportVia,
    ReceiptState,
    new_request_id,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    name=IDEMPOTENCY_HEADER,
    type={"type": "string", "pattern": HEADER_KEY_PATTERN},
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (1 to 255 printable characters). A retry with the same key and "
        "the same body returns the first request's receipt instead of erasing again."
    ),
)

# ``GET /api/exports/`` needs a subject, a namespace or both. Two optional query
# parameters cannot say "at least one of", so the schema declares them as one object
# serialized as ordinary query parameters (OpenAPI 3 ``style: form, explode: true``:
# ``{"subject": "u", "namespace": "n"}`` is sent as ``?subject=u&namespace=n``) whose
# schema says it: ``anyOf`` of the two alternatives, and no other parameter (the
# server refuses one, ExportQuerySerializer). On the wire nothing changes.
EXPORT_TARGET_PARAMETER = OpenApiParameter(
    name="target",
    type={
        "type": "object",
        "properties": {
            "subject": {
                "type": "string",
                "minLength": 1,
                "maxLength": NAMESPACE_MAX,
                "pattern": NON_BLANK_PATTERN,
                "description": "A user key: everything stored about it (in `namespace` only, "
                "if given).",
            },
            "namespace": {
                "type": "string",
                "maxLength": NAMESPACE_MAX,
                "pattern": TEXT_PATTERN,
                "description": "A namespace ('' is the single-tenant one), exactly as stored.",
            },
        },
        "anyOf": [{"required": ["subject"]}, {"required": ["namespace"]}],
        "additionalProperties": False,
    },
    location=OpenApiParameter.QUERY,
    required=True,
    style="form",
    explode=True,
    description=(
        "What to export, as the query parameters `subject`, `namespace`, or both (at least "
        "one): `?subject=KEY` (every namespace holding the subject's rows), "
        "`?namespace=NS`, or `?subject=KEY&namespace=NS` (the subject's rows there)."
    ),
)

RECEIPT_RESPONSES = {
    200: OpenApiResponse(ErasurePreviewSerializer, "`dry_run`: what would be erased."),
    201: OpenApiResponse(ReceiptSerializer, "The erasure ran (or was replayed); its receipt."),
    202: OpenApiResponse(
        ReceiptSerializer,
        "The rows are deleted; the erasure worker purges and verifies (follow Location).",
    ),
    409: OpenApiResponse(ErrorSerializer, "An erasure with this Idempotency-Key is running."),
    422: OpenApiResponse(ErrorSerializer, "The Idempotency-Key was used for another request."),
}


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
    return access.grant_rule(rule)


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


def export_body(data: dict, actor: str = "", user=None) -> dict:
    """The export checked by :func:`authorize_export`, limited to what the client may see
    (recorded as an API export by ``actor``, for the account ``user``)."""
    return compliance.export(
        subject=data["subject"],
        namespace=data["namespace"],
        grants=data.get("grants"),
        receipts=data.get("receipts"),
        actor=actor,
        via=ExportVia.API,
        user=user,
    )


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


def preview_body(data: dict) -> dict:
    """The dry run's answer: counts per table, and the subject's authored project memories."""
    target = {k: data[k] for k in ("subject", "namespace", "ids", "everything")}
    found = compliance.preview(
        **target,
        include_authored=data["include_authored"],
        rows=data.get("rows"),
        grants=data.get("grants"),
    )
    authored = None
    if data["subject"] is not None:
        authored = compliance.authored_count(
            data["subject"], namespace=data["namespace"], grants=data.get("grants")
        )
    return {
        "dry_run": True,
        "counts": found["counts"],
        "project_memories_authored": authored,
        "authored_erased": bool(data["include_authored"] and authored),
    }


# ------------------------------------------------------------ erase, replay
def _erase(data: dict, actor: str, receipt_id: str) -> ErasureReceipt:
    names = ("subject", "namespace", "ids", "rows", "grants")
    targets = {k: data[k] for k in names if data.get(k) is not None}
    if data.get("everything"):
        targets["everything"] = True
    if data.get("include_authored"):
        targets["include_authored"] = True
    return erase(**targets, actor=actor, purge=compliance.purge_now(), receipt_id=receipt_id)


def _fingerprint(request, data: dict) -> str:
    """A keyed HMAC of the request: a subject key is personal data, never stored in clear."""
    names = ("subject", "namespace", "ids", "everything", "include_authored")
    target = {k: data.get(k) for k in names}
    text = json.dumps({"path": request.path, "target": target}, sort_keys=True)
    return salted_hmac("memoryapp.api.erasure-request", text, algorithm="sha256").hexdigest()


def _idempotency_key(request) -> str | None:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not key or len(key) > IDEMPOTENCY_KEY_MAX or not key.isprintable():
        raise ValidationError({IDEMPOTENCY_HEADER: ["Must be 1 to 255 printable characters."]})
    return key


def _lease_end() -> dt.datetime:
    return now() + dt.timedelta(seconds=conf.erasure_worker_lease())


def _holder_alive(claim: ErasureRequest) -> bool:
    """Whether the process that claimed the request may still be running it: its lease
    holds and it is not a process of this host that has died (``kill -9``, a crash)."""
    if not claim.holder or claim.held_until is None or claim.held_until <= now():
        return False
    return not worker.holder_gone(claim.holder)


def _claim(request, key: str | None, fingerprint: str):
    """Claim the request: ``(claim, earlier receipt or None)``.

    The claim names the receipt id its erasure will record. A retry whose receipt
    was recorded gets that receipt (completing its deletion if the process that
    recorded it died first); one whose receipt was never recorded waits (409) while
    the first process lives, else takes the request over, under the same receipt id.
    """
    fresh = ErasureRequest(
        user=request.user,
        idempotency_key=key,
        fingerprint=fingerprint,
        receipt_id=new_request_id(),
        holder=worker_name(),
        held_until=_lease_end(),
    )
    try:
        with transaction.atomic():
            fresh.save(force_insert=True)
        return fresh, None
    except IntegrityError:
        if key is None:
            raise
    with transaction.atomic():
        claim = ErasureRequest.objects.select_for_update().get(
            user=request.user, idempotency_key=key
        )
        if claim.fingerprint != fingerprint:
            raise Unprocessable(
                "This Idempotency-Key was already used for a different erasure request."
            )
        earlier = None
        if claim.receipt_id:
            earlier = ErasureReceipt.objects.filter(pk=claim.receipt_id).first()
        alive = _holder_alive(claim)
        if earlier is None and alive:
            raise Conflict("An erasure with this Idempotency-Key is still running.")
        if earlier is not None and (alive or not _unfinished_here(earlier)):
            return claim, earlier
        # The process that held the request is gone: this retry carries it on.
        claim.holder, claim.held_until = worker_name(), _lease_end()
        claim.receipt_id = claim.receipt_id or new_request_id()
        claim.save(update_fields=["holder", "held_until", "receipt_id"])
    if earlier is None:
        return claim, None
    try:  # recorded, but its process died before finishing it: finish it now
        return claim, _complete(earlier)
    finally:
        _release(claim)


def _unfinished_here(receipt: ErasureReceipt) -> bool:
    """Whether the request itself had more to do on ``receipt``: delete (``requested``),
    or purge and verify when requests purge (no erasure worker)."""
    if receipt.state == ReceiptState.REQUESTED:
        return True
    return receipt.state == ReceiptState.DELETED and compliance.purge_now()


def _complete(receipt: ErasureReceipt) -> ErasureReceipt:
    """Finish what a dead process left of ``receipt``: the deletion, then (without an
    erasure worker) the purge — unless someone else has leased it meanwhile (the
    worker, ``memory erase --retry``), who finishes it then."""
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lte=now())
    if receipt.claimed_by and worker.holder_gone(receipt.claimed_by):
        free |= Q(claimed_by=receipt.claimed_by)
    me = worker_name()
    leased = ErasureReceipt.objects.filter(free, pk=receipt.pk, state=receipt.state)
    if not leased.update(claimed_by=me, claimed_until=_lease_end()):
        return ErasureReceipt.objects.get(pk=receipt.pk)
    receipt.refresh_from_db()
    try:
        if compliance.purge_now():
            erasure_engine.retry(receipt, held_by=me)  # the lease taken above
        else:
            erasure_engine.resume(receipt, purge=False)
    finally:
        # Deleted and left to the worker, or failed: the lease must not hold it back.
        ErasureReceipt.objects.filter(pk=receipt.pk, claimed_by=me).update(
            claimed_by="", claimed_until=None
        )
    return ErasureReceipt.objects.get(pk=receipt.pk)


def _release(claim: ErasureRequest) -> None:
    """This process no longer runs the request (done, or failed after its receipt)."""
    ErasureRequest.objects.filter(pk=claim.pk, holder=claim.holder).update(
        holder="", held_until=None
    )


def run_once(request, data: dict, actor: str, check: Callable[[], object]):
    """Erase, or replay: ``(receipt, replayed)``.

    The request is claimed first, naming the id its receipt will be recorded
    under, so the client may read that receipt whatever happens next. With an
    ``Idempotency-Key``, a retry with the same key and body gets the first
    receipt — even though its target is gone by now, and even after the first
    request's process died (its deletion is completed then) —, one with another
    body a 422, and one while the first still runs and has recorded nothing a 409.
    A refused request, or one that failed before recording its receipt, releases
    the key; a crashed one is taken over by the next retry once its process is gone.
    """
    key = _idempotency_key(request)
    claim, earlier = _claim(request, key, _fingerprint(request, data))
    if earlier is not None:
        return earlier, True
    try:
        check()
        receipt = _erase(data, actor, claim.receipt_id)
    except erasure_engine.ReceiptTaken:
        # Another process recorded this receipt first (it held the request, and was
        # only slow): this retry replays it.
        return ErasureReceipt.objects.get(pk=claim.receipt_id), True
    except BaseException:
        if ErasureReceipt.objects.filter(pk=claim.receipt_id).exists():
            _release(claim)  # recorded: a retry returns it and completes the deletion
        else:
            claim.delete()
        raise
    _release(claim)
    return receipt, False


def record_receipts(request, receipts) -> None:
    """Let the client read receipts an erasure made on its behalf outside :func:`run_once`
    (a review-queue purge): an :class:`ErasureRequest` of its own for each, with no
    ``Idempotency-Key`` (such a request is not replayed), so :func:`authorize_receipt`
    and :func:`visible_receipts` find them."""
    ErasureRequest.objects.bulk_create(
        ErasureRequest(
            user=request.user,
            fingerprint=_fingerprint(request, {"receipt": r.pk}),
            receipt_id=r.pk,
        )
        for r in receipts
    )


def receipt_body(receipt) -> dict:
    """The JSON form of a receipt."""
    return ReceiptSerializer(receipt).data


def respond(request, data: dict, actor: str, check: Callable[[], object]) -> Response:
    """Run ``check``, then the erasure (or replay it), and answer with its receipt.

    ``201 Created`` when the receipt is finished here; ``202 Accepted`` when the
    rows are deleted and the erasure worker completes the purge and verification
    (``MEMORYAPP_ERASURE_WORKER``): the client follows ``Location`` to see it.
    """
    receipt, replayed = run_once(request, data, actor, check)
    accepted = not compliance.purge_now() and receipt.state != ReceiptState.COMPLETE
    response = Response(
        receipt_body(receipt),
        status=status.HTTP_202_ACCEPTED if accepted else status.HTTP_201_CREATED,
        headers={"Location": reverse("memoryapp_api:erasure-detail", args=[receipt.pk])},
    )
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def get_receipt(pk: str) -> ErasureReceipt:
    """The receipt ``pk`` (checked by :func:`authorize_receipt` first), or 404."""
    try:
        return ErasureReceipt.objects.get(pk=pk)
    except (ErasureReceipt.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound() from None
