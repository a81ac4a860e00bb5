"""``?q=`` and ``?tag=`` run in SQL for every value, with the facade's rule (docs/behaviour.md §3).

A non-ASCII character, ``"`` or ``\\`` used to make the list scan the client's
rows in Python (0.6 s at 30k rows): SQLite's ``LIKE`` folds ASCII only, and the
JSON text of the tag and keyword columns escapes ``"`` and ``\\``. The folded
lookups of ``memoryapp.db.lookups`` answer those exactly, in SQL, paginated
there; lists are throttled (``API_THROTTLE_LIST``) (issue #26, Low).
"""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.models import Memory
from memoryapp.services import search

pytestmark = pytest.mark.django_db

NS = "acme/search"
ROWS = [
    ("café order", "CAFÉ au lait every morning", ["Zürich", "a,b"]),
    ("street", "Große Straße 5", ['x"y', "[br]"]),
    ("windows path", r"files live in C:\Tmp\Logs", ["back\\slash"]),
    ("quote", 'she said "ship it" twice', ["plain"]),
    ("greek", "ΣΊΣΥΦΟ the stone", ["Ελλάδα"]),
    ("ascii only", "nothing special here", ["cafe", "ab"]),
]
NEEDLES = [
    "é", "café", "CAFÉ", "É", "caf", '"', 'x"y', '"ship', "\\", "c:\\tmp", r"\logs",
    "zür", "ZÜRICH", "ß", "straße", "σίσυφ", "ελλ", "a,b", ",", "[br]", "[", "]",
    "ü", "cafe", "lait", "back\\", "nomatch\u00e9",
]  # fmt: skip


@pytest.fixture
def client():
    mm = MemoryManager(project=NS)
    for key, value, tags in ROWS:
        mm.upsert(key, value, tags=tags)
    # A row another tool wrote: its JSON escapes every non-ASCII character.
    other = mm.upsert("other writer", "written elsewhere", tags=["Über"])
    Memory.objects.filter(pk=other.pk).update(tags_json=json.dumps(["Über"], ensure_ascii=True))
    cache.clear()
    return token_client("search-app", ["acme/"], write=True)


def _reference(needle: str) -> set[str]:
    wanted = needle.strip().lower()
    return {m.pk for m in Memory.objects.live().filter(namespace=NS) if search.matches(m, wanted)}


def _tag_reference(tag: str) -> set[str]:
    wanted = tag.strip().lower()
    rows = Memory.objects.live().filter(namespace=NS)
    return {m.pk for m in rows if wanted in {t.lower() for t in m.tags}}


def _listed(client, **params) -> set[str]:
    r = client.get("/api/memories/", {"namespace": NS, "page_size": 500, **params})
    assert r.status_code == 200, r.content
    return {row["id"] for row in r.json()["results"]}


@pytest.mark.parametrize("needle", NEEDLES)
def test_q_finds_what_the_facade_finds(client, needle):
    assert _listed(client, q=needle) == _reference(needle)
    facade = {m.pk for m in MemoryManager(project=NS).search(needle)}
    assert facade == _reference(needle)


@pytest.mark.parametrize(
    "tag", ["zürich", "ZÜRICH", "a,b", 'x"y', "[br]", "back\\slash", "über", "ελλάδα", "a", "b"]
)
def test_tag_finds_what_the_facade_finds(client, tag):
    assert _listed(client, tag=tag) == _tag_reference(tag)
    facade = {m.pk for m in MemoryManager(project=NS).filter_by_tag(tag)}
    assert facade == _tag_reference(tag)


def test_the_tricky_needles_find_something(client):
    """The corpus exercises every path (not a parity of empty sets)."""
    for needle in ("é", '"', "\\", "zür", "[br]", "a,b", "σίσυφ"):
        assert _reference(needle), needle
    assert _tag_reference("über")


@pytest.mark.parametrize("params", [{"q": "é"}, {"q": '"'}, {"q": "\\"}, {"tag": "zürich"}])
def test_a_tricky_search_is_paginated_in_sql_not_scanned_in_python(client, params, monkeypatch):
    def no_python_scan(*args, **kwargs):
        raise AssertionError("the list scanned rows in Python")

    monkeypatch.setattr(search, "matches", no_python_scan)
    with CaptureQueriesContext(connection) as queries:
        r = client.get("/api/memories/", {"namespace": NS, "page_size": 1, **params})
    assert r.status_code == 200 and len(r.json()["results"]) == 1
    reads = [q["sql"] for q in queries if q["sql"].startswith('SELECT "memories"."id"')]
    assert reads and all("LIMIT" in sql for sql in reads), reads


def test_lists_are_throttled_with_their_own_scope(client, settings):
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "list": "3/min"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    cache.clear()
    statuses = [
        client.get("/api/memories/", {"namespace": NS, "q": "é"}).status_code for _ in range(3)
    ]
    assert statuses == [200, 200, 200]
    assert client.get("/api/review-items/").status_code == 429
    assert client.get("/api/session-summaries/").status_code == 429
    assert client.get("/api/events/").status_code == 429
    # Other scopes keep their own budget.
    r = client.post("/api/memories/", {"project": NS, "key": "k", "value": "v"}, format="json")
    assert r.status_code == 201
