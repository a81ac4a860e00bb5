"""The review queue: ``/api/crystallize/`` and ``/api/review-items/``."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

from django.db import IntegrityError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp.api import idempotency, permissions
from memoryapp.api.exceptions import Conflict
from memoryapp.api.filters import ReviewItemFilter
from memoryapp.api.permissions import access_for, declared_rule, holding_rule, in_namespaces
from memoryapp.api.serializers.errors import ErrorSerializer
from memoryapp.api.serializers.review import (
    ApproveOutputSerializer,
    CrystallizeInputSerializer,
    CrystallizeOutputSerializer,
    PurgeInputSerializer,
    PurgeOutputSerializer,
    ReviewEditInput,
    ReviewItemSerializer,
    ReviewStatusInput,
)
from memoryapp.api.serializers.store import ReviewRecordInput
from memoryapp.api.throttles import ERASE, LIST, WRITE
from memoryapp.api.views.base import (
    IN_NAMESPACE,
    MemoryAPIMixin,
    NamespacedViewSet,
    actor_of,
    bound_manager,
    no_body,
    validated,
)
from memoryapp.compliance import purge_now
from memoryapp.interop.errors import StoreIntegrityError
from memoryapp.interop.store import RowStore
from memoryapp.models import ReviewItem, ReviewStatus, Scope
from memoryapp.services import review, review_edit


def _writes_to(user_ns: str | None, access, rule: permissions.Rule) -> None:
    """Approving a user-scope item writes to its subject's namespace: 403 without the right
    there (the item itself is visible, so a hidden subject namespace is not a 404)."""
    if user_ns is not None and not access.allows(user_ns, rule):
        raise PermissionDenied(
            "Approving this item writes to a user namespace outside your grants."
        )


def _reread(item: ReviewItem, *, decided: str | None) -> ReviewItem:
    """``item`` as stored now, after a decision on it (``decided``: the status it was
    given, None when it was not pending).

    An erasure may have removed it meanwhile: undecided, that is a 404 (it no longer
    exists); decided, the decision stands (its memory was written, or erased with it
    by an erasure that ran after it) and the answer shows the item as decided.
    """
    current = ReviewItem.objects.filter(pk=item.pk, namespace=item.namespace).first()
    if current is not None:
        return current
    if decided is None:
        raise NotFound("This review item no longer exists (it was erased).")
    item.status = decided
    return item


@extend_schema(tags=["review queue"])
class CrystallizeView(MemoryAPIMixin, APIView):
    """``POST /api/crystallize/``: queue the crystallizer's proposals (never memories)."""

    rule = permissions.CRYSTALLIZE
    throttle_scope = WRITE

    @extend_schema(
        summary="Run the crystallizer over user messages",
        request=CrystallizeInputSerializer,
        responses={200: CrystallizeOutputSerializer},
    )
    def post(self, request):
        data, mm = bound_manager(self, CrystallizeInputSerializer)
        items = mm.crystallize_user_messages(data["messages"])
        return Response(CrystallizeOutputSerializer({"items": items}).data)


