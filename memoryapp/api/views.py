"""The API views (docs/behaviour.md §13): thin translations between HTTP and the facade.

Every view authenticates (token or session) and declares the
:class:`~memoryapp.api.permissions.Rule` of each thing it does; its permission
class, :class:`~memoryapp.api.permissions.DeclaredRule`, refuses what declares
no rule, checks rows as objects and, through :meth:`MemoryAPIMixin.check_target_permissions`,
the namespaces a request names (404 for one outside the client's grants, 403 for
a missing right). Then the view calls the facade (or, for id lookups and lists,
the model querysets) and serialises the result.
"""

from __future__ import annotations

import re
from functools import partial
from types import SimpleNamespace

from django.http import JsonResponse
from django.urls import Resolver404, resolve, reverse
from django.utils.cache import add_never_cache_headers
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp.api import erasures, permissions, query_params, serializers
from memoryapp.api import receipts as receipt_lists
from memoryapp.api.authentication import TokenAuthentication
from memoryapp.api.exceptions import Conflict, exception_handler
from memoryapp.api.filters import (
    MemoryEventFilter,
    MemoryFilter,
    ReviewItemFilter,
    SessionSummaryFilter,
)
from memoryapp.api.parsers import JSONParser
from memoryapp.api.patterns import TEXT_PATTERN
from memoryapp.api.permissions import (
    DeclaredRule,
    access_for,
    declared_rule,
    holding_rule,
    in_namespaces,
)
from memoryapp.api.schema import MemoryAutoSchema
from memoryapp.api.throttles import ERASE, LIST, RECALL, WRITE, MemoryScopedThrottle
from memoryapp.compliance import purge_now
from memoryapp.facade import MemoryManager
from memoryapp.interop.store import RowStore
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ReviewItem,
    ReviewStatus,
    Scope,
    SessionSummary,
)
from memoryapp.services import review, review_edit

MAX_LOOKUP_CHARS = 64
_POSITIVE_INT = re.compile(r"[1-9][0-9]{0,8}")


def actor_of(request) -> str:
    """The actor recorded in events and receipts for this request."""
    return f"api:{request.user.get_username()}"


def validated(serializer_class, data) -> dict:
    """Validate ``data`` with ``serializer_class``; a 400 with field-level errors if invalid."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def bound_manager(view, serializer_class, data=None) -> tuple[dict, MemoryManager]:
    """Validate the input, check the view's declared rule on its namespaces, bind a facade.

    ``data`` defaults to the request body. The input names ``project`` and ``user``
    (and may name ``session_id``); a namespace the caller may not use is a 404.
    """
    request = view.request
    data = validated(serializer_class, request.data if data is None else data)
    view.check_target_permissions(request, in_namespaces(data["project"], data["user"]))
    mm = MemoryManager(
        project=data["project"], user=data["user"], session_id=data.get("session_id")
    )
    return data, mm


def manager_for(row) -> MemoryManager:
    """A facade bound to the namespace and scope that own ``row`` (a memory)."""
    return MemoryManager(
        project=row.namespace, user=row.namespace if row.scope == Scope.USER else None
    )


def row_store(request, data: dict) -> RowStore:
    """Agentao's store semantics on the namespace (and provenance) a store call names."""
    # Tenants share the tables: a client's own id would tell it whether the id exists
    # elsewhere (a taken one cannot be kept), so the server chooses every new row's id.
    return RowStore(
        data["namespace"], subject=data.get("subject"), actor=actor_of(request), keep_ids=False
    )


# A detail route narrowed to one namespace (an ``HttpMemoryStore`` is bound to one):
# a row of another namespace answers 404, as an unknown id does.
IN_NAMESPACE = OpenApiParameter(
    "namespace",
    {"type": "string", "maxLength": 255, "pattern": TEXT_PATTERN},
    OpenApiParameter.QUERY,
    required=False,
    description="Only a row of this namespace (else 404).",
)


