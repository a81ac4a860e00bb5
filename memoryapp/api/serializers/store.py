"""Agentao's store protocol: the inputs and answers behind ``HttpMemoryStore``.

The endpoints behind ``memoryapp.clients.store.HttpMemoryStore``: Agentao's
``MemoryStore`` methods on one namespace, with the records Agentao's manager
builds. Agentao's manager runs its guard first; the server runs its own again
(docs/behaviour.md §8), so nothing reaches the tables unchecked.
"""

from __future__ import annotations

import datetime as dt

from rest_framework import serializers

from memoryapp.api.patterns import NON_BLANK_PATTERN, NORMALISABLE_PATTERN, TITLE_PATTERN
from memoryapp.api.serializers.fields import (
    INT_MAX,
    NAMESPACE_MAX,
    StrictCharField,
    StrictChoiceField,
    StrictIntegerField,
    namespace_field,
)
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.conf import get_guard
from memoryapp.models import Confidence, MemoryType, ReviewStatus, Scope, Sensitivity, Source
from memoryapp.rules import validation
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError

MAX_RECORD_ID = 32  # the id columns
MAX_KEYWORDS = 100
MAX_STAMP_CHARS = 64
# The stamps a record's created_at is sure to be taken as (validate_created_at reads more):
# '' (now), or an ISO 8601 date and time of the years 2-9998 (days up to 28: every month
# has them), so that the schema allows no stamp the validation refuses.
_YEAR = (
    "(?:000[2-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
)
_TIME = "[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:[.][0-9]{3}|[.][0-9]{6})?)?"
_ZONE = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
STAMP_PATTERN = f"^(?:|{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])(?:{_TIME}{_ZONE}?)?)$"


def _choice(choices, default, **kwargs) -> serializers.ChoiceField:
    return StrictChoiceField(choices=choices, required=False, default=default, **kwargs)


def _text_list(max_items: int, **kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=validation.MAX_TAG_CHARS, trim_whitespace=False),
        max_length=max_items,
        required=False,
        default=list,
        **kwargs,
    )


class StoreInput(StrictInput):
    """The namespace a store call acts on (one ``HttpMemoryStore`` per namespace)."""

    namespace = namespace_field(help_text="The store's namespace ('' = single-tenant).")


