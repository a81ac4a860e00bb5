"""One vocabulary: ``namespace`` and ``subject`` everywhere; ``project``/``user`` deprecated.

Every call bound to a namespace takes ``namespace`` and ``subject`` (the words of the
lists, the store calls and the admin) and still takes the first version's ``project``
and ``user`` as deprecated aliases. Both spellings of one field in one body are refused
(400 naming both); lists and the store-problems query take only the canonical names,
and a misspelt filter is refused, never ignored.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.clients.memory import MemoryClient
from memoryapp.clients.store import HttpMemoryStore
from memoryapp.models import Memory, ReviewItem, SessionSummary

pytestmark = pytest.mark.django_db

NS, SUBJECT = "acme/web", "acme/alice"
MESSAGES = [{"role": "user", "content": "I prefer tabs over spaces."}]

# (method, path, the body or query besides the namespaces)
BOUND_CALLS = {
    "save a memory": ("post", "/api/memories/", {"key": "editor", "value": "vim"}),
    "recall": ("post", "/api/recall/", {"query": "editor"}),
    "save a summary": ("post", "/api/session-summaries/", {"summary": "we chose vim"}),
    "crystallize": ("post", "/api/crystallize/", {"messages": MESSAGES}),
    "wipe": ("post", "/api/wipe-all/", {}),
}
LISTS = [
    "/api/memories/",
    "/api/session-summaries/",
    "/api/review-items/",
    "/api/events/",
]


def call(client, name: str, **names):
    method, path, extra = BOUND_CALLS[name]
    data = {**extra, **names}
    if method == "get":
        return client.get(path, data)
    return client.post(path, data, format="json")


# What must agree between two equal calls (ids, times, scores and fold counts may not).
ESSENCE = {
    "save a memory": lambda b: (b["id"], b["namespace"], b["scope"], b["content"]),
    "recall": lambda b: [c["memory_id"] for c in b["candidates"]],
    "save a summary": lambda b: (b["namespace"], b["subject"], b["summary_text"]),
    "crystallize": lambda b: [(i["id"], i["namespace"], i["subject"]) for i in b["items"]],
    "wipe": lambda b: None,  # the second wipe finds nothing left to clear
}


# ------------------------------------------------------------ both spellings
@pytest.mark.parametrize("name", sorted(BOUND_CALLS))
def test_the_canonical_names_and_the_aliases_give_the_same_answer(acme, name):
    MemoryManager(project=NS, user=SUBJECT).upsert("editor", "emacs", ["preference"])
    new = call(acme, name, namespace=NS, subject=SUBJECT)
    old = call(acme, name, project=NS, user=SUBJECT)
    # The second save updates the memory the first created: both name the same row.
    expected = (201, 200) if name == "save a memory" else (new.status_code, new.status_code)
    assert (new.status_code, old.status_code) == expected, (new.content, old.content)
    assert new.status_code in (200, 201), new.content
    assert ESSENCE[name](new.json()) == ESSENCE[name](old.json())
    assert ESSENCE[name](new.json()) or name == "wipe"  # something was compared


def test_a_memory_saved_with_subject_lands_in_the_user_namespace(acme):
    body = {"namespace": NS, "subject": SUBJECT, "key": "home city", "value": "Lisbon"}
    r = acme.post("/api/memories/", {**body, "scope": "user"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["namespace"] == SUBJECT and r.json()["scope"] == "user"
    project = acme.post(
        "/api/memories/", {"namespace": NS, "key": "build", "value": "make"}, format="json"
    )
    assert project.status_code == 201 and project.json()["namespace"] == NS


def test_summaries_and_review_items_record_the_subject_given_either_way(acme):
    for names in ({"namespace": NS, "subject": SUBJECT}, {"project": NS, "user": SUBJECT}):
        assert call(acme, "save a summary", **names).status_code == 201
        assert call(acme, "crystallize", **names).status_code == 200
    assert SessionSummary.objects.count() == 2
    assert set(SessionSummary.objects.values_list("namespace", "subject")) == {(NS, SUBJECT)}
    assert set(ReviewItem.objects.values_list("namespace", "subject")) == {(NS, SUBJECT)}


@pytest.mark.parametrize("name", sorted(BOUND_CALLS))
def test_another_tenants_namespace_is_hidden_under_either_name(acme, name):
    for names in ({"namespace": "globex/web"}, {"project": "globex/web"}):
        assert call(acme, name, **names).status_code == 404
    hidden_subject = "globex/bob"
    for names in (
        {"namespace": NS, "subject": hidden_subject},
        {"project": NS, "user": hidden_subject},
    ):
        assert call(acme, name, **names).status_code == 404


@pytest.mark.parametrize("name", sorted(BOUND_CALLS))
def test_a_namespace_is_required_in_one_spelling(acme, name):
    r = call(acme, name, subject=SUBJECT)
    assert r.status_code == 400
    assert r.json() == {"namespace": ["This field is required."]}


def test_store_problems_take_the_canonical_names_only(acme):
    r = acme.get("/api/store-problems/", {"namespace": NS, "subject": SUBJECT})
    assert r.status_code == 200 and r.json() == {"problems": []}
    assert acme.get("/api/store-problems/", {"namespace": NS, "subject": ""}).status_code == 200
    # '' is not among acme's grants: an omitted namespace is ''
    assert acme.get("/api/store-problems/", {"subject": SUBJECT}).status_code == 404
    assert acme.get("/api/store-problems/", {"namespace": "globex/web"}).status_code == 404
    for alias in ("project", "user"):
        r = acme.get("/api/store-problems/", {"namespace": NS, alias: NS})
        assert r.status_code == 400 and list(r.json()) == [alias]


def test_an_invalid_value_is_reported_under_the_name_given(acme):
    for name in ("namespace", "project"):
        body = {name: "acme//web", "key": "k", "value": "v"}
        r = acme.post("/api/memories/", body, format="json")
        assert r.status_code == 400 and list(r.json()) == [name], r.content
    assert not Memory.objects.exists()


# ----------------------------------------------------------------- conflicts
@pytest.mark.parametrize("name", sorted(BOUND_CALLS))
@pytest.mark.parametrize("alias", ["acme/other", NS])  # different, and the same value
def test_both_spellings_in_one_body_are_refused(acme, name, alias):
    r = call(acme, name, namespace=NS, project=alias)
    assert r.status_code == 400, r.content
    message = "Give `namespace` or its deprecated alias `project`, not both."
    assert r.json() == {"namespace": [message]}

    r = call(acme, name, namespace=NS, subject=SUBJECT, user=alias)
    assert r.status_code == 400, r.content
    assert r.json() == {"subject": ["Give `subject` or its deprecated alias `user`, not both."]}
    assert not Memory.objects.filter(key_normalized="editor").exists()
    assert not SessionSummary.objects.exists() and not ReviewItem.objects.exists()


def test_a_conflict_is_refused_before_any_namespace_is_checked(acme):
    """A hidden namespace in the alias is a 400 for the conflict, not a 404 that probes."""
    r = call(acme, "save a memory", namespace=NS, project="globex/web")
    assert r.status_code == 400 and list(r.json()) == ["namespace"]


def test_an_empty_user_means_no_user_scope_under_either_name(acme):
    for name in ("subject", "user"):
        body = {"namespace": NS, name: "", "key": "editor", "value": "vim", "scope": "user"}
        r = acme.post("/api/memories/", body, format="json")
        assert r.status_code in (200, 201) and r.json()["namespace"] == NS, r.content


# --------------------------------------------------------------------- lists
@pytest.mark.parametrize("path", LISTS)
def test_lists_filter_by_namespace_and_subject(acme, path):
    mm = MemoryManager(project=NS, user=SUBJECT)
    mm.upsert("editor", "vim", ["preference"])  # user scope: in acme/alice
    mm.upsert("build", "make test")
    mm.save_session_summary("we chose vim")
    mm.crystallize_user_messages(MESSAGES)
    MemoryManager(project="acme/api").upsert("other", "elsewhere")
    r = acme.get(path, {"namespace": NS})
    assert r.status_code == 200, r.content
    rows = r.json()["results"]
    assert rows and {row["namespace"] for row in rows} == {NS}
    r = acme.get(path, {"subject": SUBJECT})
    assert r.status_code == 200 and r.json()["results"], r.content


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("alias", ["project", "user"])
def test_lists_refuse_the_write_aliases_rather_than_widen(acme, path, alias):
    MemoryManager(project="acme/api").upsert("other", "elsewhere")
    r = acme.get(path, {alias: NS})
    assert r.status_code == 400
    assert list(r.json()) == [alias] and "namespace" in r.json()[alias][0]


def test_clear_takes_namespace_and_refuses_a_body_without_it(acme):
    MemoryManager(project=NS).upsert("build", "make test")
    r = acme.post("/api/memories/clear/", {"project": NS}, format="json")
    assert r.status_code == 400 and "namespace" in r.json()
    assert Memory.objects.live().count() == 1
    r = acme.post("/api/memories/clear/", {"namespace": NS}, format="json")
    assert r.status_code == 200 and r.json() == {"cleared": 1}


# -------------------------------------------------------------------- schema
def test_the_schema_marks_the_aliases_deprecated(acme):
    schema = acme.get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    bound = [
        "MemoryWriteRequest",
        "RecallInputRequest",
        "SessionSummaryWriteRequest",
        "CrystallizeInputRequest",
        "BoundInputRequest",
    ]
    one_at_most = {
        "anyOf": [{"required": ["namespace", "project"]}, {"required": ["subject", "user"]}]
    }
    for name in bound:
        props = components[name]["properties"]
        assert props["project"].get("deprecated") is True, name
        assert props["user"].get("deprecated") is True, name
        assert "deprecated" not in props["namespace"] and "deprecated" not in props["subject"]
        assert "Deprecated alias of `namespace`" in props["project"]["description"]
        assert components[name]["anyOf"] == [
            {"required": ["namespace"]},
            {"required": ["project"]},
        ]
        assert components[name]["not"] == one_at_most
        assert "project" not in components[name].get("required", [])
    wipe = schema["paths"]["/api/wipe-all/"]["post"]["requestBody"]
    assert wipe["required"] is True
    params = {p["name"]: p for p in schema["paths"]["/api/store-problems/"]["get"]["parameters"]}
    assert set(params) == {"namespace", "subject"}
    assert params["namespace"]["schema"]["default"] == ""


# ------------------------------------------------------------------- clients
class Recording(httpx.HTTPTransport):
    """A real transport that keeps the JSON bodies and query strings it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.sent.append(request)
        return super().handle_request(request)