class Pagination(PageNumberPagination):
    """``?page=`` (404 past the end) and ``?page_size=`` (1 to 500) on every list.

    Stricter than DRF's, which ignores a malformed ``page_size`` and accepts
    ``page=last``: a parameter that is not a positive integer is refused.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    last_page_strings = ()

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not _POSITIVE_INT.fullmatch(raw) or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: [f"An integer from 1 to {self.max_page_size}."]}
            )
        return int(raw)

    def get_page_number(self, request, paginator) -> str:
        raw = request.query_params.get(self.page_query_param, "1")
        if not _POSITIVE_INT.fullmatch(raw):
            raise NotFound(self.invalid_page_message)
        return raw

    def get_schema_operation_parameters(self, view) -> list[dict]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            param["schema"]["minimum"] = 1
            if param["name"] == self.page_size_query_param:
                param["schema"]["maximum"] = self.max_page_size
        return params


class MemoryAPIMixin(APIView):
    """What every API view shares: auth, JSON only, throttling, the error mapping, the schema.

    An ``APIView`` itself (each view also derives from ``APIView`` or a viewset, which
    leaves the method resolution order as it was), so its methods are typed as a view's.
    """

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    # Fail closed: every view declares the Rule of each thing it does (``rule`` or
    # ``rules``); one that does not refuses every request.
    permission_classes = [DeclaredRule]
    throttle_classes = [MemoryScopedThrottle]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    schema = MemoryAutoSchema()
    # The query parameters each action (a viewset's) or method (an APIView's) takes
    # besides a list's filters and pages: OpenApiParameter objects or query
    # serializers. The schema documents them and any other is refused (query_params.py).
    query_parameters: dict[str, list] = {}

    def get_exception_handler(self):
        return exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authenticated, permitted, not throttled
        # A query parameter the operation does not take is refused, never ignored: a
        # misspelt filter must not widen the answer (query_params.py). A method the
        # view does not serve is no operation: its 405 (or 404) comes from dispatch.
        method = request.method.lower()
        if method in self.http_method_names and hasattr(self, method):
            query_params.refuse_unknown(self, request)

    def check_target_permissions(self, request, check) -> None:
        """Authorize what the request names (body or query), as ``get_object`` does a row.

        ``check(access, rule)`` raises 404/403; every permission class with a
        ``has_target_permission`` runs it with the view's declared rule. The one
        way a view authorizes its input: none of them, or no rule, refuses.
        """
        checkers = [p for p in self.get_permissions() if hasattr(p, "has_target_permission")]
        if not checkers:
            self.permission_denied(request)
        for permission in checkers:
            if not permission.has_target_permission(request, self, check):
                self.permission_denied(
                    request,
                    message=getattr(permission, "message", None),
                    code=getattr(permission, "code", None),
                )


class NamespacedViewSet(MemoryAPIMixin, viewsets.GenericViewSet):
    """A viewset over one table with a ``namespace`` column.

    ``rules`` maps each action to the :class:`~memoryapp.api.permissions.Rule` it
    needs. Lists show the rows the client may read (and ``?namespace=`` must be
    one the client may name); detail routes look rows up among the namespaces
    visible to the client, then require the action's rule.
    """

    rules: dict[str, permissions.Rule] = {}
    pagination_class = Pagination
    filter_backends = [DjangoFilterBackend]
    lookup_value_regex = r"[^/]+"

    def base_queryset(self):
        raise NotImplementedError

    def get_queryset(self):
        queryset = self.base_queryset()
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return queryset
        access, rule = access_for(self.request), declared_rule(self)
        if rule is None:  # DeclaredRule has refused the request already; never list anything
            return queryset.none()
        if self.detail:
            return access.scope_visible(queryset, rule)
        return access.scope(queryset, rule)

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)  # an invalid filter is a 400 first
        # The filter set narrows to ``?namespace=``; whether the client may name it
        # (404 hidden, 403 without the right) is the declared rule's business.
        if "namespace" in self.request.query_params:
            namespace = self.request.query_params["namespace"]
            self.check_target_permissions(self.request, in_namespaces(namespace))
        return queryset

    def get_object(self):
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field, "")
        if len(value) > MAX_LOOKUP_CHARS or "\x00" in value:
            raise NotFound()
        return super().get_object()  # DeclaredRule.has_object_permission checks the namespace

    def paginated(self, rows, serializer_class):
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(serializer_class(page, many=True).data)

    def store_call(self, serializer_class, data=None) -> tuple[dict, RowStore]:
        """Validate a store call's input, check its namespaces under the declared rule."""
        request = self.request
        data = validated(serializer_class, request.data if data is None else data)
        self.check_target_permissions(
            request, in_namespaces(data["namespace"], data.get("subject"))
        )
        return data, row_store(request, data)

    def http_method_not_allowed(self, request, *args, **kwargs):
        # A POST-only collection action (``purge``, ``records``, ``clear``) shadows the
        # detail route of an id that cannot exist: reading it answers like any unknown id.
        if (
            request.method == "GET"
            and not self.detail
            and "get" not in self.action_map
            and hasattr(self, "retrieve")
        ):
            raise NotFound()
        return super().http_method_not_allowed(request, *args, **kwargs)


