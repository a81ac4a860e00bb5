"""Session summaries: the write input and the stored summary."""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.serializers.fields import (
    INT_MAX,
    NAMESPACE_MAX,
    BoundInput,
    StrictCharField,
    StrictIntegerField,
)
from memoryapp.conf import get_guard
from memoryapp.models import SessionSummary
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.validation import MAX_SUMMARY_CHARS


class SessionSummaryWriteSerializer(BoundInput):
    """``POST /api/session-summaries/``."""

    session_id = StrictCharField(
        max_length=NAMESPACE_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="The session; omitted or null: a new random id, as `MemoryManager` makes "
        "one up (the answer's `session_id` says which).",
    )
    summary = StrictCharField(
        max_length=MAX_SUMMARY_CHARS, help_text="The summary of one complete compaction."
    )

    def validate_summary(self, value: str) -> str:
        """Refuse a credential here, where the client can be told (the facade only logs)."""
        try:
            get_guard().detect_sensitive(value.strip())
        except SensitiveMemoryError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    tokens_before = StrictIntegerField(required=False, default=0, min_value=0, max_value=INT_MAX)
    messages_summarized = StrictIntegerField(
        required=False, default=0, min_value=0, max_value=INT_MAX
    )


class SessionSummarySerializer(serializers.ModelSerializer):
    """A stored session summary."""

    class Meta:
        model = SessionSummary
        fields = (
            "id",
            "namespace",
            "subject",
            "session_id",
            "summary_text",
            "tokens_before",
            "messages_summarized",
            "created_at",
        )
        read_only_fields = fields
