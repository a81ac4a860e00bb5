"""The export of what is stored about a subject or a namespace: ``/api/exports/`` (GDPR)."""

from __future__ import annotations

from functools import partial

from django.utils.cache import add_never_cache_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryapp import compliance
from memoryapp.api import permissions, scoping
from memoryapp.api.serializers.exports import EXPORT_TARGET_PARAMETER, ExportQuerySerializer
from memoryapp.api.throttles import ERASE
from memoryapp.api.views.base import MemoryAPIMixin, actor_of, validated
from memoryapp.models import ExportVia


@extend_schema(tags=["erasure"])
class ExportView(MemoryAPIMixin, APIView):
    """``GET /api/exports/``: everything stored about a subject or a namespace (GDPR)."""

    rule = permissions.EXPORT
    throttle_scope = ERASE
    query_parameters = {"get": [EXPORT_TARGET_PARAMETER]}

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
        data = validated(ExportQuerySerializer, request.query_params)
        self.check_target_permissions(request, partial(scoping.authorize_export, data))
        body = export_body(data, actor_of(request), user=request.user)
        # The URL names the subject and the body holds its personal data: no cache
        # (browser, proxy) may keep either.
        response = Response(body)
        add_never_cache_headers(response)
        return response


def export_body(data: dict, actor: str = "", user=None) -> dict:
    """The export checked by :func:`~memoryapp.api.scoping.authorize_export`, limited to
    what the client may see (recorded as an API export by ``actor``, for the account
    ``user``)."""
    return compliance.export(
        subject=data["subject"],
        namespace=data["namespace"],
        grants=data.get("grants"),
        receipts=data.get("receipts"),
        actor=actor,
        via=ExportVia.API,
        user=user,
    )
