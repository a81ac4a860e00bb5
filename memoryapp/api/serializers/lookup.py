"""The lookup of a subject key's records: its input, and the receipts, export records and
data-subject requests it finds (``POST /api/erasures/lookup/``, and the desk's
``POST /api/subject-requests/lookup/``). A key travels only in the body, and no answer
contains it."""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.patterns import NON_BLANK_PATTERN
from memoryapp.api.serializers.erasures import ReceiptSerializer
from memoryapp.api.serializers.fields import NAMESPACE_MAX, StrictCharField
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.compliance.desk import urgency
from memoryapp.models import ExportRecord, SubjectRequest


class LookupInputSerializer(StrictInput):
    """``POST /api/erasures/lookup/``: the subject key, in the body (never in a URL)."""

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        schema_pattern=NON_BLANK_PATTERN,
        help_text="A subject (user) key, exactly as stored. Matched by keyed HMAC; not stored.",
    )

    def validate_subject(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value


class ExportRecordSerializer(serializers.ModelSerializer):
    """The audit record of one export: who, when, through what, how many rows (no key)."""

    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per part.")

    class Meta:
        model = ExportRecord
        fields = (
            "id",
            "actor",
            "via",
            "target_kind",
            "subject_hmac",
            "namespace_hmac",
            "key_id",
            "limited_to_grants",
            "counts",
            "request_id",
            "created_at",
        )
        read_only_fields = fields


class RequestFoundSerializer(serializers.ModelSerializer):
    """A data-subject request as a lookup lists it: its facts, never the key (details and
    history: ``GET /api/subject-requests/{id}/``)."""

    assignee: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="Username; null when unassigned.",
    )
    urgency = serializers.SerializerMethodField()

    class Meta:
        model = SubjectRequest
        fields = (
            "id",
            "right",
            "status",
            "received_on",
            "due_on",
            "urgency",
            "assignee",
            "closed_at",
        )
        read_only_fields = fields

    def get_urgency(self, obj: SubjectRequest) -> str:
        """``overdue``, ``due_soon`` or ``""`` (always ``""`` once closed)."""
        return urgency(obj)


class LookupOutputSerializer(serializers.Serializer):
    """What a lookup found: receipts and export records naming the key (oldest first) and
    the requests for it (by received date; empty unless the client may view requests)."""

    receipts = ReceiptSerializer(many=True)
    exports = ExportRecordSerializer(many=True)
    requests = RequestFoundSerializer(
        many=True,
        help_text="Open and closed data-subject requests naming the key; always empty "
        "for a client without the subject-request view permission (staff only).",
    )
