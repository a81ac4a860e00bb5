"""HTTP-level robustness: bad bodies, sizes, methods, paths, throttling, the schema and docs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from django.core.cache import cache

from memoryapp.models import Memory

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def post_raw(client, path, data, content_type="application/json"):
    return client.generic("POST", path, data, content_type=content_type)


@pytest.mark.parametrize(
    "raw",
    [
        b"{bad json",
        b'{"project": "acme/web", "key": "k", "value": NaN}',
        b"\xff\xfe not utf-8",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_malformed_json_is_400(acme, raw):
    r = post_raw(acme, "/api/memories/", raw)
    assert r.status_code == 400
    assert "detail" in r.json()


@pytest.mark.parametrize("body", [[], "text", 12, None])
def test_a_body_that_is_not_an_object_is_400(acme, body):
    r = post_raw(acme, "/api/recall/", json.dumps(body))
    assert r.status_code == 400
    assert "non_field_errors" in r.json()


def test_an_oversized_body_is_413(acme, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = {"project": "acme/web", "query": "q", "messages": [{"role": "user", "content": "x"}]}
    body["messages"][0]["content"] = "x" * 20_000
    r = acme.post("/api/recall/", body, format="json")
    assert r.status_code == 413
    assert r.json() == {"detail": "Request body too large: the limit is 9.8 KiB."}
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # the default
    body["messages"][0]["content"] = "x" * (2 * 1024 * 1024 + 1)
    r = acme.post("/api/recall/", body, format="json")
    assert r.json() == {"detail": "Request body too large: the limit is 2 MiB."}


@pytest.mark.parametrize(
    "content",
    [
        "src/app_" * 25_001,  # one string over 200,000 characters
        [{"type": "text", "text": "a" * 100_001}, {"type": "text", "text": "b" * 100_000}],
    ],
)
def test_a_message_over_the_text_limit_is_400_and_one_at_it_is_served(acme, content):
    body = {
        "project": "acme/web",
        "query": "paths",
        "messages": [{"role": "user", "content": content}],
    }
    r = acme.post("/api/recall/", body, format="json")
    assert r.status_code == 400
    assert "200,000 characters" in json.dumps(r.json())
    body["messages"][0]["content"] = "src/app_" * 25_000  # exactly 200,000: a linear scan
    assert acme.post("/api/recall/", body, format="json").status_code == 200


def test_other_media_types_are_415(acme):
    r = post_raw(
        acme,
        "/api/memories/",
        "project=acme/web&key=k&value=v",
        "application/x-www-form-urlencoded",
    )
    assert r.status_code == 415
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "/api/memories/abc/"),
        ("patch", "/api/memories/abc/"),
        ("get", "/api/recall/"),
        ("delete", "/api/session-summaries/"),
        ("get", "/api/review-items/abc/approve/"),
        ("post", "/api/exports/"),
        ("post", "/api/events/"),
        ("delete", "/api/erasures/abc/"),
        ("get", "/api/wipe-all/"),
    ],
)
def test_wrong_methods_are_405(acme, method, path):
    r = getattr(acme, method)(path)
    assert r.status_code == 405
    assert "detail" in r.json()


def test_unknown_paths_under_api_are_json_404(acme):
    r = acme.get("/api/nothing/here/")
    assert r.status_code == 404 and r.json() == {"detail": "Not found."}
    r = acme.post("/api/memories", {}, format="json")
    assert r.status_code == 404
    assert r.json()["detail"].endswith("/api/memories/")


def test_nul_bytes_in_the_query_are_400_not_500(acme):
    assert acme.get("/api/memories/", {"namespace": "a\x00b"}).status_code == 400
    assert acme.get("/api/exports/", {"namespace": "a\x00b"}).status_code == 400
    assert acme.get("/api/events/", {"memory_id": "a\x00b"}).status_code == 400


def test_a_lone_surrogate_in_a_body_is_400_not_500(acme):
    # No pattern of the schema can state this rule (tests/rules/test_fuzz.py says why): the
    # API refuses the text (DRF's CharField, then the validation layer), as every entry
    # point does.
    body = '{"project": "acme/web", "key": "k", "value": "a\\ud800b"}'
    r = acme.post("/api/memories/", body, content_type="application/json")
    assert r.status_code == 400 and "surrogate" in r.content.decode().lower(), r.content
    r = acme.post("/api/erasures/", '{"subject": "a\\udc00"}', content_type="application/json")
    assert r.status_code == 400 and "subject" in r.json(), r.content


def test_throttling_per_scope(acme, settings):
    cache.clear()
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "write": "2/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    body = {"project": "acme/web", "key": "k", "value": "v"}
    assert [acme.post("/api/memories/", body, format="json").status_code for _ in range(2)] == [
        201,
        200,
    ]
    r = acme.post("/api/memories/", body, format="json")
    assert r.status_code == 429 and "Retry-After" in r
    assert acme.get("/api/memories/").status_code == 200  # reads are not the write scope
    wipe = {"project": "acme/other"}  # another scope ("erase") has its own budget
    assert acme.post("/api/wipe-all/", wipe, format="json").status_code == 200
    rates["write"] = None  # a scope without a rate is not throttled
    assert acme.post("/api/memories/", body, format="json").status_code == 200
    cache.clear()


def test_schema_documents_every_endpoint_and_its_errors(client):
    r = client.get("/api/schema/", {"format": "json"})
    assert r.status_code == 200
    schema = json.loads(r.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    expected = {
        "/api/memories/": {"get", "post"},
        "/api/memories/{id}/": {"get", "delete"},
        "/api/memories/{id}/erase/": {"post"},
        "/api/recall/": {"post"},
        "/api/session-summaries/": {"get", "post"},
        "/api/crystallize/": {"post"},
        "/api/review-items/": {"get"},
        "/api/review-items/{id}/": {"get", "patch"},
        "/api/review-items/{id}/approve/": {"post"},
        "/api/review-items/{id}/reject/": {"post"},
        "/api/review-items/purge/": {"post"},
        "/api/wipe-all/": {"post"},
        "/api/erasures/": {"get", "post"},
        "/api/erasures/lookup/": {"post"},
        "/api/erasures/{id}/": {"get"},
        "/api/exports/": {"get"},
        "/api/events/": {"get"},
        "/api/store-problems/": {"get"},
        # Agentao's store protocol (memoryapp.clients.store.HttpMemoryStore)
        "/api/memories/records/": {"post"},
        "/api/memories/clear/": {"post"},
        "/api/memories/change-version/": {"get"},
        "/api/session-summaries/clear/": {"post"},
        "/api/review-items/records/": {"post"},
        "/api/review-items/{id}/status/": {"post"},
        # The compliance desk's data-subject requests
        "/api/subject-requests/": {"get", "post"},
        "/api/subject-requests/lookup/": {"post"},
        "/api/subject-requests/{id}/": {"get"},
        "/api/subject-requests/{id}/act/": {"post"},
        "/api/subject-requests/{id}/export/": {"post"},
        "/api/subject-requests/{id}/erase/": {"post"},
    }
    assert {p: set(ops) for p, ops in paths.items()} == expected
    create = paths["/api/memories/"]["post"]
    assert {"200", "201", "400", "401", "403", "404", "413", "415", "429"} <= set(
        create["responses"]
    )
    body = schema["components"]["schemas"]["MemoryWriteRequest"]
    assert set(body["required"]) == {"key", "value"}
    assert body["anyOf"] == [{"required": ["namespace"]}, {"required": ["project"]}]
    assert schema["components"]["schemas"]["ValidationError"]["anyOf"]
    params = {p["name"] for p in paths["/api/memories/"]["get"]["parameters"]}
    assert {"namespace", "scope", "type", "tag", "q", "subject", "page", "page_size"} <= params
    erasure = paths["/api/erasures/"]["post"]
    assert {"201", "409", "422"} <= set(erasure["responses"])
    assert "Idempotency-Key" in {p["name"] for p in erasure["parameters"]}
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_interactive_docs(client):
    r = client.get("/api/docs/")
    assert r.status_code == 200 and b"swagger" in r.content.lower()


def test_the_core_app_never_imports_the_api_stack():
    """``memoryapp`` imports without DRF: only ``memoryapp/api`` may use it."""
    stack = ("rest_framework", "drf_spectacular", "django_filters", "memoryapp.api")
    offenders = []
    for path in (ROOT / "memoryapp").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("memoryapp/api/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            # A verb module may import the API lazily, inside its handler (not at import).
            if any(n.split(".")[0] in stack or n.startswith(stack) for n in names):
                if rel == "memoryapp/cli/clients.py" and node.col_offset > 0:
                    continue
                offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []


def test_help_texts_write_thousands_with_separators():
    from memoryapp.admin.forms import MemoryForm
    from memoryapp.api.serializers.memories import MemoryWriteSerializer
    from memoryapp.rules.validation import MAX_CONTENT_CHARS

    assert MAX_CONTENT_CHARS >= 1000  # else no separator to show
    said = f"{MAX_CONTENT_CHARS:,} characters"
    api = MemoryWriteSerializer().fields["value"].help_text
    assert said in api, api
    admin = " ".join(str(f.help_text) for f in MemoryForm.base_fields.values())
    assert said in admin, admin
