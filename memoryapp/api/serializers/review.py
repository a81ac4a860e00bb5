"""The review queue: crystallizer input, review items, decisions, corrections, purge."""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.patterns import NON_BLANK_PATTERN, TITLE_PATTERN
from memoryapp.api.serializers.fields import (
    BoundInput,
    StrictCharField,
    StrictChoiceField,
    namespace_field,
)
from memoryapp.api.serializers.memories import MemorySerializer
from memoryapp.api.serializers.messages import messages_field
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.models import MemoryType, ReviewItem, ReviewStatus, Scope
from memoryapp.rules.validation import MAX_CONTENT_CHARS


class CrystallizeInputSerializer(BoundInput):
    """``POST /api/crystallize/``."""

    session_id = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    messages = messages_field(help_text="Chat messages; only `user` messages are read.")


class ReviewItemSerializer(serializers.ModelSerializer):
    """A crystallizer candidate in the review queue."""

    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    other_proposers = serializers.SerializerMethodField(
        help_text="Project scope: how many other subjects proposed the same key (their items "
        "are decided with this one); 0 for user scope."
    )

    class Meta:
        model = ReviewItem
        fields = (
            "id",
            "namespace",
            "subject",
            "scope",
            "type",
            "key_normalized",
            "title",
            "content",
            "tags",
            "evidence",
            "source_session",
            "occurrences",
            "confidence",
            "status",
            "subjects_uncertain",
            "other_proposers",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields

    def get_other_proposers(self, item: ReviewItem) -> int:
        """The annotation of a listed item; counted for one read alone."""
        found = getattr(item, "other_proposers", None)
        if found is None:
            found = (
                ReviewItem.objects.using(item._state.db or "default")
                .filter(pk=item.pk, namespace=item.namespace)
                .with_other_proposers()
                .values_list("other_proposers", flat=True)
                .first()
            )
        return int(found or 0)


class CrystallizeOutputSerializer(serializers.Serializer):
    """``POST /api/crystallize/`` result: the queued (or folded) review items."""

    items = ReviewItemSerializer(many=True)


class ApproveOutputSerializer(serializers.Serializer):
    """``POST /api/review-items/{id}/approve/`` result."""

    review_item = ReviewItemSerializer()
    memory = MemorySerializer()


class PurgeInputSerializer(StrictInput):
    """``POST /api/review-items/purge/``: every filter is optional."""

    namespace = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    status = StrictChoiceField(
        choices=ReviewStatus.values, required=False, allow_null=True, default=None
    )
    subject = namespace_field(lookup=True, required=False, allow_null=True, default=None)


class PurgeOutputSerializer(serializers.Serializer):
    """How many review items were erased, and the receipts of the erasures."""

    purged = serializers.IntegerField(min_value=0)
    receipts = serializers.ListField(
        child=serializers.CharField(), help_text="Receipt ids (one per namespace purged)."
    )


class ReviewEditInput(StrictInput):
    """``PATCH /api/review-items/{id}/``: a reviewer's corrections (give at least one field).

    The service validates the text through the guard (docs/behaviour.md §6).
    """

    title = StrictCharField(required=False, trim_whitespace=False, schema_pattern=TITLE_PATTERN)
    content = StrictCharField(
        required=False,
        trim_whitespace=False,
        max_length=MAX_CONTENT_CHARS,
        schema_pattern=NON_BLANK_PATTERN,
    )
    type = StrictChoiceField(choices=MemoryType.choices, required=False)
    scope = StrictChoiceField(choices=Scope.choices, required=False)

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("Give at least one of title, content, type, scope.")
        return attrs


class ReviewStatusInput(StrictInput):
    """``POST /api/review-items/{id}/status/``: Agentao's ``update_review_status``."""

    status = StrictChoiceField(choices=ReviewStatus.choices)