@extend_schema(tags=["review queue"])
class ReviewItemViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, NamespacedViewSet):
    """The review queue: list, read, approve, reject, purge."""

    serializer_class = ReviewItemSerializer
    filterset_class = ReviewItemFilter
    query_parameters = {"retrieve": [IN_NAMESPACE], "set_status": [IN_NAMESPACE]}
    rules = {
        "list": permissions.REVIEW_READ,
        "retrieve": permissions.REVIEW_READ,
        "approve": permissions.REVIEW_APPROVE,
        "reject": permissions.REVIEW_REJECT,
        "purge": permissions.REVIEW_PURGE,
        "records": permissions.CRYSTALLIZE,
        "set_status": permissions.REVIEW_REJECT,
        "partial_update": permissions.REVIEW_REJECT,  # a correction is a change of the item
    }
    throttle_scopes = {
        "list": LIST,
        "partial_update": WRITE,
        "approve": WRITE,
        "reject": WRITE,
        "purge": ERASE,
        "records": WRITE,
        "set_status": WRITE,
    }

    def base_queryset(self):
        return ReviewItem.objects.with_other_proposers().order_by(
            "-occurrences", "-updated_at", "-created_at", "id"
        )

    @extend_schema(summary="List review items (every status unless `status` is given)")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(summary="Read a review item")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Correct a pending item's title, content, type or scope before approval",
        request=ReviewEditInput,
        responses={
            200: ReviewItemSerializer,
            409: OpenApiResponse(ErrorSerializer, "The item is not pending."),
        },
    )
    def partial_update(self, request, *args, **kwargs):
        item = self.get_object()
        data = validated(ReviewEditInput, request.data)
        try:
            edited = review_edit.edit(
                item_id=item.id, namespace=item.namespace, changes=data, actor=actor_of(request)
            )
        except review_edit.ReviewEditConflict as exc:
            raise Conflict(str(exc)) from exc
        if edited is None:
            item = _reread(item, decided=None)  # erased meanwhile: 404
            raise Conflict(f"Only a pending review item can be edited; this one is {item.status}.")
        return Response(ReviewItemSerializer(edited).data)

    @extend_schema(
        summary="Approve a pending item: it becomes a memory (source `crystallized`)",
        request=None,
        responses={
            200: ApproveOutputSerializer,
            409: OpenApiResponse(ErrorSerializer, "The item is not pending."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, *args, **kwargs):
        item = self.get_object()  # an unknown id is a 404 before the body is looked at
        no_body(request)
        # A user-scope item becomes a memory in its subject's (user) namespace.
        user_ns = item.subject if item.scope == Scope.USER else None
        self.check_target_permissions(request, partial(_writes_to, user_ns))
        memory = review.approve(item_id=item.id, namespace=item.namespace, actor=actor_of(request))
        item = _reread(item, decided=ReviewStatus.APPROVED if memory is not None else None)
        if memory is None:
            raise Conflict(
                f"Only a pending review item can be approved; this one is {item.status}."
            )
        body = {"review_item": item, "memory": memory}
        return Response(ApproveOutputSerializer(body).data)

    @extend_schema(
        summary="Reject a pending item",
        request=None,
        responses={
            200: ReviewItemSerializer,
            409: OpenApiResponse(ErrorSerializer, "The item is not pending."),
        },
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, *args, **kwargs):
        item = self.get_object()  # an unknown id is a 404 before the body is looked at
        no_body(request)
        rejected = review.reject(item_id=item.id, namespace=item.namespace, actor=actor_of(request))
        item = _reread(item, decided=ReviewStatus.REJECTED if rejected else None)
        if not rejected:
            raise Conflict(
                f"Only a pending review item can be rejected; this one is {item.status}."
            )
        return Response(ReviewItemSerializer(item).data)

    @extend_schema(
        summary="Erase review items for good (by namespace, status, subject); one receipt each",
        request=PurgeInputSerializer,
        responses={200: PurgeOutputSerializer},
    )
    @action(detail=False, methods=["post"])
    def purge(self, request, *args, **kwargs):
        data = validated(PurgeInputSerializer, request.data)
        namespace, wanted, subject = data["namespace"], data["status"], data["subject"]
        if namespace is not None:
            self.check_target_permissions(request, in_namespaces(namespace))
            namespaces = [namespace]
        else:  # every namespace the client may purge in: 403 when there is none
            self.check_target_permissions(request, holding_rule)
            if access_for(request).is_global(declared_rule(self)):
                namespaces = [None]  # every namespace, one receipt
            else:
                namespaces = review.namespaces_holding(
                    self.get_queryset(),
                    status=wanted,
                    subject=subject,  # scoped to the rule
                )
        # An erasure per namespace: hard delete, vendor purge, receipt (docs/behaviour.md §6, §9).
        # Each receipt is the client's to read as soon as it exists: recorded one namespace
        # at a time, so a failure in a later namespace leaves the earlier ones readable.
        receipts = []
        for ns in namespaces:
            done = review.purge(
                namespaces=[ns],
                status=wanted,
                subject=subject,
                actor=actor_of(request),
                purge=purge_now(),
            )
            idempotency.record_receipts(request, done)
            receipts.extend(done)
        return Response(
            {"purged": review.purged_count(receipts), "receipts": [r.id for r in receipts]}
        )

    @extend_schema(
        summary="Save a review item as Agentao's store does: insert, or fold into the pending one",
        request=ReviewRecordInput,
        responses={200: ReviewItemSerializer},
    )
    @action(detail=False, methods=["post"])
    def records(self, request, *args, **kwargs):
        data, store = self.store_call(ReviewRecordInput)
        item = store.upsert_review_item(SimpleNamespace(**data))
        return Response(ReviewItemSerializer(item).data)

    @extend_schema(
        summary="Set a review item's status (any transition; Agentao's update_review_status)",
        request=ReviewStatusInput,
        responses={
            200: ReviewItemSerializer,
            409: OpenApiResponse(
                ErrorSerializer, "Another item of the same scope and key is pending (named)."
            ),
        },
    )
    @action(detail=True, methods=["post"], url_path="status")
    def set_status(self, request, *args, **kwargs):
        item = self.get_object()
        data = validated(ReviewStatusInput, request.data)
        if data["status"] == ReviewStatus.PENDING and item.status != ReviewStatus.PENDING:
            holder = review.pending_holder(item_id=item.id, namespace=item.namespace)
            if holder is not None:  # refused before the write: no unique violation logged
                raise Conflict(
                    f"Review item {holder} is pending with the same scope and key: "
                    "approve or reject it first."
                )
        store = RowStore(item.namespace, actor=actor_of(request))
        try:
            changed = store.update_review_status(item.id, data["status"])
        except (IntegrityError, StoreIntegrityError) as exc:  # a sibling pending since
            raise Conflict(
                "Another review item is pending with the same scope and key: "
                "approve or reject it first."
            ) from exc
        if not changed:
            raise NotFound("This review item no longer exists (it was erased).")
        item = _reread(item, decided=data["status"])
        return Response(ReviewItemSerializer(item).data)
