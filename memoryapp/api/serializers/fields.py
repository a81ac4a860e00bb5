"""The API's strict input fields and the namespace field every input shares.

A refused value is never echoed: messages are fixed sentences.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.fields import empty

from memoryapp.api.patterns import NAMESPACE_PATTERN
from memoryapp.api.serializers.strict import StrictInput
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import check_namespace, check_stored_key

NAMESPACE_MAX = 255  # the namespace / subject / session columns are varchar(255)
INT_MAX = 2**31 - 1  # the summary counters are 32-bit integer columns


# DRF coerces JSON types (``1`` → ``"1"``, ``"true"`` → ``True``, ``"5"`` → ``5``); the
# API takes exactly the types its schema documents, so input fields are strict.
class StrictCharField(serializers.CharField):
    """A string field that takes only JSON strings.

    ``schema_pattern`` documents the rule its validation applies (patterns.py).
    """

    def __init__(self, *, schema_pattern: str | None = None, **kwargs) -> None:
        self.schema_pattern = schema_pattern  # a constructor argument: fields are deep-copied
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer field that takes only JSON integers (no strings, floats or booleans)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A boolean field that takes only ``true`` and ``false``."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    """A choice that takes only a JSON string among its choices; every ChoiceField of the API.

    DRF's own message quotes the refused value (``"password=hunter2…" is not a
    valid choice``), against docs/behaviour.md §13, and a value holding a lone
    surrogate then made the JSON renderer fail (an HTML 500). The refusal names the
    accepted choices instead; non-strings are refused rather than coerced.
    """

    default_error_messages = {
        "invalid_choice": "The value is not a valid choice; expected one of: {choices}."
    }

    def to_internal_value(self, data):
        if data == "" and self.allow_blank:
            return ""
        if not isinstance(data, str) or data not in self.choice_strings_to_values:
            self.fail("invalid_choice", choices=", ".join(self.choice_strings_to_values))
        return self.choice_strings_to_values[data]


_NAMED = {
    "project": "project namespace",
    "user": "user namespace",
    "session_id": "session id",
    "subject": "subject",
}


class NamespaceField(StrictCharField):
    """A namespace checked as every entry point checks it (:mod:`memoryapp.rules.validation`).

    A namespace that is written is held to ``check_namespace``; one that only
    names rows to find (erasure, purge, export: ``lookup=True``) to the looser
    ``check_stored_key``, so rows stored before the write rules stay reachable.
    """

    def __init__(self, *, lookup: bool = False, what: str | None = None, **kwargs):
        self.check = check_stored_key if lookup else check_namespace
        self.what = what  # the facade's word for it; by default the field's own name's
        kwargs.setdefault("schema_pattern", None if lookup else NAMESPACE_PATTERN)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if self.max_length is not None and len(value) > self.max_length:
            return value  # DRF's own max_length message follows
        what = self.what or _NAMED.get(self.field_name, "Namespace")  # as the facade words it
        try:
            return self.check(value, what)
        except MemoryValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None


def namespace_field(*, lookup: bool = False, **kwargs) -> serializers.CharField:
    """A namespace key: up to 255 characters, blank allowed, never stripped."""
    kwargs.setdefault("max_length", NAMESPACE_MAX)
    return NamespaceField(lookup=lookup, allow_blank=True, trim_whitespace=False, **kwargs)


@extend_schema_serializer(deprecate_fields=["project", "user"])
class BoundInput(StrictInput):
    """The namespaces a call is bound to: a project ``namespace`` and a ``subject``.

    ``project`` and ``user`` are deprecated aliases of ``namespace`` and ``subject``,
    still taken from clients written before. One field is given in one spelling: both
    in one body is a 400 that names the two, whatever their values (the schema can say
    "not both", not "both equal", and a body the schema allows is never refused).
    """

    # alias -> canonical field; the validated data holds the canonical names only
    ALIASES = {"project": "namespace", "user": "subject"}

    namespace = namespace_field(
        required=False,
        what="project namespace",
        help_text="Project namespace ('' is the single-tenant namespace). Required "
        "(or its deprecated alias `project`).",
    )
    subject = namespace_field(
        required=False,
        allow_null=True,
        default=None,
        what="user namespace",
        help_text="User namespace (the subject key); omitted, null or '' means no user scope.",
    )
    project = namespace_field(
        required=False, what="project namespace", help_text="Deprecated alias of `namespace`."
    )
    user = namespace_field(
        required=False,
        allow_null=True,
        what="user namespace",
        help_text="Deprecated alias of `subject`.",
    )

    @classmethod
    def alias_pairs(cls) -> list[tuple[str, str]]:
        """(canonical, alias) of every field taken under two names: one of them at most."""
        return [(name, alias) for alias, name in cls.ALIASES.items()]

    @classmethod
    def required_one_of(cls) -> list[tuple[str, str]]:
        """Required fields with a deprecated alias: one of the two spellings is needed."""
        return [
            (name, alias)
            for alias, name in cls.ALIASES.items()
            if cls._declared_fields[name].default is empty
        ]

    def to_internal_value(self, data):
        attrs = super().to_internal_value(data)
        errors: dict[str, list[str]] = {}
        for alias, name in self.ALIASES.items():
            values = {k: attrs.pop(k) for k in (name, alias) if k in attrs}
            given = {k: v for k, v in values.items() if k in data}  # not a field's default
            try:
                attrs[name] = self._one_value(name, alias, given, values)
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def _one_value(self, name: str, alias: str, given: dict, values: dict):
        """The value of ``name`` from either spelling given (else its default)."""
        if len(given) > 1:
            raise serializers.ValidationError(
                f"Give `{name}` or its deprecated alias `{alias}`, not both."
            )
        if given:
            value = next(iter(given.values()))
            return value or None if name == "subject" else value  # '': no user scope
        if name in values:
            return values[name]
        raise serializers.ValidationError(self.fields[name].error_messages["required"])
