"""OpenAPI generation (drf-spectacular): every operation documents its error responses too."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from memoryapp.api import query_params, throttles
from memoryapp.api.patterns import NAMESPACE_PATTERN, TEXT_PATTERN, field_pattern
from memoryapp.api.serializers.errors import ErrorSerializer
from memoryapp.api.serializers.strict import StrictInput


class ValidationErrorSerializer(serializers.Serializer):
    """Placeholder for the 400 body; its schema is written by :class:`ValidationErrorScheme`."""


_FIELD_ERRORS = {
    "type": "object",
    "description": (
        "Field-level errors: each key is an input field (or `non_field_errors`), each value "
        "a list of messages, or an object of nested errors for list items and nested objects."
    ),
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]
    },
}
_DETAIL = {
    "type": "object",
    "description": "A request-level error, such as malformed JSON.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}


class ValidationErrorScheme(OpenApiSerializerExtension):
    """The 400 body: DRF's field-level errors, or ``{"detail"}`` for a malformed request."""

    target_class = ValidationErrorSerializer

    def get_name(self, auto_schema, direction):
        return "ValidationError"

    def map_serializer(self, auto_schema, direction):
        return {"anyOf": [_FIELD_ERRORS, _DETAIL]}


def _only_null(schema: dict) -> dict:
    """A property that may be given only as ``null`` (OpenAPI 3.0: ``nullable`` + ``enum``)."""
    return {"type": schema["type"], "nullable": True, "enum": [None]}


def _not_null(schema: dict) -> dict:
    return {k: v for k, v in schema.items() if k != "nullable"}


def postprocess_erasure_shapes(result, generator, **kwargs):
    """``POST /api/erasures/``: a ``oneOf`` of the four targets the validation takes.

    One target — a subject, ids, a namespace, or everything — (ErasureInputSerializer.
    validate): ``namespace`` may restrict a subject or ids, ``include_authored`` goes
    with a subject only, and ``everything`` with nothing else. The other targets of
    a shape may be absent or ``null``, as the server has always taken them; each shape
    names all six properties, so that exactly one matches any body.

    A post-processing hook, after drf-spectacular's enum hook (SPECTACULAR_SETTINGS):
    that one would move the shapes' one-value enums (``[null]``, ``[false]``) into
    enum components, and drop a ``null`` from them.
    """
    component = result.get("components", {}).get("schemas", {}).get("ErasureInputRequest")
    if not component or "properties" not in component:
        return result
    props = component["properties"]
    subject, namespace, ids = (props[k] for k in ("subject", "namespace", "ids"))
    false = {**props["everything"], "enum": [False]}
    shapes = [
        (
            "Erase a subject",
            "Its user-scope rows (in `namespace` only, if given); `include_authored` "
            "also erases the project-scope memories it wrote.",
            "subject",
            {
                "subject": _not_null(subject),
                "namespace": namespace,
                "ids": _only_null(ids),
                "everything": false,
                "include_authored": props["include_authored"],
            },
        ),
        (
            "Erase ids",
            "These memories, session summaries or review items (in `namespace` only, if given).",
            "ids",
            {
                "subject": _only_null(subject),
                "namespace": namespace,
                "ids": _not_null(ids),
                "everything": false,
                "include_authored": false,
            },
        ),
        (
            "Erase a namespace",
            "Every row of the namespace.",
            "namespace",
            {
                "subject": _only_null(subject),
                "namespace": _not_null(namespace),
                "ids": _only_null(ids),
                "everything": false,
                "include_authored": false,
            },
        ),
        (
            "Erase everything",
            "Every row of every namespace (a global erase permission).",
            "everything",
            {
                "subject": _only_null(subject),
                "namespace": _only_null(namespace),
                "ids": _only_null(ids),
                "everything": {**props["everything"], "enum": [True]},
                "include_authored": false,
            },
        ),
    ]
    # Every shape requires its target, so a body is needed (an empty one is refused);
    # drf-spectacular marks a body required only for a serializer with required fields.
    ref = "#/components/schemas/ErasureInputRequest"
    for item in result.get("paths", {}).values():
        for operation in item.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            media = (body or {}).get("content", {}).values()
            if any(m.get("schema", {}).get("$ref") == ref for m in media):
                body["required"] = True
    schemas = result["components"]["schemas"]
    schemas["ErasureInputRequest"] = {
        "description": component.get("description", ""),
        "oneOf": [
            {
                "type": "object",
                "title": title,
                "description": description,
                "properties": {**shape, "dry_run": props["dry_run"]},
                "required": [required],
                "additionalProperties": False,  # ErasureInputSerializer is a StrictInput
            }
            for title, description, required, shape in shapes
        ],
    }
    return result


