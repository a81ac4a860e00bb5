"""The API's answers say what is wrong and where to look (issue #39): a bad page is a 400,
another auth scheme is named, a namespace outside the grants says grants decide (alike for
one that exists and one that does not), a list filter no write could store is a 400, and
``/api/`` and ``/api/redoc/`` exist (served from this server: no CDN)."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from rest_framework.test import APIClient

from memoryapp import MemoryManager
from memoryapp.api.permissions import OUTSIDE_GRANTS
from memoryapp.api.testing import token_client
from memoryapp.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme():
    return token_client("acme-answers", ["acme/"], write=True)


# --------------------------------------------------------------- authentication scheme
@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "Basic"])
def test_another_authorization_scheme_is_named_not_missing(acme, scheme):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {acme.token}")
    r = client.get("/api/memories/")
    assert r.status_code == 401, r.content
    detail = r.json()["detail"]
    assert "Authorization: Token <key>" in detail and "not provided" not in detail
    assert acme.token not in r.content.decode()
    assert r["WWW-Authenticate"] == "Token"


def test_the_token_scheme_still_works_and_a_bad_token_is_still_invalid(acme):
    assert acme.get("/api/memories/").status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    r = client.get("/api/memories/")
    assert r.status_code == 401 and r.json()["detail"] == "Invalid token."
    r = APIClient().get("/api/memories/")
    assert r.status_code == 401 and "not provided" in r.json()["detail"]


# ------------------------------------------------------------ namespaces outside grants
def test_a_write_outside_the_grants_hints_at_grants_alike_for_existing_and_not(acme):
    MemoryManager(project="globex/web").upsert("plan", "exists")
    answers = []
    for namespace in ("globex/web", "globex/never-written"):
        r = acme.post(
            "/api/memories/", {"namespace": namespace, "key": "k", "value": "v"}, format="json"
        )
        assert r.status_code == 404, r.content
        answers.append(r.content)
    assert answers[0] == answers[1]  # nothing tells the two apart
    assert b"grants" in answers[0]
    assert answers[0].decode() == f'{{"detail":"{OUTSIDE_GRANTS}"}}'
    assert Memory.objects.filter(namespace__startswith="globex/").count() == 1


def test_a_recall_and_a_list_outside_the_grants_say_the_same(acme):
    r = acme.post("/api/recall/", {"namespace": "globex/web", "query": "x"}, format="json")
    assert r.status_code == 404 and r.json() == {"detail": OUTSIDE_GRANTS}
    r = acme.get("/api/memories/", {"namespace": "globex/web"})
    assert r.status_code == 404 and r.json() == {"detail": OUTSIDE_GRANTS}


# ---------------------------------------------------------------------- list filters
@pytest.mark.parametrize(
    "path", ["/api/memories/", "/api/session-summaries/", "/api/review-items/", "/api/events/"]
)
@pytest.mark.parametrize(
    ("namespace", "said"),
    [
        ("acme//web", "segments"),
        ("acme/web ", "whitespace"),
        (" acme/web", "whitespace"),
        ("acme/../globex", "segments"),
        ("acme/web/", "segments"),
        ("acme/\x07web", "control characters"),
    ],
)
def test_a_list_filter_no_write_could_store_is_a_400(acme, path, namespace, said):
    MemoryManager(project="acme/web").upsert("plan", "kept")
    r = acme.get(path, {"namespace": namespace})
    assert r.status_code == 400, (path, r.content)
    (message,) = r.json()["namespace"]
    assert said in message


def test_a_valid_list_filter_still_lists(acme):
    MemoryManager(project="acme/web").upsert("plan", "kept")
    r = acme.get("/api/memories/", {"namespace": "acme/web"})
    assert r.status_code == 200 and r.json()["count"] == 1


# ----------------------------------------------------------------------- /api/, redoc
def test_the_api_root_links_docs_schema_and_resources():
    r = APIClient().get("/api/")
    assert r.status_code == 200
    body = r.json()
    assert body["docs"].endswith("/api/docs/") and body["redoc"].endswith("/api/redoc/")
    assert body["schema"].endswith("/api/schema/")
    resources = body["resources"]
    for name in ("memories", "review-items", "session-summaries", "recall", "exports", "events"):
        assert name in resources, resources
    # Every link answers (a list wants a token: 401, not 404).
    for link in [body["docs"], body["redoc"], body["schema"], *resources.values()]:
        path = link.split("://", 1)[1].split("/", 1)[1]
        status = APIClient().get("/" + path).status_code
        assert status in (200, 401, 405), (link, status)
    assert APIClient().post("/api/", {}).status_code == 405


def test_redoc_is_served_with_its_script_from_this_server():
    r = APIClient().get("/api/redoc/")
    assert r.status_code == 200
    page = r.content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert urls, page
    assert all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    assert "googleapis" not in page and "cdn" not in page.lower()
    (script,) = [u for u in urls if u.endswith(".js")]
    assert "/drf_spectacular_sidecar/redoc/" in script
    assert finders.find(script.removeprefix("/static/")) is not None  # a packaged file
    # ReDoc's bundle draws a logo from cdn.redoc.ly: the policy keeps the browser home.
    policy = dict(part.strip().split(" ", 1) for part in r["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'self'" and policy["img-src"] == "'self' data:"
    assert policy["connect-src"] == "'self'"
