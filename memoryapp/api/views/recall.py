"""``POST /api/recall/``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp.api import permissions
from memoryapp.api.serializers.recall import (
    RecallInputSerializer,
    RecallOutputSerializer,
    recall_output,
)
from memoryapp.api.throttles import RECALL
from memoryapp.api.views.base import MemoryAPIMixin, bound_manager


@extend_schema(tags=["recall"])
class RecallView(MemoryAPIMixin, APIView):
    """``POST /api/recall/``: candidates and both prompt blocks for one turn."""

    rule = permissions.MEMORY_READ
    throttle_scope = RECALL

    @extend_schema(
        summary="Recall memories for a query; render the prompt blocks",
        request=RecallInputSerializer,
        responses={200: RecallOutputSerializer},
    )
    def post(self, request):
        data, mm = bound_manager(self, RecallInputSerializer)
        candidates, context_block = mm.recall_turn(
            data["query"], messages=data["messages"], top_k=data["top_k"], ranking=data["ranking"]
        )
        return Response(recall_output(candidates, mm.render_stable_block(), context_block))
