"""Unknown query parameters are refused everywhere (a 400 naming them), never ignored.

A misspelt filter (``?project=`` where the API says ``?namespace=``) used to be
ignored, and the answer covered every namespace the client sees. Every
operation of the OpenAPI schema is walked: a parameter it does not list is a 400
naming it (never its value), and every parameter it lists is taken — the
schema and the refusal are read from the same declarations
(``memoryapp/api/query_params.py``).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from memoryapp import MemoryManager
from memoryapp.api import query_params
from memoryapp.api.testing import token_client

pytestmark = pytest.mark.django_db

VALUE = "VALUE-NEVER-ECHOED"
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(autouse=True)
def _no_throttle(settings):
    rates = dict.fromkeys(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
def rows():
    mm = MemoryManager(project="acme/web", user="acme/alice", session_id="s-1")
    memory = mm.upsert("deploy target", "staging cluster")
    mm.save_session_summary("We set up CI.")
    (item,) = mm.crystallize_user_messages([{"role": "user", "content": "I prefer tabs."}])
    MemoryManager(project="acme/support").upsert("escalation", "page the on-call")
    MemoryManager(project="acme/support").crystallize_user_messages(
        [{"role": "user", "content": "We decided to use Postgres."}]
    )
    return {"memory": memory.id, "review-item": item.id}


@pytest.fixture
def operator():
    """A client that may do everything the API offers, so only the query string decides."""
    client = token_client("query-walker", ["acme/", ""], write=True, erase=True)
    client.user.is_staff = client.user.is_superuser = True
    client.user.save()
    return client


def _operations(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    for template, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield template, method, operation


def _url(template: str, rows: dict) -> str:
    kind = template.split("/")[2].rstrip("s")  # /api/memories/{id}/ -> memorie
    ids = {"memorie": rows["memory"], "review-item": rows["review-item"]}
    return template.replace("{id}", ids.get(kind, "0"))


def _documented(operation) -> set[str]:
    names: set[str] = set()
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "query":
            continue
        schema = parameter.get("schema", {})
        if schema.get("type") == "object" and parameter.get("explode", True):
            names.update(schema.get("properties", {}))  # style: form object (the export's)
        else:
            names.add(parameter["name"])
    return names


def _send(client, method: str, url: str, query: dict):
    target = f"{url}?{urlencode(query)}"
    if method == "get":
        return client.get(target)
    return getattr(client, method)(target, {}, format="json")


def test_every_operation_refuses_an_unknown_parameter_and_names_it(operator, rows):
    walked = set()
    for template, method, operation in _operations(operator):
        url = _url(template, rows)
        for unknown in ("bogus", "project" if "project" not in _documented(operation) else "nsp"):
            r = _send(operator, method, url, {unknown: VALUE})
            assert r.status_code == 400, (method, template, r.status_code, r.content)
            body = r.json()
            assert list(body) == [unknown], (method, template, body)
            assert body[unknown][0].startswith("Unknown query parameter"), body
            assert VALUE.encode() not in r.content
        walked.add((method, template))
    for template in {t for _, t in walked}:  # a method no operation has: 405, not 400
        r = operator.generic("TRACE", f"{_url(template, rows)}?bogus={VALUE}")
        assert r.status_code == 405, (template, r.status_code)
    gets = {t for m, t in walked if m == "get"}
    assert {
        "/api/memories/",
        "/api/memories/{id}/",
        "/api/memories/change-version/",
        "/api/session-summaries/",
        "/api/review-items/",
        "/api/review-items/{id}/",
        "/api/erasures/{id}/",
        "/api/exports/",
        "/api/events/",
        "/api/store-problems/",
    } <= gets
    assert len(walked) >= 25


def test_every_documented_parameter_is_taken(operator, rows):
    for template, method, operation in _operations(operator):
        url = _url(template, rows)
        match = resolve(url)
        view_class = getattr(match.func, "cls", None) or match.func.view_class
        view = view_class(**getattr(match.func, "initkwargs", {}))
        if hasattr(match.func, "actions"):
            view.action = match.func.actions[method]
        taken = query_params.allowed(view, method.upper())
        assert taken == _documented(operation) | {"format"}, (method, template)
        documented = _documented(operation)
        if documented and method == "get":
            r = _send(operator, method, url, dict.fromkeys(sorted(documented), "x"))
            assert b"Unknown query parameter" not in r.content, (template, r.content)


def test_a_misspelt_filter_never_widens_the_review_queue(operator, rows):
    everything = operator.get("/api/review-items/").json()
    assert {i["namespace"] for i in everything["results"]} == {"acme/web", "acme/support"}
    r = operator.get("/api/review-items/", {"project": "acme/support"})
    assert r.status_code == 400
    assert list(r.json()) == ["project"]
    assert "namespace" in r.json()["project"][0]  # it says what the endpoint takes
    assert b"acme/support" not in r.content and b"results" not in r.content
    narrowed = operator.get("/api/review-items/", {"namespace": "acme/support"}).json()
    assert {i["namespace"] for i in narrowed["results"]} == {"acme/support"}


def test_a_misspelt_memory_filter_and_a_filter_on_a_detail_route(operator, rows):
    r = operator.get("/api/memories/", {"namespace": "acme/web", "scpoe": "user"})
    assert r.status_code == 400 and list(r.json()) == ["scpoe"]
    # A list's filters are not a detail route's: only ?namespace= narrows a lookup.
    r = operator.get(f"/api/memories/{rows['memory']}/", {"scope": "user"})
    assert r.status_code == 400 and list(r.json()) == ["scope"]
    r = operator.get(f"/api/memories/{rows['memory']}/", {"namespace": "acme/web"})
    assert r.status_code == 200
    # DRF's own format parameter stays.
    assert operator.get("/api/memories/", {"format": "json"}).status_code == 200
    assert operator.get("/api/events/", {"page_size": "1", "page": "1"}).status_code == 200


def test_an_unknown_parameter_is_named_not_echoed_and_the_answer_is_bounded(operator, rows):
    query = {f"p{i:03d}": VALUE for i in range(100)} | {"x" * 5000: VALUE}
    r = operator.get("/api/memories/", query)
    assert r.status_code == 400
    body = r.json()
    assert len(body) == query_params.MAX_NAMED + 1
    assert body["non_field_errors"] == ["101 unknown query parameters in all."]
    assert VALUE.encode() not in r.content and len(r.content) < 20_000
    r = operator.get("/api/memories/", {"x" * 5000: VALUE})
    (name,) = r.json()
    assert name == "x" * query_params.MAX_NAME_CHARS + "…"


def test_authentication_comes_first(rows):
    r = APIClient().get("/api/review-items/", {"project": "acme/support"})
    assert r.status_code == 401
    outsider = token_client("outsider", ["globex/"])
    r = outsider.get("/api/review-items/", {"project": "acme/support"})
    assert r.status_code == 400 and b"acme" not in r.content
