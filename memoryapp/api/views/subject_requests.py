"""``/api/subject-requests/``: the compliance desk's data-subject requests over the API.

Staff holding the subject-request permissions (the ``Compliance`` group gives them)
list, open and act on requests; exporting and erasing for a request also need the
export or erase permission. A subject key travels only in POST bodies (opening a
request, ``lookup/``), never in a URL, so it never reaches an access log; answers
never contain it (a request names its subject by HMAC).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from memoryapp.api.filters import RequestFilter
from memoryapp.api.permissions import (
    REQUEST_ADD,
    REQUEST_CHANGE,
    REQUEST_ERASE,
    REQUEST_EXPORT,
    REQUEST_READ,
    Rule,
    declared_rule,
)
from memoryapp.api.serializers.lookup import LookupInputSerializer
from memoryapp.api.serializers.subject_requests import (
    ActSerializer,
    OpenRequestSerializer,
    SubjectRequestSerializer,
)
from memoryapp.api.throttles import ERASE as ERASE_SCOPE
from memoryapp.api.throttles import WRITE as WRITE_SCOPE
from memoryapp.api.views.base import (
    MAX_LOOKUP_CHARS,
    MemoryAPIMixin,
    Pagination,
    no_body,
    validated,
)
from memoryapp.compliance import desk
from memoryapp.compliance.desk_actions import desk_action
from memoryapp.compliance.desk_scope import (
    may_handle_tenant,
    may_see_holdings,
    tenant_of,
    visible_requests,
)
from memoryapp.compliance.holdings import holdings, kept, within_reach, without_key
from memoryapp.compliance.service import purge_now
from memoryapp.models import ExportVia, SubjectRequest


class SubjectRequestViewSet(
    MemoryAPIMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Data-subject requests: list by due date, open, act, export and erase for one."""

    serializer_class = SubjectRequestSerializer
    rules = {
        "list": REQUEST_READ,
        "retrieve": REQUEST_READ,
        "lookup": REQUEST_READ,
        "create": REQUEST_ADD,
        "act": REQUEST_CHANGE,
        "export": REQUEST_EXPORT,
        "erase": REQUEST_ERASE,
    }
    throttle_scopes = {
        "create": WRITE_SCOPE,
        "act": WRITE_SCOPE,
        "lookup": ERASE_SCOPE,
        "export": ERASE_SCOPE,
        "erase": ERASE_SCOPE,
    }
    lookup_value_regex = r"[^/]+"
    pagination_class = Pagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = RequestFilter

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Requests carry no namespace to grant on: staff with the declared permissions only.
        # A method no action serves has no rule: dispatch answers it 405.
        if declared_rule(self) is not None:
            self.check_target_permissions(request, _staff_only)

    def check_object_permissions(self, request, obj) -> None:
        """Nothing more per row: a request has no namespace, and ``initial`` already
        required the action's permissions (DeclaredRule would refuse a row without one)."""

    def get_object(self):
        # An id no request can have is an unknown one: a NUL would reach PostgreSQL
        # as an error (a 500), as in the other viewsets' lookups.
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field, "")
        if len(value) > MAX_LOOKUP_CHARS or "\x00" in value:
            raise NotFound()
        return super().get_object()

    def get_queryset(self):
        # A request of a tenant the user's desk grants do not cover is a 404, as if absent.
        return (
            visible_requests(self.request.user)
            .select_related("assignee")
            .prefetch_related("history", "exports", "receipts")
            .order_by("due_on", "created_at", "id")
        )

    def _actor(self) -> str:
        return f"api:{self.request.user.get_username()}"

    @extend_schema(
        summary="Open a data-subject request (the subject key in the body, never a URL)",
        request=OpenRequestSerializer,
        responses={201: SubjectRequestSerializer},
    )
    def create(self, request, *args, **kwargs):
        data = validated(OpenRequestSerializer, request.data)
        try:
            subject_request = desk.open_request(actor=self._actor(), user=request.user, **data)
        except desk.RequestError as e:
            raise ValidationError({"detail": str(e)}) from e
        return Response(
            SubjectRequestSerializer(subject_request).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Start, assign, extend, annotate, answer or refuse a request",
        request=ActSerializer,
        responses={200: SubjectRequestSerializer},
    )
    @action(detail=True, methods=["post"])
    def act(self, request, *args, **kwargs):
        subject_request = self.get_object()
        data = validated(ActSerializer, request.data)
        try:
            _act(subject_request, data, self._actor())
        except desk.RequestError as e:
            raise ValidationError({"detail": str(e)}) from e
        return Response(SubjectRequestSerializer(self.get_object()).data)

    @extend_schema(
        summary="Export the subject's data for the request (recorded and linked)",
        request=None,
        responses={200: inline_serializer("RequestExport", {"documents": serializers.ListField()})},
    )
    @action(detail=True, methods=["post"])
    def export(self, request, *args, **kwargs):
        # An unknown id is a 404 before the body is looked at.
        subject_request = self.get_object()
        no_body(request)
        try:
            documents = desk_action("export").service(
                subject_request, actor=self._actor(), via=ExportVia.API, user=request.user
            )
        except desk.RequestError as e:
            raise ValidationError({"detail": str(e)}) from e
        response = Response({"documents": documents})
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        summary="Erase the subject's data for the request; the receipts are linked",
        request=None,
        responses={200: inline_serializer("RequestErase", {"receipts": serializers.ListField()})},
    )
    @action(detail=True, methods=["post"])
    def erase(self, request, *args, **kwargs):
        # An unknown id is a 404 before the body is looked at.
        subject_request = self.get_object()
        no_body(request)
        try:
            # As the other erasure endpoints: with the erasure worker on, the request
            # deletes the rows and the worker purges and verifies.
            receipts = desk_action("erase").service(
                subject_request, actor=self._actor(), purge=purge_now(), user=self.request.user
            )
        except desk.RequestError as e:
            raise ValidationError({"detail": str(e)}) from e
        return Response({"receipts": [r.id for r in receipts]})

    @extend_schema(
        summary="The requests naming a subject key, and what we hold about it (key in the body)",
        request=LookupInputSerializer,
        responses={
            200: inline_serializer(
                "RequestLookup",
                {
                    "requests": SubjectRequestSerializer(many=True),
                    "holdings": serializers.DictField(
                        help_text="What an erasure removes: table -> {namespace: rows} "
                        "(empty without the export or erase permission)."
                    ),
                    "kept": serializers.DictField(
                        help_text="Project memories an erasure keeps (exported all the same): "
                        "project_memories_authored / project_memories_contributed -> "
                        "{namespace: rows} (empty without the export or erase permission)."
                    ),
                },
            )
        },
    )
    @action(detail=False, methods=["post"])
    def lookup(self, request, *args, **kwargs):
        data = validated(LookupInputSerializer, request.data)
        found = desk.requests_for(data["subject"], request.user).prefetch_related("history")
        body = {
            "requests": SubjectRequestSerializer(found, many=True).data,
            "holdings": {},
            "kept": {},
        }
        # Where a person's data lies is for who may export or erase it, as the admin shows
        # it on the erase page only; the user-scope namespace (the key itself) is named.
        user = request.user
        # A tenant-scoped officer sees the holdings of their tenants' keys only.
        if may_see_holdings(user) and may_handle_tenant(user, tenant_of(data["subject"])):
            found, held = holdings(data["subject"]), kept(data["subject"])
            body["holdings"] = without_key(within_reach(found, user), data["subject"])
            body["kept"] = without_key(within_reach(held, user), data["subject"])
        response = Response(body)
        response["Cache-Control"] = "no-store"
        return response


def _staff_only(access, rule: Rule) -> None:
    if not access.is_global(rule):
        raise PermissionDenied(f"This needs staff with the {' and '.join(rule.perms)} permission.")


def _act(subject_request: SubjectRequest, data: dict, actor: str) -> None:
    """Run one :class:`ActSerializer` step on ``subject_request`` (RequestError when refused):
    the service the desk's registry names for it, with the arguments it takes."""
    verb, text = data["action"], data.get("text", "")
    service = desk_action(verb).service
    if verb == "start":
        service(subject_request, actor=actor)
    elif verb == "assign":
        name = data.get("assignee", "")
        user = get_user_model().objects.filter(username=name).first() if name else None
        if name and user is None:
            raise desk.RequestError("No such user.")
        service(subject_request, user, actor=actor)
    elif verb == "extend":
        service(subject_request, data.get("months", 1), text, actor=actor)
    elif verb == "note":
        service(subject_request, text, actor=actor)
    else:  # answer or refuse: the registry's close, refused or not
        service(subject_request, outcome=text, actor=actor)
