"""``Idempotency-Key`` on the erasure endpoints: an erasure runs once, a retry replays it.

Every erasure through the API (``POST /api/erasures/``, ``POST /api/memories/{id}/erase/``)
is claimed first as an :class:`~memoryapp.api.models.ErasureRequest` naming the id its
receipt will be recorded under; a retry with the same key and body returns that receipt
instead of erasing again. The erasure itself is ``memoryapp.compliance``; who may ask for
it is :mod:`memoryapp.api.scoping`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils.crypto import salted_hmac
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from memoryapp import compliance, conf
from memoryapp.api.exceptions import Conflict, Unprocessable
from memoryapp.api.models import ErasureRequest
from memoryapp.api.patterns import HEADER_KEY_PATTERN
from memoryapp.api.serializers.erasures import ErasurePreviewSerializer, ReceiptSerializer
from memoryapp.api.serializers.errors import ErrorSerializer
from memoryapp.compliance import engine as erasure_engine
from memoryapp.compliance import erase, worker
from memoryapp.compliance.leases import worker_name
from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, ReceiptState, new_request_id

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
    ``Idempotency-Key`` (such a request is not replayed), so
    :func:`~memoryapp.api.scoping.authorize_receipt` and
    :func:`~memoryapp.api.scoping.visible_receipts` find them."""
    ErasureRequest.objects.bulk_create(
        ErasureRequest(
            user=request.user,
            fingerprint=_fingerprint(request, {"receipt": r.pk}),
            receipt_id=r.pk,
        )
        for r in receipts
    )


def respond(request, data: dict, actor: str, check: Callable[[], object]) -> Response:
    """Run ``check``, then the erasure (or replay it), and answer with its receipt.

    ``201 Created`` when the receipt is finished here; ``202 Accepted`` when the
    rows are deleted and the erasure worker completes the purge and verification
    (``MEMORYAPP_ERASURE_WORKER``): the client follows ``Location`` to see it.
    """
    receipt, replayed = run_once(request, data, actor, check)
    accepted = not compliance.purge_now() and receipt.state != ReceiptState.COMPLETE
    response = Response(
        ReceiptSerializer(receipt).data,
        status=status.HTTP_202_ACCEPTED if accepted else status.HTTP_201_CREATED,
        headers={"Location": reverse("memoryapp_api:erasure-detail", args=[receipt.pk])},
    )
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response
