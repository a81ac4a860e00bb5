"""What every API view shares: authentication, the declared rules, pages, the facade binding.

Every view authenticates (token or session) and declares the
:class:`~memoryapp.api.permissions.Rule` of each thing it does; its permission
class, :class:`~memoryapp.api.permissions.DeclaredRule`, refuses what declares
no rule, checks rows as objects and, through :meth:`MemoryAPIMixin.check_target_permissions`,
the namespaces a request names (404 for one outside the client's grants, 403 for
a missing right). Then the view calls the facade (or, for id lookups and lists,
the model querysets) and serialises the result (docs/behaviour.md §13).
"""

from __future__ import annotations

import re

from django.db import DEFAULT_DB_ALIAS
from django.http import JsonResponse
from django.urls import Resolver404, resolve
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter
from rest_framework import viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, UnsupportedMediaType, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from memoryapp.api import permissions, query_params
from memoryapp.api.authentication import TokenAuthentication
from memoryapp.api.exceptions import exception_handler
from memoryapp.api.parsers import JSONParser
from memoryapp.api.patterns import NAMESPACE_PATTERN
from memoryapp.api.permissions import DeclaredRule, access_for, declared_rule, in_namespaces
from memoryapp.api.schema import MemoryAutoSchema
from memoryapp.api.serializers.strict import NoBody
from memoryapp.api.throttles import MemoryScopedThrottle
from memoryapp.db import replicas
from memoryapp.facade import MemoryManager
from memoryapp.interop.store import RowStore
from memoryapp.models import Scope

MAX_LOOKUP_CHARS = 64
_POSITIVE_INT = re.compile(r"[1-9][0-9]{0,8}")


def actor_of(request) -> str:
    """The actor recorded in events and receipts for this request."""
    return f"api:{request.user.get_username()}"


def validated(serializer_class, data) -> dict:
    """Validate ``data`` with ``serializer_class``; a 400 with field-level errors if invalid."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


FORM_MEDIA_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def no_body(request) -> None:
    """An operation that takes no body refuses one that names fields (400 naming them).

    An empty form (what a plain ``POST`` of a form or test client sends) names none and
    is accepted as before the bodies were checked, although the API parses only JSON: a
    form that names fields is refused as a JSON body would be; another media type is a 415.
    """
    try:
        data = request.data
    except UnsupportedMediaType:
        if not request.content_type.lower().startswith(FORM_MEDIA_TYPES):
            raise
        django_request = request._request  # Django parses forms; DRF left the body unread
        data = {**django_request.POST, **django_request.FILES}
    validated(NoBody, data)


def bound_manager(view, serializer_class, data=None) -> tuple[dict, MemoryManager]:
    """Validate the input, check the view's declared rule on its namespaces, bind a facade.

    ``data`` defaults to the request body. The input names ``namespace`` and ``subject``
    (the facade's project and user;
    :class:`~memoryapp.api.serializers.fields.BoundInput`) and may name ``session_id``; a
    namespace the caller may not use is a 404.
    """
    request = view.request
    data = validated(serializer_class, request.data if data is None else data)
    view.check_target_permissions(request, in_namespaces(data["namespace"], data["subject"]))
    mm = MemoryManager(
        project=data["namespace"], user=data["subject"], session_id=data.get("session_id")
    )
    return data, mm


def manager_for(row) -> MemoryManager:
    """A facade bound to the namespace and scope that own ``row`` (a memory)."""
    return MemoryManager(
        project=row.namespace, user=row.namespace if row.scope == Scope.USER else None
    )


def row_store(request, data: dict) -> RowStore:
    """Agentao's store semantics on the namespace (and provenance) a store call names."""
    # Tenants share the tables: a client's own id would tell it whether the id exists
    # elsewhere (a taken one cannot be kept), so the server chooses every new row's id.
    return RowStore(
        data["namespace"], subject=data.get("subject"), actor=actor_of(request), keep_ids=False
    )


# A detail route narrowed to one namespace (an ``HttpMemoryStore`` is bound to one):
# a row of another namespace answers 404, as an unknown id does.
IN_NAMESPACE = OpenApiParameter(
    "namespace",
    {"type": "string", "maxLength": 255, "pattern": NAMESPACE_PATTERN},
    OpenApiParameter.QUERY,
    required=False,
    description="Only a row of this namespace (else 404).",
)


