"""``/api/session-summaries/``: save, list, clear."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response

from memoryapp.api import permissions
from memoryapp.api.filters import SessionSummaryFilter
from memoryapp.api.serializers.sessions import (
    SessionSummarySerializer,
    SessionSummaryWriteSerializer,
)
from memoryapp.api.serializers.store import ClearedSerializer, ClearSummariesInput
from memoryapp.api.throttles import LIST, WRITE
from memoryapp.api.views.base import NamespacedViewSet, bound_manager
from memoryapp.models import SessionSummary


@extend_schema(tags=["session summaries"])
class SessionSummaryViewSet(mixins.ListModelMixin, NamespacedViewSet):
    """Session summaries: save one after a complete compaction; list them."""

    serializer_class = SessionSummarySerializer
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
        request=SessionSummaryWriteSerializer,
        responses={201: SessionSummarySerializer},
    )
    def create(self, request, *args, **kwargs):
        data, mm = bound_manager(self, SessionSummaryWriteSerializer)
        row = mm.save_session_summary(
            data["summary"], data["tokens_before"], data["messages_summarized"]
        )
        if row is None:  # the facade never raises here; it reports a failed save as None
            return Response(
                {"detail": "The session summary could not be saved."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(SessionSummarySerializer(row).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Delete the summaries of one session, or of every session, in a namespace",
        request=ClearSummariesInput,
        responses={200: ClearedSerializer},
    )
    @action(detail=False, methods=["post"])
    def clear(self, request, *args, **kwargs):
        data, store = self.store_call(ClearSummariesInput)
        return Response({"cleared": store.clear_session_summaries(data["session_id"])})
