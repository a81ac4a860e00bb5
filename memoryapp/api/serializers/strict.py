"""Request bodies take the fields their operation documents and refuse any other.

DRF ignores a field a serializer does not declare, so a misspelt one changed the
meaning of a request without a word: ``"scoep": "user"`` wrote a project memory,
``"subjet"`` in a recall left the user's memories out, ``"top-k"`` kept the default.
Every request serializer of the API derives from :class:`StrictInput`, which refuses
such a body with a ``400`` naming each unknown field (never its value) and the
fields the operation takes; an operation that takes no body validates it with
:class:`NoBody`. ``tests/api/test_api_unknown_fields.py`` walks the schema so that
a new operation cannot escape.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.settings import api_settings

MAX_NAMED = 20  # unknown fields named in one answer
MAX_NAME_CHARS = 100  # of each name: the answer never grows with a hostile body


def unknown_field_errors(given, accepted) -> dict[str, list[str]]:
    """The 400's errors for the names of ``given`` not in ``accepted`` (empty: none)."""
    unknown = sorted(str(name) for name in given if name not in accepted)
    if not unknown:
        return {}
    shown = sorted(accepted)
    reason = (
        f"Unknown field; this operation takes: {', '.join(shown)}."
        if shown
        else "Unknown field; this operation takes no body."
    )
    errors: dict[str, list[str]] = {}
    for name in unknown[:MAX_NAMED]:
        label = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"
        errors[label] = [reason]
    if len(unknown) > MAX_NAMED:
        errors["non_field_errors"] = [f"{len(unknown)} unknown fields in all."]
    return errors


class StrictInput(serializers.Serializer):
    """A request body (or query) serializer that refuses fields it does not declare.

    Given a query string, it lets DRF's ``format`` through, as the query parameter check
    (:mod:`memoryapp.api.query_params`) does on every operation.
    """

    def to_internal_value(self, data):
        """The fields' values; a 400 naming the unknown fields beside the fields' own errors
        (so that ``{"project": …}`` where ``namespace`` is needed says both)."""
        if not isinstance(data, Mapping):
            return super().to_internal_value(data)
        accepted = {name for name, field in self.fields.items() if not field.read_only}
        given = set(data.keys())
        if isinstance(data, QueryDict):  # a query serializer: DRF's ?format= is everyone's
            given.discard(api_settings.URL_FORMAT_OVERRIDE)
        errors = unknown_field_errors(given, accepted)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not errors or not isinstance(exc.detail, dict):
                raise
            for name, messages in exc.detail.items():
                errors[name] = [*errors.get(name, []), *messages]
        if errors:
            raise serializers.ValidationError(errors)
        return value


class NoBody(StrictInput):
    """The body of an operation that takes none: absent, or ``{}``."""
