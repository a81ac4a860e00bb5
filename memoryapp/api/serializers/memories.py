"""Memories: the write input (``POST /api/memories/``) and the stored memory.

The write input maps each guard refusal
(:meth:`~memoryapp.rules.guard.MemoryGuard.refusals`) to the field it is about, so a
refusal is a field-level 400; the facade runs the guard again as the authority.
"""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.patterns import KEY_PATTERN, NON_BLANK_PATTERN
from memoryapp.api.serializers.fields import BoundInput, StrictCharField, StrictChoiceField
from memoryapp.conf import get_guard
from memoryapp.models import Memory, MemoryType, Scope
from memoryapp.rules import validation
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.validation import MAX_CONTENT_CHARS

_KEY_SECRET = "key appears to contain sensitive credentials"
_WRITE_FIELDS = {"key": "key", "content": "value", "tags": "tags"}  # guard field -> input field


class MemoryWriteSerializer(BoundInput):
    """``POST /api/memories/``: upsert one memory."""

    key = StrictCharField(
        trim_whitespace=False,
        help_text="The memory key; normalised into `key_normalized`.",
        schema_pattern=KEY_PATTERN,
    )
    value = StrictCharField(
        trim_whitespace=False,
        allow_blank=True,
        help_text=f"The content (1 to {MAX_CONTENT_CHARS:,} characters once stripped).",
        schema_pattern=NON_BLANK_PATTERN,
    )
    tags = serializers.ListField(
        child=StrictCharField(
            trim_whitespace=False, allow_blank=True, max_length=validation.MAX_TAG_CHARS
        ),
        max_length=validation.MAX_TAGS,
        required=False,
        default=list,
    )
    scope = StrictChoiceField(
        choices=Scope.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Explicit scope; inferred from the key and tags when omitted.",
    )
    type = StrictChoiceField(
        choices=MemoryType.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Explicit type; inferred from the tags when omitted.",
    )

    def validate(self, attrs: dict) -> dict:
        """The guard's rules, each reported on its own field (docs/behaviour.md §2, §8)."""
        refused = get_guard().refusals(attrs["key"], attrs["value"], attrs["tags"])
        errors = {
            _WRITE_FIELDS[field]: [
                _KEY_SECRET
                if field == "key" and isinstance(exc, SensitiveMemoryError)
                else str(exc)  # fixed sentences: a refused value is never echoed
            ]
            for field, exc in refused.items()
        }
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MemorySerializer(serializers.ModelSerializer):
    """A memory as stored (docs/behaviour.md §13 field names)."""

    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    keywords = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Memory
        fields: tuple[str, ...] = (
            "id",
            "namespace",
            "subject",
            "scope",
            "type",
            "key_normalized",
            "title",
            "content",
            "tags",
            "keywords",
            "source",
            "confidence",
            "sensitivity",
            "created_at",
            "updated_at",
            "deleted_at",
        )
        read_only_fields: tuple[str, ...] = fields


class MemoryWrittenSerializer(MemorySerializer):
    """``POST /api/memories/`` result: the memory, and what the client should know."""

    warnings = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="E.g. the key was cut to 80 characters, or user scope fell back to project.",
    )

    class Meta(MemorySerializer.Meta):
        fields = (*MemorySerializer.Meta.fields, "warnings")
        read_only_fields = fields
