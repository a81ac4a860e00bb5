"""Authorization fails closed: every API operation refuses a client without a grant.

The operations come from the OpenAPI schema, so a new endpoint is checked as soon
as it exists (and this test fails until it has a sample request below); a view
that declares no rule refuses every request.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from memoryapp import MemoryManager
from memoryapp.api import permissions
from memoryapp.api.testing import token_client
from memoryapp.api.views.base import MemoryAPIMixin

pytestmark = pytest.mark.django_db

NS, USER = "acme/web", "acme/alice"
BOUND = {"namespace": NS, "subject": USER}
RECORD = {"key_normalized": "roadmap", "title": "roadmap", "content": "a new roadmap"}

# One request per operation, aimed at acme's rows: operationId -> (query, body).
SAMPLES: dict[str, tuple[dict, dict | None]] = {
    "crystallize_create": (
        {},
        {**BOUND, "messages": [{"role": "user", "content": "I prefer vim"}]},
    ),
    "erasures_create": ({}, {"namespace": NS}),
    "erasures_retrieve": ({}, None),
    "erasures_list": ({}, None),
    "erasures_lookup_create": ({}, {"subject": USER}),
    "events_list": ({"namespace": NS}, None),
    "exports_retrieve": ({"namespace": NS}, None),
    "memories_list": ({"namespace": NS}, None),
    "memories_create": ({}, {**BOUND, "key": "k", "value": "v"}),
    "memories_retrieve": ({}, None),
    "memories_destroy": ({}, None),
    "memories_erase_create": ({}, None),
    "recall_create": ({}, {**BOUND, "query": "roadmap"}),
    "review_items_list": ({"namespace": NS}, None),
    "review_items_retrieve": ({}, None),
    "review_items_approve_create": ({}, None),
    "review_items_reject_create": ({}, None),
    "review_items_partial_update": ({}, {"title": "a corrected title"}),
    "review_items_purge_create": ({}, {"namespace": NS}),
    "session_summaries_list": ({"namespace": NS}, None),
    "session_summaries_create": ({}, {**BOUND, "session_id": "s1", "summary": "a summary"}),
    "store_problems_retrieve": ({"namespace": NS}, None),
    "wipe_all_create": ({}, BOUND),
    # Agentao's store protocol (memoryapp.clients.store.HttpMemoryStore)
    "memories_records_create": ({}, {"namespace": NS, "scope": "project", "type": "note"} | RECORD),
    "memories_clear_create": ({}, {"namespace": NS}),
    "memories_change_version_retrieve": ({"namespace": NS}, None),
    "session_summaries_clear_create": ({}, {"namespace": NS}),
    "review_items_records_create": (
        {},
        {"namespace": NS, "scope": "project", "type": "decision"} | RECORD,
    ),
    "review_items_status_create": ({}, {"status": "rejected"}),
    # The compliance desk: staff with the subject-request permissions only.
    "subject_requests_list": ({}, None),
    "subject_requests_create": ({}, {"subject": USER, "right": "access"}),
    "subject_requests_retrieve": ({}, None),
    "subject_requests_act_create": ({}, {"action": "start"}),
    "subject_requests_export_create": ({}, None),
    "subject_requests_erase_create": ({}, None),
    "subject_requests_lookup_create": ({}, {"subject": USER}),
}
# Operations answering with the caller's own rows only: an outsider gets 200 and nothing.
OWN_ONLY = {"erasures_list", "erasures_lookup_create"}
# Routes outside the schema on purpose: the schema itself, its docs, the JSON 404.
UNLISTED = {"", "schema/", "docs/", "redoc/", "^.*$"}  # the root, the docs, the JSON 404


def _operations():
    schema = SchemaGenerator(urlconf="project.urls").get_schema(request=None, public=True)
    for route, ops in schema["paths"].items():
        for method, op in ops.items():
            yield method, route, op["operationId"]


@pytest.fixture
def acme_rows():
    mm = MemoryManager(project=NS, user=USER)
    memory = mm.upsert("roadmap", "acme roadmap")
    (item,) = mm.crystallize_user_messages([{"role": "user", "content": "We decided to use Go."}])
    owner = token_client("acme-owner", ["acme/"], write=True, erase=True)
    receipt = owner.post("/api/erasures/", {"ids": [mm.upsert("tmp", "x").id]}, format="json")
    from memoryapp.compliance.desk import open_request

    request = open_request(subject=USER, right="erasure", actor="dpo")
    return {
        "subject-requests": request.id,
        "memories": memory.id,
        "review-items": item.id,
        "erasures": receipt.json()["id"],
    }


def test_every_operation_has_a_sample_and_every_route_is_in_the_schema():
    assert {op for _, _, op in _operations()} == set(SAMPLES)
    resolver = get_resolver("memoryapp.api.urls")

    def routes(patterns):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from routes(p.url_patterns)
            elif isinstance(p, URLPattern):
                yield str(p.pattern)

    listed = {route.removeprefix("/api/") for _, route, _ in _operations()}
    for route in routes(resolver.url_patterns):
        if route in UNLISTED:
            continue
        normal = route.replace("(?P<pk>[^/.]+)", "{id}").replace("(?P<pk>[^/]+)", "{id}")
        normal = normal.removeprefix("^").removesuffix("$")
        assert normal in listed or normal.rstrip("/") + "/" in listed, route


@pytest.mark.parametrize("grants", [["globex/"], ["acme"], ["ACME/"]])
def test_a_client_without_a_grant_gets_404_or_403_on_every_operation(acme_rows, grants):
    client = token_client("outsider", grants, write=True, erase=True)
    for method, route, operation in _operations():
        query, body = SAMPLES[operation]
        prefix = route.split("/")[2]
        url = route.replace("{id}", acme_rows.get(prefix, "0" * 16))
        call = getattr(client, method)
        response = call(url, query) if method == "get" else call(url, body or {}, format="json")
        if operation in OWN_ONLY and response.status_code == 200:
            # Only the caller's own receipts and exports: none of acme's.
            found = response.json()
            assert not any(found.get(k) for k in ("results", "receipts", "exports")), operation
        else:
            assert response.status_code in (403, 404), (method, url, response.status_code)
        assert b"acme roadmap" not in response.content


def test_a_view_that_declares_no_rule_refuses_everyone(django_user_model):
    class Forgotten(MemoryAPIMixin, APIView):
        def get(self, request):
            return Response({"secret": "everything"})

    class Declared(Forgotten):
        rule = permissions.MEMORY_READ

    staff = django_user_model.objects.create_superuser("root", password="x")
    factory = APIRequestFactory()
    for user in (staff, token_client("reader", ["acme/"]).user):
        request = factory.get("/x/")
        force_authenticate(request, user=user)
        assert Forgotten.as_view()(request).status_code == 403
        request = factory.get("/x/")
        force_authenticate(request, user=user)
        assert Declared.as_view()(request).status_code == 200
