"""Query parameters: an operation takes those its OpenAPI schema lists, and refuses others.

A parameter the server does not know would otherwise be ignored, and a misspelt
filter (``?project=`` for ``?namespace=``) would widen the answer to every
namespace the client sees. So every API view (``MemoryAPIMixin``) refuses a
query parameter it does not take, with a ``400`` naming it (never its value).

What an operation takes is read from the same declarations the schema is built
from, so the two cannot drift apart (``tests/api/test_api_query_params.py`` walks
the schema to check it):

- a list action (``list``): its filter set's filters and the paginator's
  ``page`` and ``page_size``, as drf-spectacular documents them;
- any action: the parameters the view declares for it in ``query_parameters``
  (``OpenApiParameter`` objects or query serializers), which
  :class:`~memoryapp.api.schema.MemoryAutoSchema` adds to the schema;
- everywhere: DRF's own ``format`` (``?format=json``), which the schema leaves
  out because JSON is the API's only format.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.settings import api_settings

MAX_NAMED = 20  # unknown parameters named in one answer
MAX_NAME_CHARS = 100  # of each name: the answer never grows with a hostile query string


def declared(view: Any, method: str) -> list[Any]:
    """The query parameters ``view`` declares for its current action (or HTTP method).

    Viewsets key ``query_parameters`` by action, other views by lower-case method
    (``HEAD`` is answered by ``get``, as Django's ``View`` does).
    """
    table = getattr(view, "query_parameters", None) or {}
    key = getattr(view, "action", None) or method.lower()
    if key == "head":
        key = "get"
    return list(table.get(key, ()))


def _names(parameter: Any) -> Iterable[str]:
    if isinstance(parameter, OpenApiParameter):
        if parameter.location != OpenApiParameter.QUERY:
            return ()
        schema = parameter.type if isinstance(parameter.type, dict) else {}
        if parameter.explode is not False and "properties" in schema:  # style: form object
            return schema["properties"].keys()
        return (parameter.name,)
    if isinstance(parameter, type) and issubclass(parameter, serializers.Serializer):
        parameter = parameter()
    if isinstance(parameter, serializers.Serializer):
        return parameter.fields.keys()
    raise TypeError(f"not a query parameter declaration: {type(parameter).__name__}")


def allowed(view: Any, method: str) -> frozenset[str]:
    """Every query parameter ``view`` takes for its current action (``method`` for APIViews)."""
    names: set[str] = set()
    if api_settings.URL_FORMAT_OVERRIDE:
        names.add(api_settings.URL_FORMAT_OVERRIDE)
    for parameter in declared(view, method):
        names.update(_names(parameter))
    if getattr(view, "action", None) == "list":
        filterset = getattr(view, "filterset_class", None)
        if filterset is not None:
            names.update(filterset.base_filters)
        paginator = getattr(view, "paginator", None)
        if paginator is not None:
            names.update(
                n
                for n in (
                    getattr(paginator, "page_query_param", None),
                    getattr(paginator, "page_size_query_param", None),
                )
                if n
            )
    return frozenset(names)


def refuse_unknown(view: Any, request: Any) -> None:
    """A ``400`` naming each query parameter ``view`` does not take (values are not echoed)."""
    taken = allowed(view, request.method)
    unknown = sorted({name for name in request.query_params if name not in taken})
    if not unknown:
        return
    shown = sorted(taken - {api_settings.URL_FORMAT_OVERRIDE})
    reason = (
        f"Unknown query parameter; this operation takes: {', '.join(shown)}."
        if shown
        else "Unknown query parameter; this operation takes none."
    )
    errors: dict[str, list[str]] = {}
    for name in unknown[:MAX_NAMED]:
        label = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"
        errors[label] = [reason]
    if len(unknown) > MAX_NAMED:
        errors["non_field_errors"] = [f"{len(unknown)} unknown query parameters in all."]
    raise ValidationError(errors)
