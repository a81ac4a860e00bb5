"""``/api/subject-requests/``: a data-subject request as the API shows it, and the desk's inputs.

A request names its subject by HMAC only; the key travels in the bodies of
:class:`OpenRequestSerializer` and the lookup (:mod:`memoryapp.api.serializers.lookup`).
"""

from __future__ import annotations

from rest_framework import serializers

from memoryapp.api.serializers.fields import StrictChoiceField
from memoryapp.api.serializers.lookup import LookupInputSerializer, RequestFoundSerializer
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.compliance.desk_actions import DESK_ACTIONS
from memoryapp.models import SubjectRequest, SubjectRight

# The desk's actions taken through ``act/``: all but export and erase (their own URLs).
ACTIONS = tuple(a.name for a in DESK_ACTIONS if not a.separate)


class HistorySerializer(serializers.Serializer):
    """One entry of a request's history."""

    action = serializers.CharField()
    actor = serializers.CharField()
    detail = serializers.CharField()
    at = serializers.DateTimeField()


class SubjectRequestSerializer(RequestFoundSerializer):
    """A request as the API shows it: no subject key, only what the desk needs (its
    assignee and urgency as a lookup lists them)."""

    exports: serializers.PrimaryKeyRelatedField = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True
    )
    receipts: serializers.PrimaryKeyRelatedField = serializers.PrimaryKeyRelatedField(
        many=True, read_only=True
    )
    history = HistorySerializer(many=True, read_only=True)

    class Meta:
        model = SubjectRequest
        fields = (
            "id",
            "right",
            "status",
            "received_on",
            "due_on",
            "urgency",
            "extension_months",
            "extension_reason",
            "outcome",
            "assignee",
            "notes",
            "reference",
            "tenant",
            "namespace_count",
            "exports",
            "receipts",
            "created_by",
            "created_at",
            "updated_at",
            "closed_at",
            "history",
        )
        read_only_fields = fields


class OpenRequestSerializer(LookupInputSerializer):
    """``POST /api/subject-requests/``: subject key (body only) and right; the rest optional."""

    right = StrictChoiceField(choices=SubjectRight.choices)
    received_on = serializers.DateField(required=False)
    namespaces = serializers.ListField(
        child=serializers.CharField(max_length=255, allow_blank=True), required=False, max_length=50
    )
    notes = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    reference = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="The officer's label (a ticket, a name); the key is replaced in it.",
    )


class ActSerializer(StrictInput):
    """``POST /api/subject-requests/{id}/act/``: one step of the request's life."""

    action = StrictChoiceField(choices=ACTIONS)
    months = serializers.IntegerField(required=False, min_value=1, max_value=2)
    text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=10_000,
        help_text="The note, the extension's reason, or the answer / refusal reason.",
    )
    assignee = serializers.CharField(
        required=False, allow_blank=True, max_length=150, help_text="A username ('' unassigns)."
    )