def _sent_names(transport: Recording) -> set[str]:
    names: set[str] = set()
    for request in transport.sent:
        names.update(request.url.params.keys())
        if request.content:
            body = json.loads(request.content)
            if isinstance(body, dict):
                names.update(body)
    return names


@pytest.mark.django_db(transaction=True)
def test_the_clients_speak_the_new_names_to_a_live_server(live_server):
    acme = token_client("vocabulary-app", ["acme/"], write=True)
    transport = Recording()
    with MemoryClient(
        live_server.url, acme.token, project=NS, user=SUBJECT, transport=transport
    ) as client:
        client.save_memory("home city", "Lisbon", scope="user")
        client.save_memory("build", "make test")
        assert {m.key_normalized for m in client.list_memories()} == {"home_city", "build"}
        assert client.recall("home city")
        client.save_session_summary("we chose vim")
        client.crystallize_user_messages(MESSAGES)
    store_transport = Recording()
    store = HttpMemoryStore(
        live_server.url, acme.token, NS, subject=SUBJECT, transport=store_transport
    )
    record = SimpleNamespace(
        session_id="s-9", summary_text="a summary", tokens_before=10, messages_summarized=2
    )
    store.save_session_summary(record)

    assert Memory.objects.get(key_normalized="home_city").namespace == SUBJECT
    assert Memory.objects.get(key_normalized="build").namespace == NS
    assert SessionSummary.objects.filter(namespace=NS, subject=SUBJECT).count() == 2
    assert ReviewItem.objects.filter(namespace=NS, subject=SUBJECT).exists()
    for t in (transport, store_transport):
        sent = _sent_names(t)
        assert "namespace" in sent and "subject" in sent
        assert not sent & {"project", "user"}, sent
