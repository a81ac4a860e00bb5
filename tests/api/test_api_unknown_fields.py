"""Unknown body fields are refused on every operation (a 400 naming them and the accepted
ones), never ignored.

A misspelt field used to change a request's meaning without a word: ``"scoep": "user"``
wrote a project memory (201), ``"subjet"`` in a recall left the user's memories out,
``"top-k"``, ``"tgas"`` and ``"colour"`` were dropped. Every operation of the OpenAPI
schema that takes a body, or could be sent one (POST, PUT, PATCH, DELETE), is walked, so a
new endpoint cannot escape (``memoryapp/api/serializers/strict.py``).
"""

from __future__ import annotations

import re

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import Memory, ReviewItem

pytestmark = pytest.mark.django_db

VALUE = "VALUE-NEVER-ECHOED"
BODY_METHODS = ("post", "put", "patch", "delete")
TAKES = re.compile(r"^Unknown field; this operation takes: (.+)\.$")


@pytest.fixture(autouse=True)
def _no_throttle(settings):
    rates = dict.fromkeys(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


@pytest.fixture
def operator():
    """A client that may do everything the API offers, so only the body decides."""
    client = token_client("body-walker", ["acme/", ""], write=True, erase=True)
    client.user.is_staff = client.user.is_superuser = True
    client.user.save()
    return client


@pytest.fixture
def rows(operator):
    mm = MemoryManager(project="acme/web", user="acme/alice", session_id="s-1")
    memory = mm.upsert("deploy target", "staging cluster")
    (item,) = mm.crystallize_user_messages([{"role": "user", "content": "I prefer tabs."}])
    opened = operator.post(
        "/api/subject-requests/", {"subject": "acme/alice", "right": "access"}, format="json"
    )
    assert opened.status_code == 201, opened.content
    return {"memories": memory.id, "review-items": item.id, "subject-requests": opened.json()["id"]}


def _schema(client) -> dict:
    return client.get("/api/schema/", {"format": "json"}).json()


def _accepted(schema: dict, operation: dict) -> set[str] | None:
    """The body fields the schema documents for ``operation`` (None: it takes no body)."""
    body = operation.get("requestBody")
    if body is None:
        return None
    return _properties(schema, body["content"]["application/json"]["schema"])


def _properties(schema: dict, node: dict) -> set[str]:
    """The property names of a schema object, through $ref and oneOf/anyOf/allOf."""
    if "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    names = set(node.get("properties", {}))
    for key in ("oneOf", "anyOf", "allOf"):
        for part in node.get(key, []):
            names |= _properties(schema, part)
    return names


def _send(client, method: str, url: str, body: dict):
    return getattr(client, method)(url, body, format="json")


def test_every_operation_refuses_an_unknown_body_field_and_names_the_accepted_ones(operator, rows):
    schema = _schema(operator)
    walked = []
    for template, item in schema["paths"].items():
        url = template.replace("{id}", rows.get(template.split("/")[2], "0"))
        for method, operation in item.items():
            if method not in BODY_METHODS:
                continue
            accepted = _accepted(schema, operation)
            for misspelt in ("scoep", "top-k"):
                r = _send(operator, method, url, {misspelt: VALUE})
                assert r.status_code == 400, (method, template, r.status_code, r.content)
                body = r.json()
                assert misspelt in body, (method, template, body)
                assert VALUE.encode() not in r.content
                (message,) = body[misspelt]
                if accepted is None:
                    assert message == "Unknown field; this operation takes no body.", message
                else:  # the accepted fields, as the schema documents them
                    named = TAKES.match(message)
                    assert named, (method, template, message)
                    assert set(named[1].split(", ")) == accepted, (method, template, message)
            walked.append((method, template))
    assert len(walked) >= 23, walked  # every POST, PATCH and DELETE of the API today
    # Nothing was written or decided by a refused request.
    assert Memory.objects.count() == 1
    assert ReviewItem.objects.get().status == "pending"


def test_a_misspelt_scope_no_longer_writes_a_project_memory(operator):
    body = {"namespace": "acme/web", "key": "k", "value": "v", "scoep": "user"}
    r = operator.post("/api/memories/", body, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()) == ["scoep"] and "scope" in r.json()["scoep"][0]
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    "misspelt", [{"subjet": "acme/alice"}, {"top-k": 3}, {"tgas": ["x"]}, {"colour": "red"}]
)
def test_a_recall_with_a_misspelt_field_is_refused(operator, misspelt):
    MemoryManager(project="acme/web", user="acme/alice").upsert("user_tz", "Europe/Paris")
    body = {"namespace": "acme/web", "query": "timezone", **misspelt}
    r = operator.post("/api/recall/", body, format="json")
    assert r.status_code == 400, r.content
    (name,) = misspelt
    assert list(r.json()) == [name]


def test_unknown_fields_are_named_beside_the_fields_own_errors(operator):
    r = operator.post("/api/memories/clear/", {"project": "acme/web"}, format="json")
    assert r.status_code == 400
    assert r.json() == {
        "project": ["Unknown field; this operation takes: namespace, scope."],
        "namespace": ["This field is required."],
    }


def test_the_deprecated_aliases_stay_accepted(operator):
    body = {"project": "acme/web", "user": "acme/alice", "key": "user_tz", "value": "UTC"}
    r = operator.post("/api/memories/", body, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["namespace"] == "acme/alice"


def test_many_unknown_fields_are_named_up_to_a_bound(operator):
    body = {f"f{i:03d}{'x' * 200}": 1 for i in range(30)}
    r = operator.post("/api/recall/", body, format="json")
    assert r.status_code == 400
    errors = r.json()
    assert errors["non_field_errors"] == ["30 unknown fields in all."]
    named = [k for k in errors if k.startswith("f0")]
    assert len(named) == 20 and all(len(k) == 101 and k.endswith("…") for k in named)


def test_query_serializers_let_drfs_format_through(operator):
    MemoryManager(project="acme/web").upsert("plan", "kept")
    r = operator.get("/api/store-problems/", {"namespace": "acme/web", "format": "json"})
    assert r.status_code == 200, r.content
    r = operator.get("/api/exports/", {"namespace": "acme/web", "format": "json"})
    assert r.status_code == 200, r.content