class Pagination(PageNumberPagination):
    """``?page=`` and ``?page_size=`` (1 to 500) on every list.

    Stricter than DRF's, which ignores a malformed ``page_size``, accepts ``page=last``
    and answers a bad page with a 404 (as if the list did not exist): a parameter that
    is not a positive integer, or a page past the last one, is a 400 naming ``page``.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    last_page_strings = ()

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not _POSITIVE_INT.fullmatch(raw) or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: [f"An integer from 1 to {self.max_page_size}."]}
            )
        return int(raw)

    def get_page_number(self, request, paginator) -> str:
        raw = request.query_params.get(self.page_query_param, "1")
        if not _POSITIVE_INT.fullmatch(raw):
            raise ValidationError({self.page_query_param: ["A page number: an integer from 1."]})
        self._pages = paginator
        return raw

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except NotFound:  # past the last page (the paginator counted the rows already)
            last = self._pages.num_pages
            raise ValidationError(
                {self.page_query_param: [f"No such page: this list has pages 1 to {last}."]}
            ) from None

    def get_schema_operation_parameters(self, view) -> list[dict]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            param["schema"]["minimum"] = 1
            if param["name"] == self.page_size_query_param:
                param["schema"]["maximum"] = self.max_page_size
        return params


class MemoryAPIMixin(APIView):
    """What every API view shares: auth, JSON only, throttling, the error mapping, the schema.

    An ``APIView`` itself (each view also derives from ``APIView`` or a viewset, which
    leaves the method resolution order as it was), so its methods are typed as a view's.
    """

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    # Fail closed: every view declares the Rule of each thing it does (``rule`` or
    # ``rules``); one that does not refuses every request.
    permission_classes = [DeclaredRule]
    throttle_classes = [MemoryScopedThrottle]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    schema = MemoryAutoSchema()
    # The query parameters each action (a viewset's) or method (an APIView's) takes
    # besides a list's filters and pages: OpenApiParameter objects or query
    # serializers. The schema documents them and any other is refused (query_params.py).
    query_parameters: dict[str, list] = {}

    def get_exception_handler(self):
        return exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authenticated, permitted, not throttled
        # A query parameter the operation does not take is refused, never ignored: a
        # misspelt filter must not widen the answer (query_params.py). A method the
        # view does not serve is no operation: its 405 (or 404) comes from dispatch.
        method = request.method.lower()
        if method in self.http_method_names and hasattr(self, method):
            query_params.refuse_unknown(self, request)

    def check_target_permissions(self, request, check) -> None:
        """Authorize what the request names (body or query), as ``get_object`` does a row.

        ``check(access, rule)`` raises 404/403; every permission class with a
        ``has_target_permission`` runs it with the view's declared rule. The one
        way a view authorizes its input: none of them, or no rule, refuses.
        """
        checkers = [p for p in self.get_permissions() if hasattr(p, "has_target_permission")]
        if not checkers:
            self.permission_denied(request)
        for permission in checkers:
            if not permission.has_target_permission(request, self, check):
                self.permission_denied(
                    request,
                    message=getattr(permission, "message", None),
                    code=getattr(permission, "code", None),
                )


class NamespacedViewSet(MemoryAPIMixin, viewsets.GenericViewSet):
    """A viewset over one table with a ``namespace`` column.

    ``rules`` maps each action to the :class:`~memoryapp.api.permissions.Rule` it
    needs. Lists show the rows the client may read (and ``?namespace=`` must be
    one the client may name); detail routes look rows up among the namespaces
    visible to the client, then require the action's rule.
    """

    rules: dict[str, permissions.Rule] = {}
    pagination_class = Pagination
    filter_backends = [DjangoFilterBackend]
    lookup_value_regex = r"[^/]+"

    def base_queryset(self):
        raise NotImplementedError

    def get_queryset(self):
        queryset = self.base_queryset()
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return queryset
        access, rule = access_for(self.request), declared_rule(self)
        if rule is None:  # DeclaredRule has refused the request already; never list anything
            return queryset.none()
        if self.detail:
            return access.scope_visible(queryset, rule)
        if self.action == "list" and queryset.db == DEFAULT_DB_ALIAS:
            # A list tolerates lag: a read replica may serve it (docs/operations.md).
            queryset = queryset.using(replicas.lag_tolerant_alias(DEFAULT_DB_ALIAS))
        return access.scope(queryset, rule)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.action == "list" and request.method == "GET":
            # DRF looks the handler up after this: a list that a replica serves is run
            # again on the primary if that replica dies under it (never a 500 for that).
            plain = self.list

            def fallback_list(request, *args, **kwargs):
                return replicas.read_with_fallback(lambda: plain(request, *args, **kwargs))

            self.get = fallback_list

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)  # an invalid filter is a 400 first
        # The filter set narrows to ``?namespace=``; whether the client may name it
        # (404 hidden, 403 without the right) is the declared rule's business.
        if "namespace" in self.request.query_params:
            namespace = self.request.query_params["namespace"]
            self.check_target_permissions(self.request, in_namespaces(namespace))
        return queryset

    def get_object(self):
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field, "")
        if len(value) > MAX_LOOKUP_CHARS or "\x00" in value:
            raise NotFound()
        return super().get_object()  # DeclaredRule.has_object_permission checks the namespace

    def paginated(self, rows, serializer_class):
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(serializer_class(page, many=True).data)

    def store_call(self, serializer_class, data=None) -> tuple[dict, RowStore]:
        """Validate a store call's input, check its namespaces under the declared rule."""
        request = self.request
        data = validated(serializer_class, request.data if data is None else data)
        self.check_target_permissions(
            request, in_namespaces(data["namespace"], data.get("subject"))
        )
        return data, row_store(request, data)

    def http_method_not_allowed(self, request, *args, **kwargs):
        # A POST-only collection action (``purge``, ``records``, ``clear``) shadows the
        # detail route of an id that cannot exist: reading it answers like any unknown id.
        if (
            request.method == "GET"
            and not self.detail
            and "get" not in self.action_map
            and hasattr(self, "retrieve")
        ):
            raise NotFound()
        return super().http_method_not_allowed(request, *args, **kwargs)


def not_found(request, *args, **kwargs):
    """Any other path under /api/: a JSON 404 like every other API error."""
    detail = "Not found."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            detail = f"Not found. API paths end with a slash: {request.path}/"
    return JsonResponse({"detail": detail}, status=404)
