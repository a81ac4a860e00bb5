"""The audit log (``/api/events/``) and the store-problems probe."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp.api import permissions
from memoryapp.api.filters import MemoryEventFilter
from memoryapp.api.serializers.audit import (
    MemoryEventSerializer,
    StoreProblemsQuerySerializer,
    StoreProblemsSerializer,
)
from memoryapp.api.throttles import LIST
from memoryapp.api.views.base import MemoryAPIMixin, NamespacedViewSet, bound_manager
from memoryapp.models import MemoryEvent


@extend_schema(tags=["audit"])
class MemoryEventViewSet(mixins.ListModelMixin, NamespacedViewSet):
    """The audit log: ids, event types, times, actors — never content."""

    serializer_class = MemoryEventSerializer
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
        return self.paginated(rows, MemoryEventSerializer)


# --------------------------------------------------------- store problems
@extend_schema(tags=["audit"])
class StoreProblemsView(MemoryAPIMixin, APIView):
    """``GET /api/store-problems/``: probe a manager's stores; report what could not be read."""

    rule = permissions.MEMORY_READ
    query_parameters = {"get": [StoreProblemsQuerySerializer]}

    @extend_schema(
        summary="Stores that could not be read (docs/behaviour.md §11)",
        responses={200: StoreProblemsSerializer},
    )
    def get(self, request):
        _, mm = bound_manager(self, StoreProblemsQuerySerializer, data=request.query_params)
        # The prompt-path reads are the ones that record problems instead of raising.
        mm.get_all_entries()
        mm.get_cross_session_tail()
        return Response({"problems": mm.take_store_problems()})