def postprocess_review_edit(result, generator, **kwargs):
    """``PATCH /api/review-items/{id}/``: at least one known field, nothing else.

    ReviewEditInput.validate refuses an empty body and an unknown field (400); a
    serializer of optional fields cannot say either, so the schema is told here, and
    the body is marked required, so that no schema-valid request is refused.
    """
    name = "PatchedReviewEditInputRequest"
    component = result.get("components", {}).get("schemas", {}).get(name)
    if not component:
        return result
    component["minProperties"] = 1
    component["additionalProperties"] = False
    ref = f"#/components/schemas/{name}"
    for item in result.get("paths", {}).values():
        for operation in item.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            media = (body or {}).get("content", {}).values()
            if any(m.get("schema", {}).get("$ref") == ref for m in media):
                body["required"] = True
    return result


_BODY_METHODS = ("POST", "PUT", "PATCH")


def _required_one_of(serializer) -> list[tuple[str, ...]]:
    """The spellings of each required field a serializer takes under two names."""
    names = getattr(serializer, "required_one_of", None)
    return list(names()) if callable(names) else []


class MemoryAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the 4xx answers every API view can give.

    Input strings also carry the validation layer's text rules as patterns
    (:func:`field_pattern`), so schema and validation agree.
    """

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        # A field that may be given under either of two names (a deprecated alias) is
        # required in one spelling, and given in one at most: "required" cannot say so,
        # anyOf and not can.
        if direction != "request":
            return schema
        if isinstance(serializer, StrictInput) and schema.get("type") == "object":
            # The body refuses a field it does not declare (a 400): the schema says so,
            # the deprecated aliases (declared fields) among its properties.
            schema["additionalProperties"] = False
        pairs = _required_one_of(serializer)
        if pairs:
            schema["anyOf"] = [{"required": [name]} for pair in pairs for name in pair]
        both = getattr(serializer, "alias_pairs", list)()
        if both:  # one spelling at most (both are refused, equal or not)
            schema["not"] = {"anyOf": [{"required": list(pair)} for pair in both]}
        return schema

    def _get_request_for_media_type(self, serializer, direction="request"):
        schema, required = super()._get_request_for_media_type(serializer, direction)
        return schema, required or bool(_required_one_of(serializer))

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction != "request" or not isinstance(field, serializers.CharField):
            return schema
        if schema.get("type") == "string" and "enum" not in schema:
            schema.setdefault("pattern", field_pattern(field))
        return schema

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        # drf-spectacular adds a ``maxLength: 0`` branch beside a blank-allowed field's
        # pattern. Ours already say whether '' is taken (it is, unless the validation
        # refuses a blank — the content, with the guard's own message), and the extra
        # branch would make '' match twice, which ``oneOf`` forbids.
        branches = schema.get("oneOf")
        if isinstance(field, serializers.CharField) and branches and len(branches) == 2:
            inner, blank = branches
            if blank == {"type": "string", "maxLength": 0} and "pattern" in inner:
                del schema["oneOf"]
                schema.update(inner)

    def get_override_parameters(self):
        # The query parameters the view declares for this action: the same list the
        # server takes them from (query_params.py), so schema and refusal agree.
        return [*super().get_override_parameters(), *query_params.declared(self.view, self.method)]

    def _get_filter_parameters(self):
        parameters = super()._get_filter_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if schema.get("type") == "string" and "enum" not in schema:
                # A namespace filter takes what a write takes (the lists refuse the rest).
                pattern = (
                    NAMESPACE_PATTERN if parameter.get("name") == "namespace" else TEXT_PATTERN
                )
                schema.setdefault("pattern", pattern)
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        errors = [
            ("400", ValidationErrorSerializer, "Invalid input: field-level errors, or malformed."),
            ("401", ErrorSerializer, "Not authenticated (or an invalid token)."),
            ("403", ErrorSerializer, "Authenticated, but not allowed to do this here."),
            ("404", ErrorSerializer, "Unknown id, or a namespace outside the client's grants."),
        ]
        if self.method in _BODY_METHODS:
            errors += [
                ("413", ErrorSerializer, "The body exceeds DATA_UPLOAD_MAX_MEMORY_SIZE."),
                ("415", ErrorSerializer, "The body is not application/json."),
            ]
        if throttles.scope_of(self.view):
            errors.append(("429", ErrorSerializer, "Throttled: retry after the Retry-After delay."))
        for code, serializer, description in errors:
            if code not in responses:
                response = self._get_response_for_code(serializer, code, direction=direction)
                responses[code] = {**response, "description": description}
        return responses
