"""Erasure and wipe: their inputs, previews and receipts (docs/behaviour.md §9)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memoryapp.api.patterns import NON_BLANK_PATTERN
from memoryapp.api.serializers.fields import (
    NAMESPACE_MAX,
    StrictBooleanField,
    StrictCharField,
    StrictChoiceField,
    namespace_field,
)
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.compliance.receipts import outcome_of
from memoryapp.compliance.targets import ErasureRequestError, check_request_shape
from memoryapp.models import ErasureReceipt
from memoryapp.rules.copy_text import phrase
from memoryapp.rules.outcomes import RECEIPT_OUTCOMES, label

MAX_IDS = 1000


class WipeOutputSerializer(serializers.Serializer):
    """``WipeResult`` (docs/behaviour.md §3)."""

    memories_cleared = serializers.IntegerField(min_value=0)
    summaries_cleared = serializers.IntegerField(min_value=0)
    not_cleared = serializers.ListField(child=serializers.CharField())
    ok = serializers.BooleanField()


# ---------------------------------------------------------------- erasure
class ErasureInputSerializer(StrictInput):
    """``POST /api/erasures/`` (``memoryapp.compliance.erase``).

    One target: a ``subject``, ``ids``, a ``namespace``, or ``everything``;
    ``namespace`` given with ``subject`` or ``ids`` restricts them to it.
    """

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        default=None,
        help_text="A user key: its user-scope memories, summaries and review items.",
        schema_pattern=NON_BLANK_PATTERN,
    )
    namespace = namespace_field(lookup=True, required=False, allow_null=True, default=None)
    ids = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        allow_null=True,
        default=None,
        allow_empty=False,
        min_length=1,
        max_length=MAX_IDS,
        help_text="Memory, session summary or review item ids.",
    )
    everything = StrictBooleanField(required=False, default=False)
    include_authored = StrictBooleanField(
        required=False,
        default=False,
        help_text="With `subject`: also erase the project-scope memories it authored.",
    )
    dry_run = StrictBooleanField(
        required=False,
        default=False,
        help_text="Erase nothing: answer 200 with what would go (ErasurePreview).",
    )

    def validate_subject(self, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value

    def validate(self, attrs: dict) -> dict:
        # The one shape rule of every interface (CLI, admin, Python refuse the same requests
        # with the same words); only the field the refusal is filed under is the API's own.
        try:
            check_request_shape(
                subject=attrs.get("subject"),
                namespace=attrs.get("namespace"),
                ids=attrs.get("ids"),
                everything=attrs["everything"],
                include_authored=attrs["include_authored"],
            )
        except ErasureRequestError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None
        if attrs.get("ids") is not None:
            attrs["ids"] = sorted(set(attrs["ids"]))
        return attrs


class ErasurePreviewSerializer(serializers.Serializer):
    """``POST /api/erasures/`` with ``dry_run``: what the erasure would remove."""

    dry_run = serializers.BooleanField()
    counts = serializers.DictField(child=serializers.IntegerField(min_value=0))
    project_memories_authored = serializers.IntegerField(
        allow_null=True,
        help_text="Subject erasures: project-scope memories the subject wrote (else null).",
    )
    authored_erased = serializers.BooleanField(
        help_text="Whether those go too (`include_authored`); otherwise they are kept."
    )


class CopySerializer(serializers.Serializer):
    """One server's check of an erasure (:class:`memoryapp.rules.outcomes.CopyResult`)."""

    server = serializers.CharField(help_text="`primary`, or the replica's alias.")
    role = serializers.CharField(help_text="`primary` or `replica`.")
    system_identifier = serializers.CharField(help_text="PostgreSQL's; empty for SQLite.")
    outcome = StrictChoiceField(choices=RECEIPT_OUTCOMES)
    reason = serializers.CharField(help_text="Why it was not scanned or not verified.")
    at = serializers.CharField(help_text="When it reported (empty: not checked).")
    text = serializers.CharField(help_text="The copy and its outcome in words.")


class ReceiptSerializer(serializers.ModelSerializer):
    """An erasure receipt (docs/behaviour.md §9): who, when, what, counts, purge, verification.

    It never holds erased text: the subject and namespace appear only as keyed HMACs.
    """

    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per table.")
    erased_ids = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="The erased row ids per table (possibly truncated; see details).",
    )
    databases = serializers.ListField(child=serializers.CharField())
    purged = serializers.BooleanField(help_text="Whether the vendor purge completed.")
    verified = serializers.BooleanField(
        help_text="Whether the verification passed as far as it could run here (nothing more "
        "is done automatically). It does not say a byte scan ran: `outcome` does."
    )
    outcome = serializers.SerializerMethodField(
        help_text="What the verification proved: `verified_by_byte_scan`; "
        "`rewritten_not_scanned` (rows deleted, files rewritten, no byte scan possible "
        "here: see `scan_unavailable`); `not_verified` (needs attention); `not_checked` "
        "(no verification yet); `nothing_erased`; `unknown` (a receipt from an earlier "
        "version that does not record it)."
    )
    scan_unavailable = serializers.SerializerMethodField(
        help_text="Why a byte scan was not possible (`rewritten_not_scanned`), else empty."
    )
    outcome_text = serializers.SerializerMethodField(help_text="`outcome` in words.")
    copies = serializers.SerializerMethodField(
        help_text="Each server holding a copy of the data (the primary, each configured "
        "replica) and what its check proved: `server`, `role`, `system_identifier`, "
        '`outcome` (as `outcome`), `reason`, `at`, and `text` in words ("replica '
        'replica_1: verified by byte scan"). `outcome` is the weakest of them.'
    )

    @extend_schema_field(CopySerializer(many=True))
    def get_copies(self, obj: ErasureReceipt) -> list[dict]:
        listed = (obj.details or {}).get("copies") or []
        return [{**c, "text": phrase(c)} for c in listed if isinstance(c, dict)]

    @extend_schema_field(serializers.ChoiceField(choices=RECEIPT_OUTCOMES))
    def get_outcome(self, obj: ErasureReceipt) -> str:
        return outcome_of(obj)[0]

    def get_scan_unavailable(self, obj: ErasureReceipt) -> str:
        return outcome_of(obj)[1]

    def get_outcome_text(self, obj: ErasureReceipt) -> str:
        return label(*outcome_of(obj))

    class Meta:
        model = ErasureReceipt
        fields = (
            "id",
            "actor",
            "target_kind",
            "subject_hmac",
            "namespace_hmac",
            "key_id",
            "include_authored",
            "criteria",
            "counts",
            "erased_ids",
            "authored",
            "databases",
            "state",
            "purge_method",
            "purge_status",
            "purged",
            "vacuumed",
            "verified",
            "outcome",
            "scan_unavailable",
            "outcome_text",
            "copies",
            "verification",
            "caveats",
            "details",
            "attempts",
            "created_at",
            "updated_at",
            "purged_at",
        )
        read_only_fields = fields