class StoreRecordInput(StoreInput):
    """What Agentao's ``upsert_memory`` and ``upsert_review_item`` share."""

    subject = namespace_field(
        required=False,
        allow_null=True,
        default=None,
        help_text="Provenance: the user key in whose session the row was written.",
    )
    id = StrictCharField(
        max_length=MAX_RECORD_ID,
        required=False,
        allow_blank=True,
        default="",
        help_text="The id Agentao's manager chose ('' = the server picks one).",
    )
    scope = StrictChoiceField(choices=Scope.choices)
    type = StrictChoiceField(choices=MemoryType.choices)
    key_normalized = StrictCharField(
        max_length=validation.MAX_KEY_CHARS,
        trim_whitespace=False,
        help_text="The key, stored normalised (docs/behaviour.md §2); Agentao sends it so.",
        schema_pattern=NORMALISABLE_PATTERN,
    )
    title = StrictCharField(
        max_length=validation.MAX_TITLE_CHARS, trim_whitespace=False, schema_pattern=TITLE_PATTERN
    )
    content = StrictCharField(trim_whitespace=False, schema_pattern=NON_BLANK_PATTERN)
    tags = _text_list(validation.MAX_TAGS)
    created_at = StrictCharField(
        max_length=MAX_STAMP_CHARS,
        required=False,
        allow_blank=True,
        default="",
        schema_pattern=STAMP_PATTERN,
        help_text="ISO 8601 (naive = UTC), years 2 to 9998; '' means now. An unreadable "
        "stamp is refused (400), never taken as now.",
    )

    def validate_created_at(self, value: str) -> str:
        """'' (now), or a readable stamp within the years 2–9998; anything else is a 400.

        An unreadable stamp (``2024-13-01``, year 10000) used to become "now" without a
        word, so an import of old records silently dated them all today.
        """
        if not value.strip():
            return value
        try:
            stamp = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise serializers.ValidationError(
                "Not a readable ISO 8601 timestamp (e.g. 2024-05-17T09:30:00, naive = UTC, "
                "years 2 to 9998); give '' for now."
            ) from None
        try:
            validation.check_stamp(stamp)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate_key_normalized(self, value: str) -> str:
        try:
            return validation.normalize_key(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_title(self, value: str) -> str:
        try:
            title = get_guard().validate_title(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        if not title:
            raise serializers.ValidationError("Memory title is empty.")
        return value

    def validate_content(self, value: str) -> str:
        try:
            get_guard().validate_content(value)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        """The stored texts of a record, by field, for the credential scan."""
        return {
            "key_normalized": [attrs["key_normalized"]],
            "title": [attrs["title"]],
            "content": [attrs["content"]],
            "tags": list(attrs["tags"]),
        }

    def validate(self, attrs: dict) -> dict:
        """The guard's credential scan on every stored text (a refusal never echoes it)."""
        guard = get_guard()
        errors: dict[str, list[str]] = {}
        for name, texts in self.texts(attrs).items():
            try:
                for text in texts:
                    guard.detect_sensitive(text)
            except SensitiveMemoryError as exc:
                errors[name] = [str(exc)]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MemoryRecordInput(StoreRecordInput):
    """``POST /api/memories/records/``: Agentao's ``upsert_memory(record)``."""

    keywords = _text_list(MAX_KEYWORDS)
    # A declared field (the serializer's metaclass moves it out of the class), not
    # the Field.source attribute the stub sees.
    source = _choice(Source.choices, Source.EXPLICIT)  # type: ignore[assignment]
    confidence = _choice(Confidence.choices, Confidence.EXPLICIT_USER)
    sensitivity = _choice(Sensitivity.choices, Sensitivity.NORMAL)

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        return {**super().texts(attrs), "keywords": list(attrs["keywords"])}


class ReviewRecordInput(StoreRecordInput):
    """``POST /api/review-items/records/``: Agentao's ``upsert_review_item(item)``."""

    evidence = StrictCharField(
        max_length=validation.MAX_CONTENT_CHARS,
        trim_whitespace=False,
        allow_blank=True,
        required=False,
        default="",
    )
    source_session = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        allow_blank=True,
        required=False,
        default="",
    )
    occurrences = StrictIntegerField(required=False, default=1, min_value=0, max_value=INT_MAX)
    confidence = _choice(Confidence.choices, Confidence.AUTO_SUMMARY)
    status = _choice(ReviewStatus.choices, ReviewStatus.PENDING)

    def texts(self, attrs: dict) -> dict[str, list[str]]:
        return {**super().texts(attrs), "evidence": [attrs["evidence"]]}


class ChangeVersionQuery(StoreInput):
    """``GET /api/memories/change-version/``: omitted means the single-tenant namespace."""

    namespace = namespace_field(required=False, default="", help_text="The store's namespace.")


class ClearMemoriesInput(StoreInput):
    """``POST /api/memories/clear/``: Agentao's ``clear_memories(scope)``."""

    scope = StrictChoiceField(
        choices=Scope.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Only this scope; omitted or null: every scope.",
    )


class ClearSummariesInput(StoreInput):
    """``POST /api/session-summaries/clear/``: Agentao's ``clear_session_summaries``."""

    session_id = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        default=None,
        help_text="Only this session's summaries; omitted or null: every session's.",
    )


class ClearedSerializer(serializers.Serializer):
    """How many rows a clear removed (memories: soft-deleted; summaries: deleted)."""

    cleared = serializers.IntegerField(min_value=0)


class ChangeVersionSerializer(serializers.Serializer):
    """A namespace's change fingerprint (compare for equality only)."""

    version = serializers.IntegerField(
        min_value=0, help_text="Changes whenever a memory of the namespace changes, by anyone."
    )