# ------------------------------------------------------------------ memories
@extend_schema(tags=["memories"])
class MemoryViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, NamespacedViewSet
):
    """Live memories: upsert, list, read, soft delete, erase for good."""

    serializer_class = serializers.MemorySerializer
    filterset_class = MemoryFilter
    query_parameters = {
        "retrieve": [IN_NAMESPACE],
        "destroy": [IN_NAMESPACE],
        "change_version": [serializers.ChangeVersionQuery],
    }
    rules = {
        "list": permissions.MEMORY_READ,
        "retrieve": permissions.MEMORY_READ,
        "create": permissions.MEMORY_WRITE,
        "destroy": permissions.MEMORY_DELETE,
        "erase": permissions.MEMORY_ERASE,
        "records": permissions.MEMORY_WRITE,
        "clear": permissions.MEMORY_DELETE,
        "change_version": permissions.MEMORY_READ,
    }
    throttle_scopes = {
        "list": LIST,
        "create": WRITE,
        "destroy": WRITE,
        "erase": ERASE,
        "records": WRITE,
        "clear": WRITE,
    }

    def base_queryset(self):
        # A soft-deleted memory still holds its content: erasure must reach it.
        rows = Memory.objects.all() if self.action == "erase" else Memory.objects.live()
        return rows.order_by("created_at", "id")

    @extend_schema(summary="List live memories (paginated)")
    def list(self, request, *args, **kwargs):
        rows = self.filter_queryset(self.get_queryset())  # q and tag run in SQL too
        return self.paginated(rows, serializers.MemorySerializer)

    @extend_schema(
        summary="Save a memory (upsert)",
        request=serializers.MemoryWriteSerializer,
        responses={
            201: OpenApiResponse(serializers.MemoryWrittenSerializer, "A new memory was created."),
            200: OpenApiResponse(
                serializers.MemoryWrittenSerializer,
                "The live memory with that key was updated in place.",
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        data, mm = bound_manager(self, serializers.MemoryWriteSerializer)
        result = mm.upsert_result(
            data["key"],
            data["value"],
            data["tags"],
            scope=data["scope"],
            type=data["type"],
            actor=actor_of(request),
        )
        memory, created = result.memory, result.created
        memory.warnings = list(result.warnings)
        headers = {"Location": reverse("memoryapp_api:memory-detail", args=[memory.id])}
        return Response(
            serializers.MemoryWrittenSerializer(memory).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            headers=headers if created else None,
        )

    @extend_schema(summary="Read a live memory")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(summary="Soft-delete a memory (404 when it is already deleted)")
    def destroy(self, request, *args, **kwargs):
        memory = self.get_object()
        if not manager_for(memory).delete(memory.id, actor=actor_of(request)):
            raise NotFound()  # deleted by someone else meanwhile
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Erase one memory for good (live or soft-deleted)",
        request=None,
        parameters=[erasures.IDEMPOTENCY_PARAMETER],
        responses=erasures.RECEIPT_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def erase(self, request, *args, **kwargs):
        target: dict = {"ids": [self.kwargs.get("pk", "")]}

        def check():
            # The lookup is the authorization; a replayed request skips it (its memory is
            # gone). The erasure deletes this row, not every row that shares its id.
            memory = self.get_object()
            target["rows"] = {Memory._meta.db_table: [(memory.namespace, memory.pk)]}

        return erasures.respond(request, target, actor_of(request), check=check)

    @extend_schema(
        summary="Save a memory record as Agentao's store does (upsert by scope and key)",
        request=serializers.MemoryRecordInput,
        responses={200: serializers.MemorySerializer},
    )
    @action(detail=False, methods=["post"])
    def records(self, request, *args, **kwargs):
        data, store = self.store_call(serializers.MemoryRecordInput)
        row = store.upsert_memory(SimpleNamespace(**data))
        return Response(serializers.MemorySerializer(row).data)

    @extend_schema(
        summary="Soft-delete every live memory of a namespace (or of one scope there)",
        request=serializers.ClearMemoriesInput,
        responses={200: serializers.ClearedSerializer},
    )
    @action(detail=False, methods=["post"])
    def clear(self, request, *args, **kwargs):
        data, store = self.store_call(serializers.ClearMemoriesInput)
        return Response({"cleared": store.clear_memories(data["scope"])})

    @extend_schema(
        summary="A namespace's change fingerprint: it changes with every write to its memories",
        responses={200: serializers.ChangeVersionSerializer},
    )
    @action(detail=False, methods=["get"], url_path="change-version")
    def change_version(self, request, *args, **kwargs):
        _, store = self.store_call(serializers.ChangeVersionQuery, request.query_params)
        return Response({"version": store.slice_fingerprint()})


# ------------------------------------------------------------------ recall
@extend_schema(tags=["recall"])
class RecallView(MemoryAPIMixin, APIView):
    """``POST /api/recall/``: candidates and both prompt blocks for one turn."""

    rule = permissions.MEMORY_READ
    throttle_scope = RECALL

    @extend_schema(
        summary="Recall memories for a query; render the prompt blocks",
        request=serializers.RecallInputSerializer,
        responses={200: serializers.RecallOutputSerializer},
    )
    def post(self, request):
        data, mm = bound_manager(self, serializers.RecallInputSerializer)
        candidates, context_block = mm.recall_turn(
            data["query"], messages=data["messages"], top_k=data["top_k"], ranking=data["ranking"]
        )
        return Response(
            serializers.recall_output(candidates, mm.render_stable_block(), context_block)
        )


# -------------------------------------------------------- session summaries
@extend_schema(tags=["session summaries"])
class SessionSummaryViewSet(mixins.ListModelMixin, NamespacedViewSet):
    """Session summaries: save one after a complete compaction; list them."""

    serializer_class = serializers.SessionSummarySerializer
    filterset_class = SessionSummaryFilter
    rules = {
        "list": permissions.SUMMARY_READ,
        "create": permissions.SUMMARY_WRITE,
        "clear": permissions.SUMMARY_DELETE,
    }
    throttle_scopes = {"list": LIST, "create": WRITE, "clear": WRITE}

    def base_queryset(self):
        return SessionSummary.objects.order_by("created_at", "id")

    @extend_schema(summary="List session summaries (paginated)")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        summary="Save a session summary",
        request=serializers.SessionSummaryWriteSerializer,
        responses={201: serializers.SessionSummarySerializer},
    )
    def create(self, request, *args, **kwargs):
        data, mm = bound_manager(self, serializers.SessionSummaryWriteSerializer)
        row = mm.save_session_summary(
            data["summary"], data["tokens_before"], data["messages_summarized"]
        )
        if row is None:  # the facade never raises here; it reports a failed save as None
            return Response(
                {"detail": "The session summary could not be saved."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(
            serializers.SessionSummarySerializer(row).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Delete the summaries of one session, or of every session, in a namespace",
        request=serializers.ClearSummariesInput,
        responses={200: serializers.ClearedSerializer},
    )
    @action(detail=False, methods=["post"])
    def clear(self, request, *args, **kwargs):
        data, store = self.store_call(serializers.ClearSummariesInput)
        return Response({"cleared": store.clear_session_summaries(data["session_id"])})


# ---------------------------------------------------------------- review
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
        request=serializers.CrystallizeInputSerializer,
        responses={200: serializers.CrystallizeOutputSerializer},
    )
    def post(self, request):
        data, mm = bound_manager(self, serializers.CrystallizeInputSerializer)
        items = mm.crystallize_user_messages(data["messages"])
        return Response(serializers.CrystallizeOutputSerializer({"items": items}).data)


@extend_schema(tags=["review queue"])
class ReviewItemViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, NamespacedViewSet):
    """The review queue: list, read, approve, reject, purge."""

    serializer_class = serializers.ReviewItemSerializer
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
        return ReviewItem.objects.order_by("-occurrences", "-updated_at", "-created_at", "id")

    @extend_schema(summary="List review items (every status unless `status` is given)")
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(summary="Read a review item")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        summary="Correct a pending item's title, content, type or scope before approval",
        request=serializers.ReviewEditInput,
        responses={
            200: serializers.ReviewItemSerializer,
            409: OpenApiResponse(serializers.ErrorSerializer, "The item is not pending."),
        },
    )
    def partial_update(self, request, *args, **kwargs):
        item = self.get_object()
        data = validated(serializers.ReviewEditInput, request.data)
        try:
            edited = review_edit.edit(
                item_id=item.id, namespace=item.namespace, changes=data, actor=actor_of(request)
            )
        except review_edit.ReviewEditConflict as exc:
            raise Conflict(str(exc)) from exc
        if edited is None:
            item.refresh_from_db()
            raise Conflict(f"Only a pending review item can be edited; this one is {item.status}.")
        return Response(serializers.ReviewItemSerializer(edited).data)

    @extend_schema(
        summary="Approve a pending item: it becomes a memory (source `crystallized`)",
        request=None,
        responses={
            200: serializers.ApproveOutputSerializer,
            409: OpenApiResponse(serializers.ErrorSerializer, "The item is not pending."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, *args, **kwargs):
        item = self.get_object()
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
        return Response(serializers.ApproveOutputSerializer(body).data)

    @extend_schema(
        summary="Reject a pending item",
        request=None,
        responses={
            200: serializers.ReviewItemSerializer,
            409: OpenApiResponse(serializers.ErrorSerializer, "The item is not pending."),
        },
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, *args, **kwargs):
        item = self.get_object()
        rejected = review.reject(item_id=item.id, namespace=item.namespace, actor=actor_of(request))
        item = _reread(item, decided=ReviewStatus.REJECTED if rejected else None)
        if not rejected:
            raise Conflict(
                f"Only a pending review item can be rejected; this one is {item.status}."
            )
        return Response(serializers.ReviewItemSerializer(item).data)

    @extend_schema(
        summary="Erase review items for good (by namespace, status, subject); one receipt each",
        request=serializers.PurgeInputSerializer,
        responses={200: serializers.PurgeOutputSerializer},
    )
    @action(detail=False, methods=["post"])
    def purge(self, request, *args, **kwargs):
        data = validated(serializers.PurgeInputSerializer, request.data)
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
            erasures.record_receipts(request, done)
            receipts.extend(done)
        return Response(
            {"purged": review.purged_count(receipts), "receipts": [r.id for r in receipts]}
        )

    @extend_schema(
        summary="Save a review item as Agentao's store does: insert, or fold into the pending one",
        request=serializers.ReviewRecordInput,
        responses={200: serializers.ReviewItemSerializer},
    )
    @action(detail=False, methods=["post"])
    def records(self, request, *args, **kwargs):
        data, store = self.store_call(serializers.ReviewRecordInput)
        item = store.upsert_review_item(SimpleNamespace(**data))
        return Response(serializers.ReviewItemSerializer(item).data)

    @extend_schema(
        summary="Set a review item's status (any transition; Agentao's update_review_status)",
        request=serializers.ReviewStatusInput,
        responses={200: serializers.ReviewItemSerializer},
    )
    @action(detail=True, methods=["post"], url_path="status")
    def set_status(self, request, *args, **kwargs):
        item = self.get_object()
        data = validated(serializers.ReviewStatusInput, request.data)
        store = RowStore(item.namespace, actor=actor_of(request))
        if not store.update_review_status(item.id, data["status"]):
            raise NotFound()  # erased meanwhile
        item = _reread(item, decided=data["status"])
        return Response(serializers.ReviewItemSerializer(item).data)


# ------------------------------------------------------------------- wipe
@extend_schema(tags=["erasure"])
class WipeAllView(MemoryAPIMixin, APIView):
    """``POST /api/wipe-all/``: the seed's soft reset (not erasure)."""

    rule = permissions.WIPE
    throttle_scope = ERASE

    @extend_schema(
        summary="Soft-delete the memories and delete the session summaries (not erasure)",
        request=serializers.BoundInput,
        responses={200: serializers.WipeOutputSerializer},
    )
    def post(self, request):
        _, mm = bound_manager(self, serializers.BoundInput)
        result = mm.wipe_all(actor=actor_of(request))
        return Response(serializers.WipeOutputSerializer(result.as_dict()).data)


# ---------------------------------------------------------------- erasure
@extend_schema(tags=["erasure"])
class ErasureViewSet(MemoryAPIMixin, viewsets.GenericViewSet):
    """Erasure for good (hard delete + vacuum + verification) and its receipts."""

    serializer_class = serializers.ReceiptSerializer
    # The body names what to erase: erasures.authorize checks it under the declared
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
    filterset_class = receipt_lists.ReceiptFilter

    def get_queryset(self):
        return ErasureReceipt.objects.none()  # list() scopes to the client (visible_receipts)

    @extend_schema(
        summary="List erasure receipts (paginated, newest first): staff all, a client its own"
    )
    def list(self, request, *args, **kwargs):
        found: dict = {}

        def scope(access, rule):
            found["rows"] = receipt_lists.visible_receipts(access, rule)

        self.check_target_permissions(request, scope)
        page = self.paginate_queryset(self.filter_queryset(found["rows"]))
        return self.get_paginated_response(serializers.ReceiptSerializer(page, many=True).data)

    @extend_schema(
        summary="Find the receipts and export records of a subject key (in the body, never a URL)",
        request=receipt_lists.LookupInputSerializer,
        responses={200: receipt_lists.LookupOutputSerializer},
    )
    @action(detail=False, methods=["post"])
    def lookup(self, request, *args, **kwargs):
        data = validated(receipt_lists.LookupInputSerializer, request.data)
        found: dict = {}

        def check(access, rule):
            found["body"] = receipt_lists.lookup_body(data, access, rule)

        self.check_target_permissions(request, check)
        response = Response(found["body"])
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        summary="Erase a subject, a namespace, ids or everything; returns the receipt",
        request=serializers.ErasureInputSerializer,
        parameters=[erasures.IDEMPOTENCY_PARAMETER],
        responses=erasures.RECEIPT_RESPONSES,
    )
    def create(self, request, *args, **kwargs):
        data = validated(serializers.ErasureInputSerializer, request.data)
        dry_run = data.pop("dry_run")

        def check():
            self.check_target_permissions(request, partial(erasures.authorize, data))

        if dry_run:
            check()
            return Response(erasures.preview_body(data))
        return erasures.respond(request, data, actor_of(request), check=check)

    @extend_schema(
        summary="Read an erasure receipt", responses={200: serializers.ReceiptSerializer}
    )
    def retrieve(self, request, *args, **kwargs):
        pk = self.kwargs.get("pk", "")
        self.check_target_permissions(request, partial(erasures.authorize_receipt, pk))
        return Response(erasures.receipt_body(erasures.get_receipt(pk)))


@extend_schema(tags=["erasure"])
class ExportView(MemoryAPIMixin, APIView):
    """``GET /api/exports/``: everything stored about a subject or a namespace (GDPR)."""

    rule = permissions.EXPORT
    throttle_scope = ERASE
    query_parameters = {"get": [erasures.EXPORT_TARGET_PARAMETER]}

    @extend_schema(
        summary="Export everything stored about a subject or a namespace",
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                "One JSON document (memories, summaries, review items, events).",
            )
        },
    )
    def get(self, request):
        data = validated(serializers.ExportQuerySerializer, request.query_params)
        self.check_target_permissions(request, partial(erasures.authorize_export, data))
        body = erasures.export_body(data, actor_of(request), user=request.user)
        # The URL names the subject and the body holds its personal data: no cache
        # (browser, proxy) may keep either.
        response = Response(body)
        add_never_cache_headers(response)
        return response


