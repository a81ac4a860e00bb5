"""Namespace matching is exact and case-sensitive on every vendor (prefix grants included).

SQLite's ``LIKE`` folds ASCII case, so a prefix grant compiled to ``__startswith``
let a client granted ``acme/`` read ``ACME/…`` and ``Acme/…`` and purge their review
items. These tests generate namespaces that differ from a granted prefix only by
case, by a character ``LIKE`` treats specially (``%``, ``_``, ``\\``), by a non-ASCII
case pair or by the missing ``/``, and prove that no foreign row is ever returned or
changed — first for the filter itself, then through every list, search, purge and
export endpoint of the API.
"""

from __future__ import annotations

import random

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.api.throttles import MemoryScopedThrottle
from memoryapp.db.lookups import prefix_q
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.validation import check_namespace

pytestmark = pytest.mark.django_db

# Characters chosen to trip a vendor's matching: ASCII case pairs, LIKE's
# wildcards and escape, the four non-ASCII letters Python's re folds to ASCII,
# a non-ASCII case pair and the path separator.
ALPHABET = "aAcCmMeE%_\\/éÉİıſK-."


def _valid(namespace: str) -> bool:
    try:
        return check_namespace(namespace) == namespace
    except MemoryValidationError:
        return False


def _variants(rng: random.Random, prefix: str, count: int) -> set[str]:
    """Valid namespaces close to ``prefix``: case flips, a character swapped, no slash."""
    out = {ns for ns in (prefix.upper() + "web", prefix.title() + "web", prefix.rstrip("/"))}
    out = {ns for ns in out if _valid(ns)}
    while len(out) < count:
        chars = list(prefix)
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(chars))
            chars[i] = rng.choice([chars[i].swapcase(), rng.choice(ALPHABET)])
        candidate = "".join(chars) + rng.choice(["web", "x/y", "a"])
        if _valid(candidate):
            out.add(candidate)
    return out


