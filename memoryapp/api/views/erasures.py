"""Erasure and the soft wipe: ``/api/erasures/``, ``/api/wipe-all/``."""

from __future__ import annotations

from functools import partial

from django.core.exceptions import ValidationError as DjangoValidationError
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp import compliance
from memoryapp.api import idempotency, permissions, scoping
from memoryapp.api.filters import ReceiptFilter
from memoryapp.api.serializers.erasures import (
    ErasureInputSerializer,
    ReceiptSerializer,
    WipeOutputSerializer,
)
from memoryapp.api.serializers.fields import BoundInput
from memoryapp.api.serializers.lookup import (
    ExportRecordSerializer,
    LookupInputSerializer,
    LookupOutputSerializer,
    RequestFoundSerializer,
)
from memoryapp.api.throttles import ERASE
from memoryapp.api.views.base import MemoryAPIMixin, Pagination, actor_of, bound_manager, validated
from memoryapp.compliance.lookup import lookup
from memoryapp.models import ErasureReceipt


@extend_schema(tags=["erasure"])
class WipeAllView(MemoryAPIMixin, APIView):
    """``POST /api/wipe-all/``: the seed's soft reset (not erasure)."""

    rule = permissions.WIPE
    throttle_scope = ERASE

    @extend_schema(
        summary="Soft-delete the memories and delete the session summaries (not erasure)",
        request=BoundInput,
        responses={200: WipeOutputSerializer},
    )
    def post(self, request):
        data, mm = bound_manager(self, BoundInput)
        # A tenant-scoped officer wipes their tenants' namespaces only (else 404).
        scoping.within_desk(
            permissions.access_for(request), self.rule, data["namespace"], data["subject"]
        )
        result = mm.wipe_all(actor=actor_of(request))
        return Response(WipeOutputSerializer(result.as_dict()).data)


# ---------------------------------------------------------------- erasure
@extend_schema(tags=["erasure"])
class ErasureViewSet(MemoryAPIMixin, viewsets.GenericViewSet):
    """Erasure for good (hard delete + vacuum + verification) and its receipts."""

    serializer_class = ReceiptSerializer
    # The body names what to erase: scoping.authorize checks it under the declared
    # rule (check_target_permissions); receipts are visible to their requester or to staff.
    rules = {
        "create": permissions.MEMORY_ERASE,
        "retrieve": permissions.RECEIPT_READ,
        "list": permissions.RECEIPT_READ,
        "lookup": permissions.RECEIPT_READ,
    }
    throttle_scopes = {"create": ERASE, "lookup": ERASE}
    lookup_value_regex = r"[^/]+"
    pagination_class = Pagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = ReceiptFilter

    def get_queryset(self):
        return ErasureReceipt.objects.none()  # list() scopes to the client (visible_receipts)

    @extend_schema(
        summary="List erasure receipts (paginated, newest first): staff all, a client its own"
    )
    def list(self, request, *args, **kwargs):
        found: dict = {}

        def scope(access, rule):
            found["rows"] = scoping.visible_receipts(access, rule)

        self.check_target_permissions(request, scope)
        page = self.paginate_queryset(self.filter_queryset(found["rows"]))
        return self.get_paginated_response(ReceiptSerializer(page, many=True).data)

    @extend_schema(
        summary="Find the receipts and export records of a subject key (in the body, never a URL)",
        request=LookupInputSerializer,
        responses={200: LookupOutputSerializer},
    )
    @action(detail=False, methods=["post"])
    def lookup(self, request, *args, **kwargs):
        data = validated(LookupInputSerializer, request.data)
        found: dict = {}

        def check(access, rule):
            found["body"] = lookup_body(data, access, rule)

        self.check_target_permissions(request, check)
        response = Response(found["body"])
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        summary="Erase a subject, a namespace, ids or everything; returns the receipt",
        request=ErasureInputSerializer,
        parameters=[idempotency.IDEMPOTENCY_PARAMETER],
        responses=idempotency.RECEIPT_RESPONSES,
    )
    def create(self, request, *args, **kwargs):
        data = validated(ErasureInputSerializer, request.data)
        dry_run = data.pop("dry_run")

        def check():
            self.check_target_permissions(request, partial(scoping.authorize, data))

        if dry_run:
            check()
            return Response(preview_body(data))
        return idempotency.respond(request, data, actor_of(request), check=check)

    @extend_schema(summary="Read an erasure receipt", responses={200: ReceiptSerializer})
    def retrieve(self, request, *args, **kwargs):
        pk = self.kwargs.get("pk", "")
        self.check_target_permissions(request, partial(scoping.authorize_receipt, pk))
        return Response(ReceiptSerializer(get_receipt(pk)).data)


# ------------------------------------------------------------ answers
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


def get_receipt(pk: str) -> ErasureReceipt:
    """The receipt ``pk`` (checked by :func:`~memoryapp.api.scoping.authorize_receipt`
    first), or 404."""
    try:
        return ErasureReceipt.objects.get(pk=pk)
    except (ErasureReceipt.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound() from None


def lookup_body(data: dict, access: permissions.Access, rule: permissions.Rule) -> dict:
    """The receipts, export records and requests naming ``data["subject"]`` that the
    client may read."""
    found = lookup(
        data["subject"],
        receipts=scoping.visible_receipts(access, rule),
        exports=scoping.visible_exports(access),
        requests=scoping.visible_requests(access),
    )
    return {
        "receipts": ReceiptSerializer(found.receipts, many=True).data,
        "exports": ExportRecordSerializer(found.exports, many=True).data,
        "requests": RequestFoundSerializer(found.requests, many=True).data,
    }
