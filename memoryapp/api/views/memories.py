"""``/api/memories/``: upsert, list, read, soft delete, erase, and Agentao's store calls."""

from __future__ import annotations

from types import SimpleNamespace

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from memoryapp.api import idempotency, permissions
from memoryapp.api.filters import MemoryFilter
from memoryapp.api.serializers.memories import (
    MemorySerializer,
    MemoryWriteSerializer,
    MemoryWrittenSerializer,
)
from memoryapp.api.serializers.store import (
    ChangeVersionQuery,
    ChangeVersionSerializer,
    ClearedSerializer,
    ClearMemoriesInput,
    MemoryRecordInput,
)
from memoryapp.api.throttles import ERASE, LIST, WRITE
from memoryapp.api.views.base import (
    IN_NAMESPACE,
    NamespacedViewSet,
    actor_of,
    bound_manager,
    manager_for,
    no_body,
)
from memoryapp.models import Memory


@extend_schema(tags=["memories"])
class MemoryViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, NamespacedViewSet
):
    """Live memories: upsert, list, read, soft delete, erase for good."""

    serializer_class = MemorySerializer
    filterset_class = MemoryFilter
    query_parameters = {
        "retrieve": [IN_NAMESPACE],
        "destroy": [IN_NAMESPACE],
        "change_version": [ChangeVersionQuery],
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
        return self.paginated(rows, MemorySerializer)

    @extend_schema(
        summary="Save a memory (upsert)",
        request=MemoryWriteSerializer,
        responses={
            201: OpenApiResponse(MemoryWrittenSerializer, "A new memory was created."),
            200: OpenApiResponse(
                MemoryWrittenSerializer,
                "The live memory with that key was updated in place.",
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        data, mm = bound_manager(self, MemoryWriteSerializer)
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
            MemoryWrittenSerializer(memory).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
            headers=headers if created else None,
        )

    @extend_schema(summary="Read a live memory")
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(summary="Soft-delete a memory (404 when it is already deleted)")
    def destroy(self, request, *args, **kwargs):
        memory = self.get_object()  # an unknown id is a 404 before the body is looked at
        no_body(request)
        if not manager_for(memory).delete(memory.id, actor=actor_of(request)):
            raise NotFound()  # deleted by someone else meanwhile
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Erase one memory for good (live or soft-deleted)",
        request=None,
        parameters=[idempotency.IDEMPOTENCY_PARAMETER],
        responses=idempotency.RECEIPT_RESPONSES,
    )
    @action(detail=True, methods=["post"])
    def erase(self, request, *args, **kwargs):
        no_body(request)
        target: dict = {"ids": [self.kwargs.get("pk", "")]}

        def check():
            # The lookup is the authorization; a replayed request skips it (its memory is
            # gone). The erasure deletes this row, not every row that shares its id.
            memory = self.get_object()
            target["rows"] = {Memory._meta.db_table: [(memory.namespace, memory.pk)]}

        return idempotency.respond(request, target, actor_of(request), check=check)

    @extend_schema(
        summary="Save a memory record as Agentao's store does (upsert by scope and key)",
        request=MemoryRecordInput,
        responses={200: MemorySerializer},
    )
    @action(detail=False, methods=["post"])
    def records(self, request, *args, **kwargs):
        data, store = self.store_call(MemoryRecordInput)
        row = store.upsert_memory(SimpleNamespace(**data))
        return Response(MemorySerializer(row).data)

    @extend_schema(
        summary="Soft-delete every live memory of a namespace (or of one scope there)",
        request=ClearMemoriesInput,
        responses={200: ClearedSerializer},
    )
    @action(detail=False, methods=["post"])
    def clear(self, request, *args, **kwargs):
        data, store = self.store_call(ClearMemoriesInput)
        return Response({"cleared": store.clear_memories(data["scope"])})

    @extend_schema(
        summary="A namespace's change fingerprint: it changes with every write to its memories",
        responses={200: ChangeVersionSerializer},
    )
    @action(detail=False, methods=["get"], url_path="change-version")
    def change_version(self, request, *args, **kwargs):
        _, store = self.store_call(ChangeVersionQuery, request.query_params)
        return Response({"version": store.slice_fingerprint()})
