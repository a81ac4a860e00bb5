"""``GET /api/exports/``: what to export, as query parameters (docs/behaviour.md §9)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from memoryapp.api.patterns import NON_BLANK_PATTERN, TEXT_PATTERN
from memoryapp.api.serializers.fields import NAMESPACE_MAX, StrictCharField, namespace_field
from memoryapp.api.serializers.strict import StrictInput

# ``GET /api/exports/`` needs a subject, a namespace or both. Two optional query
# parameters cannot say "at least one of", so the schema declares them as one object
# serialized as ordinary query parameters (OpenAPI 3 ``style: form, explode: true``:
# ``{"subject": "u", "namespace": "n"}`` is sent as ``?subject=u&namespace=n``) whose
# schema says it: ``anyOf`` of the two alternatives, and no other parameter (the
# server refuses one, ExportQuerySerializer). On the wire nothing changes.
EXPORT_TARGET_PARAMETER = OpenApiParameter(
    name="target",
    type={
        "type": "object",
        "properties": {
            "subject": {
                "type": "string",
                "minLength": 1,
                "maxLength": NAMESPACE_MAX,
                "pattern": NON_BLANK_PATTERN,
                "description": "A user key: everything stored about it (in `namespace` only, "
                "if given).",
            },
            "namespace": {
                "type": "string",
                "maxLength": NAMESPACE_MAX,
                "pattern": TEXT_PATTERN,
                "description": "A namespace ('' is the single-tenant one), exactly as stored.",
            },
        },
        "anyOf": [{"required": ["subject"]}, {"required": ["namespace"]}],
        "additionalProperties": False,
    },
    location=OpenApiParameter.QUERY,
    required=True,
    style="form",
    explode=True,
    description=(
        "What to export, as the query parameters `subject`, `namespace`, or both (at least "
        "one): `?subject=KEY` (every namespace holding the subject's rows), "
        "`?namespace=NS`, or `?subject=KEY&namespace=NS` (the subject's rows there)."
    ),
)


class ExportQuerySerializer(StrictInput):
    """``GET /api/exports/``: a ``subject``, a ``namespace``, or both (its rows there).

    Its schema is :data:`EXPORT_TARGET_PARAMETER`: one object of
    query parameters that names at least one of the two, and nothing else. A parameter
    of another name is refused before this runs, as on every operation
    (:mod:`memoryapp.api.query_params`): a misspelt ``namespace`` must not widen the
    export of a subject to every namespace.
    """

    subject = StrictCharField(
        max_length=NAMESPACE_MAX,
        trim_whitespace=False,
        required=False,
        default=None,
        schema_pattern=NON_BLANK_PATTERN,
    )
    namespace = namespace_field(lookup=True, required=False, default=None)

    def validate_subject(self, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise serializers.ValidationError("A subject is a non-empty user key.")
        return value

    def validate(self, attrs: dict) -> dict:
        # A query string's "?subject=" reaches the field as "not given" (DRF's reading
        # of blank HTML input); the schema says a subject is never empty, so say so.
        if getattr(self.initial_data, "get", lambda _k: None)("subject") == "":
            raise serializers.ValidationError({"subject": ["A subject is a non-empty user key."]})
        if attrs.get("subject") is None and attrs.get("namespace") is None:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give `subject`, `namespace`, or both."]}
            )
        return attrs