def test_prefix_filter_equals_python_startswith_on_random_namespaces():
    rng = random.Random(20261202)
    prefixes = ["acme/", "ac_e/", "a%c/", "b\\_/", "é/", "K/"]
    namespaces = {p + "web" for p in prefixes}
    for p in prefixes:
        namespaces |= _variants(rng, p, 12)
    randoms = ("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6))) for _ in range(60))
    namespaces |= {ns for ns in randoms if _valid(ns)}
    for ns in sorted(namespaces):
        MemoryManager(project=ns).upsert("k", "row of " + ns)
    stored = set(Memory.objects.values_list("namespace", flat=True))
    assert stored == namespaces
    for prefix in [*prefixes, *rng.sample(sorted(namespaces), 20)]:
        got = set(
            Memory.objects.filter(prefix_q("namespace", prefix)).values_list("namespace", flat=True)
        )
        assert got == {ns for ns in namespaces if ns.startswith(prefix)}, prefix


GRANT = "acme/"


@pytest.fixture
def foreign():
    """Rows of every kind in namespaces that only look like ``acme/…``; their ids."""
    rng = random.Random(7)
    victims = sorted(
        {"ACME/web", "Acme/web", "aCmE/web", "acme", "acmex/web", "acm%/web", "acm_/web", "ACME"}
        | {ns for ns in _variants(rng, GRANT, 16) if not ns.startswith(GRANT)}
    )
    ids: dict[str, str] = {}
    for ns in victims:
        mm = MemoryManager(project=ns, user=ns + "-bob")
        ids[ns] = mm.upsert("roadmap", f"secret roadmap of {ns}").id
        mm.upsert("editor", "emacs", ["preference"])
        gone = mm.upsert("old", f"old plan of {ns}")
        mm.delete(gone.id)
        mm.save_session_summary(f"session summary of {ns}")
        mm.crystallize_user_messages([{"role": "user", "content": "We decided to use Go."}])
    assert ReviewItem.objects.filter(namespace__in=victims).count() == len(victims)
    return {"namespaces": victims, "ids": ids}


def _state():
    """Every row of the four personal-data tables, with what a write could change."""
    return {
        "memories": sorted(
            Memory.objects.values_list("pk", "namespace", "content", "deleted_at", "updated_at")
        ),
        "summaries": sorted(SessionSummary.objects.values_list("pk", "namespace", "summary_text")),
        "review": sorted(ReviewItem.objects.values_list("pk", "namespace", "status")),
        "events": MemoryEvent.objects.count(),
    }


def _strings(value):
    """Every string in a decoded JSON document."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _assert_clean(response, victims) -> None:
    strings = set(_strings(response.json()))
    for ns in victims:
        leaked = {s for s in strings if s in (ns, ns + "-bob") or f"of {ns}" in s}
        assert not leaked, (response.request["PATH_INFO"], ns, leaked)


def test_a_prefix_grant_never_reaches_a_namespace_that_only_looks_alike(foreign):
    own = MemoryManager(project="acme/web", user="acme/alice")
    own.upsert("roadmap", "our roadmap")
    own.save_session_summary("our summary")
    own.crystallize_user_messages([{"role": "user", "content": "We decided to use Rust."}])
    client = token_client("acme-app", [GRANT], write=True, erase=True)
    victims = foreign["namespaces"]
    before = _state()

    lists = [
        "/api/memories/",
        "/api/memories/?q=roadmap",
        "/api/memories/?q=secret",
        "/api/memories/?tag=preference",
        "/api/memories/?scope=user",
        "/api/memories/?key_normalized=roadmap",
        "/api/session-summaries/",
        "/api/review-items/",
        "/api/review-items/?status=pending",
        "/api/events/",
    ]
    lists += [f"/api/events/?memory_id={mid}" for mid in foreign["ids"].values()]
    for path in lists:
        r = client.get(path)
        assert r.status_code in (200, 404), (path, r.status_code)
        _assert_clean(r, victims)
    r = client.get("/api/memories/", {"q": "roadmap"})
    assert {row["namespace"] for row in r.json()["results"]} == {"acme/web"}

    for ns in victims:
        for path, params in (
            ("/api/memories/", {"namespace": ns}),
            ("/api/session-summaries/", {"namespace": ns}),
            ("/api/review-items/", {"namespace": ns}),
            ("/api/events/", {"namespace": ns}),
            ("/api/exports/", {"namespace": ns}),
            ("/api/exports/", {"subject": ns + "-bob"}),
        ):
            r = client.get(path, params)
            assert r.status_code == 404, (path, ns, r.status_code)
            _assert_clean(r, victims)
        for body in (
            {"project": ns, "query": "roadmap"},
            {"project": "acme/web", "user": ns + "-bob", "query": "roadmap"},
        ):
            assert client.post("/api/recall/", body, format="json").status_code == 404
        assert client.get(f"/api/memories/{foreign['ids'][ns]}/").status_code == 404

    # Purges and erasures without a namespace act on the granted namespaces only.
    r = client.post("/api/review-items/purge/", {}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["purged"] == 1  # acme/web's own item
    after = _state()
    owners = {*victims, *(ns + "-bob" for ns in victims)}
    assert [row for row in after["memories"] if row[1] in owners] == [
        row for row in before["memories"] if row[1] in owners
    ]
    assert [row for row in after["summaries"] if row[1] in victims] == [
        row for row in before["summaries"] if row[1] in victims
    ]
    assert [row for row in after["review"] if row[1] in victims] == [
        row for row in before["review"] if row[1] in victims
    ]
    for ns in victims:
        MemoryScopedThrottle.cache.clear()  # 60 erasures a minute is the client's default rate
        for body in ({"namespace": ns}, {"subject": ns + "-bob"}, {"ids": [foreign["ids"][ns]]}):
            assert client.post("/api/erasures/", body, format="json").status_code == 404
    assert Memory.objects.filter(namespace__in=owners).count() == 3 * len(victims)


def test_an_exact_grant_is_exact(foreign):
    client = token_client("acme-exact", ["acme"], write=True, erase=True)
    r = client.get("/api/memories/")
    assert {row["namespace"] for row in r.json()["results"]} == {"acme"}
    for ns in foreign["namespaces"]:
        if ns != "acme":
            assert client.get("/api/memories/", {"namespace": ns}).status_code == 404
