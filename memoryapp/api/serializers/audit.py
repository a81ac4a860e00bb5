"""The audit log's events and the store-problems probe."""

from __future__ import annotations

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memoryapp.api.serializers.fields import BoundInput, namespace_field
from memoryapp.models import MemoryEvent


@extend_schema_field(OpenApiTypes.ANY)
class EventDetailField(serializers.Field):
    """The event's ``detail`` column: parsed JSON when it is JSON, else the text, or null."""

    def to_representation(self, value):
        if value is None:
            return None
        try:
            return json.loads(value)
        except (TypeError, ValueError):
            return value


class MemoryEventSerializer(serializers.ModelSerializer):
    """One audit event: ids, type, time, actor — never content."""

    detail = EventDetailField(read_only=True, allow_null=True)

    class Meta:
        model = MemoryEvent
        fields = ("id", "memory_id", "namespace", "event_type", "timestamp", "actor", "detail")
        read_only_fields = fields


class StoreProblemsQuerySerializer(BoundInput):
    """``GET /api/store-problems/``: the manager to probe (``namespace`` and ``subject``).

    No client of this project sends the first version's ``project``/``user`` here, and
    query parameters cannot state "one spelling, not both" in the schema: the aliases
    are not taken (an unknown parameter is a 400).
    """

    ALIASES: dict[str, str] = {}
    project = None  # type: ignore[assignment]
    user = None  # type: ignore[assignment]

    namespace = namespace_field(
        required=False,
        default="",
        what="project namespace",
        help_text="Project namespace (omitted: '', the single-tenant namespace).",
    )

    def validate_subject(self, value: str | None) -> str | None:
        return value or None  # '' means no user scope, as in a body


class StoreProblemsSerializer(serializers.Serializer):
    """``take_store_problems()`` after probing the prompt-path reads."""

    problems = serializers.ListField(child=serializers.CharField())