# ------------------------------------------------------------------ events
@extend_schema(tags=["audit"])
class MemoryEventViewSet(mixins.ListModelMixin, NamespacedViewSet):
    """The audit log: ids, event types, times, actors — never content."""

    serializer_class = serializers.MemoryEventSerializer
    filterset_class = MemoryEventFilter
    rules = {"list": permissions.EVENTS_READ}
    throttle_scopes = {"list": LIST}

    def base_queryset(self):
        return MemoryEvent.objects.order_by("id")

    @extend_schema(summary="List audit events (paginated); 404 for an unknown memory_id")
    def list(self, request, *args, **kwargs):
        memory_id = request.query_params.get("memory_id")
        rows = self.filter_queryset(self.get_queryset())
        if memory_id and not self.get_queryset().filter(memory_id=memory_id).exists():
            raise NotFound()  # unknown, erased, or another tenant's memory: all alike
        return self.paginated(rows, serializers.MemoryEventSerializer)


# --------------------------------------------------------- store problems
@extend_schema(tags=["audit"])
class StoreProblemsView(MemoryAPIMixin, APIView):
    """``GET /api/store-problems/``: probe a manager's stores; report what could not be read."""

    rule = permissions.MEMORY_READ
    query_parameters = {"get": [serializers.StoreProblemsQuerySerializer]}

    @extend_schema(
        summary="Stores that could not be read (docs/behaviour.md §11)",
        responses={200: serializers.StoreProblemsSerializer},
    )
    def get(self, request):
        _, mm = bound_manager(
            self, serializers.StoreProblemsQuerySerializer, data=request.query_params
        )
        # The prompt-path reads are the ones that record problems instead of raising.
        mm.get_all_entries()
        mm.get_cross_session_tail()
        return Response({"problems": mm.take_store_problems()})


def not_found(request, *args, **kwargs):
    """Any other path under /api/: a JSON 404 like every other API error."""
    detail = "Not found."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            detail = f"Not found. API paths end with a slash: {request.path}/"
    return JsonResponse({"detail": detail}, status=404)


__all__ = [
    "CrystallizeView",
    "ErasureViewSet",
    "ExportView",
    "MemoryEventViewSet",
    "MemoryViewSet",
    "RecallView",
    "ReviewItemViewSet",
    "SessionSummaryViewSet",
    "StoreProblemsView",
    "WipeAllView",
    "not_found",
]
