"""Authorization fails closed, from one source.

Every URL of the API (walked from its urlpatterns, not from the schema) answers
404 or 403 to a client without a grant on the namespace it names; every route
declares a rule for what it serves; a view or action that declares none refuses;
codenames are spelled once, in ``memoryapp.permissions``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.urls import URLPattern, get_resolver, reverse
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from memoryapp import MemoryManager
from memoryapp import permissions as perms
from memoryapp.api import permissions as api_permissions
from memoryapp.api.filters import MemoryFilter
from memoryapp.api.models import NamespaceGrant
from memoryapp.api.permissions import DeclaredRule, declared_rule
from memoryapp.api.serializers.memories import MemorySerializer
from memoryapp.api.testing import token_client
from memoryapp.api.views.base import MemoryAPIMixin, NamespacedViewSet, not_found
from memoryapp.compliance.desk import open_request
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    MemoryEvent,
    ReviewItem,
    SessionSummary,
    SubjectRequest,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "memoryapp" / "permissions.py"
# A permission codename of memoryapp, qualified or bare, as a string literal.
_VERBS = "view|add|change|delete|erase|wipe|export|purge"
_MODELS = "memory|sessionsummary|reviewitem|memoryevent|erasurereceipt|schemameta"
SPELLED = re.compile(rf"[\"'](?:memoryapp\.)?(?:{_VERBS})_(?:{_MODELS})[\"']")


def test_every_registered_codename_is_a_permission_django_knows():
    known = {
        f"{app}.{code}"
        for app, code in Permission.objects.values_list("content_type__app_label", "codename")
    }
    assert set(perms.ALL) <= known
    # The registry's codenames: the memory store's (ALL) and the compliance desk's.
    registered = set(perms.ALL) | set(perms.COMPLIANCE_PERMS)
    assert registered <= known
    named = {n: v for n, v in vars(api_permissions).items() if isinstance(v, api_permissions.Rule)}
    rules = list(named.values())
    assert len(rules) >= 21
    for rule in rules:
        assert set(rule.perms) | set(rule.see) <= registered, rule
    # The desk's five are registered with the others (not beside its views).
    desk = {"REQUEST_READ", "REQUEST_ADD", "REQUEST_CHANGE", "REQUEST_EXPORT", "REQUEST_ERASE"}
    assert desk <= set(named)


def test_codenames_are_spelled_only_in_the_registry():
    offenders = []
    for path in (ROOT / "memoryapp").rglob("*.py"):
        if path == REGISTRY or "migrations" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in SPELLED.finditer(text)]
    assert offenders == []


# ------------------------------------------------------- every URL, closed
NS, USER = "acme/web", "acme/alice"
BOUND = {"project": NS, "user": USER}
MESSAGES = [{"role": "user", "content": "I prefer vim"}]
RECORD = {"key_normalized": "roadmap", "title": "roadmap", "content": "a new roadmap"}

# Requests aimed at acme's rows, per (route name, method): (query, body) each.
SAMPLES: dict[tuple[str, str], list[tuple[dict, dict | None]]] = {
    ("memory-list", "get"): [({"namespace": NS}, None)],
    ("memory-list", "post"): [({}, {**BOUND, "key": "k", "value": "v"})],
    ("memory-detail", "delete"): [({}, None)],
    ("memory-erase", "post"): [({}, None)],
    ("session-summary-list", "get"): [({"namespace": NS}, None)],
    ("session-summary-list", "post"): [({}, {**BOUND, "session_id": "s1", "summary": "sum"})],
    ("review-item-list", "get"): [
        ({"namespace": NS}, None),
        ({"namespace": NS, "status": "pending"}, None),
    ],
    ("review-item-detail", "get"): [({}, None)],
    ("review-item-detail", "patch"): [({}, {"content": "a corrected text"})],
    ("review-item-approve", "post"): [({}, None)],
    ("review-item-reject", "post"): [({}, None)],
    ("review-item-purge", "post"): [({}, {"namespace": NS})],
    ("erasure-list", "post"): [
        ({}, {"namespace": NS}),
        ({}, {"namespace": NS, "dry_run": True}),
        ({}, {"ids": ["<memories>"]}),
        ({}, {"ids": ["<memories>"], "dry_run": True}),
        ({}, {"ids": ["<review-items>"]}),
        ({}, {"ids": ["<session-summaries>"], "dry_run": True}),
        ({}, {"ids": ["<session-summaries>"]}),
        ({}, {"ids": ["<memories>", "<review-items>"], "namespace": NS}),
        ({}, {"subject": USER}),
        ({}, {"everything": True}),
    ],
    ("erasure-detail", "get"): [({}, None)],
    ("erasure-list", "get"): [({}, None), ({"state": "complete"}, None)],
    ("erasure-lookup", "post"): [({}, {"subject": USER})],
    ("event-list", "get"): [
        ({"namespace": NS}, None),
        ({"memory_id": "<memories>"}, None),
        ({"memory_id": "<review-items>"}, None),
    ],
    ("recall", "post"): [({}, {**BOUND, "query": "roadmap"})],
    ("crystallize", "post"): [({}, {**BOUND, "messages": MESSAGES})],
    ("wipe-all", "post"): [({}, BOUND)],
    ("export", "get"): [({"namespace": NS}, None), ({"subject": USER}, None)],
    ("store-problems", "get"): [({"namespace": NS}, None)],
    # Agentao's store protocol (memoryapp.clients.store.HttpMemoryStore)
    ("memory-detail", "get"): [({}, None), ({"namespace": NS}, None)],
    ("memory-records", "post"): [
        ({}, {"namespace": NS, "scope": "project", "type": "note"} | RECORD),
        (
            {},
            {"namespace": "globex/web", "subject": USER, "scope": "user", "type": "note"} | RECORD,
        ),
        # A new row asking for an id an existing row of another table has.
        (
            {},
            {"namespace": NS, "scope": "project", "type": "note", "id": "<review-items>"} | RECORD,
        ),
    ],
    ("memory-clear", "post"): [({}, {"namespace": NS}), ({}, {"namespace": NS, "scope": "user"})],
    ("memory-change-version", "get"): [({"namespace": NS}, None)],
    ("session-summary-clear", "post"): [
        ({}, {"namespace": NS}),
        ({}, {"namespace": NS, "session_id": "s1"}),
    ],
    ("review-item-records", "post"): [
        ({}, {"namespace": NS, "scope": "project", "type": "decision"} | RECORD),
        ({}, {"namespace": NS, "scope": "project", "type": "note", "id": "<memories>"} | RECORD),
    ],
    ("review-item-set-status", "post"): [
        ({}, {"status": "rejected"}),
        ({"namespace": NS}, {"status": "approved"}),
    ],
    # The compliance desk: staff with the subject-request permissions only.
    ("subject-request-list", "get"): [({}, None), ({"status": "open"}, None)],
    ("subject-request-list", "post"): [({}, {"subject": USER, "right": "access"})],
    ("subject-request-detail", "get"): [({}, None)],
    ("subject-request-act", "post"): [({}, {"action": "answer", "text": "done"})],
    ("subject-request-export", "post"): [({}, None)],
    ("subject-request-erase", "post"): [({}, None)],
    ("subject-request-lookup", "post"): [({}, {"subject": USER})],
}
# Routes that answer with the caller's own rows only (the receipts of erasures it
# asked for): an outsider gets 200 and nothing, like a list naming no namespace.
OWN_ONLY = {("erasure-list", "get"), ("erasure-lookup", "post")}
# Which existing acme row a detail route's placeholder id names, by route basename.
DETAIL_ROWS = {
    "memory": "memories",
    "review-item": "review-items",
    "erasure": "erasures",
    "subject-request": "subject-requests",
}
# The OpenAPI document, its docs pages and the API root (links only): public on purpose.
PUBLIC = {"schema", "docs", "redoc", "root"}


def api_routes():
    """(name, pattern, view class, {method: action or None}) of every route of the API."""
    for pattern in get_resolver("memoryapp.api.urls").url_patterns:
        assert isinstance(pattern, URLPattern), pattern  # the API includes nothing
        cls = getattr(pattern.callback, "cls", None)
        if cls is None:  # a plain view: the JSON 404, or the public root
            assert pattern.callback is not_found or pattern.name in PUBLIC, pattern
            continue
        actions = getattr(pattern.callback, "actions", None)
        if actions is None:  # an APIView: the handlers it defines
            served = ("get", "post", "put", "patch", "delete")
            actions = {m: None for m in served if hasattr(cls, m)}
        # DRF adds "head" to a viewset's shared action map once a GET was served: the
        # walker asks HEAD with every GET itself, so it is no route of its own.
        yield pattern.name, pattern, cls, {m: a for m, a in actions.items() if m != "head"}


def test_every_route_declares_a_rule_for_everything_it_serves():
    seen = set()
    for name, _, cls, actions in api_routes():
        if name in PUBLIC:
            continue
        assert any(issubclass(p, DeclaredRule) for p in cls.permission_classes), name
        for method, action_name in actions.items():
            view = cls()
            view.action = action_name
            view.request = APIRequestFactory().generic(method.upper(), "/")
            rule = declared_rule(view)
            assert rule is not None, (name, method, action_name)
            # Every rule a view declares is one of the registry's (api/permissions.py).
            assert any(rule is v for v in vars(api_permissions).values()), (name, method)
            seen.add((name, method))
    assert seen == set(SAMPLES)  # a new route needs samples below, and gets checked


@pytest.fixture
def acme_rows():
    mm = MemoryManager(project=NS, user=USER)
    memory = mm.upsert("roadmap", "acme roadmap")
    summary = mm.save_session_summary("acme session summary")
    assert summary is not None
    (item,) = mm.crystallize_user_messages([{"role": "user", "content": "We decided to use Go."}])
    owner = token_client("acme-owner", ["acme/"], write=True, erase=True)
    receipt = owner.post("/api/erasures/", {"ids": [mm.upsert("tmp", "x").id]}, format="json")
    assert receipt.status_code in (201, 202), receipt.content
    request = open_request(subject=USER, right="erasure", actor="dpo")
    return {
        "subject-requests": request.id,
        "memories": memory.id,
        "review-items": item.id,
        "session-summaries": summary.id,
        "erasures": receipt.json()["id"],
    }


def _snapshot():
    return (
        {
            model.__name__: sorted(model.objects.values_list("pk", flat=True))
            for model in (Memory, SessionSummary, ReviewItem, MemoryEvent, ErasureReceipt)
        }
        | {"requests": sorted(SubjectRequest.objects.values_list("pk", "status", "updated_at"))}
        | {"deleted": sorted(Memory.objects.filter(deleted_at__isnull=False).values_list("pk"))}
    )


def _outsiders(django_user_model):
    """Clients holding a token (or a session) but no grant on acme's namespaces."""
    bare = token_client("no-grant", ["placeholder"], write=True, erase=True)
    NamespaceGrant.objects.filter(user=bare.user).delete()  # a token, no grant at all
    globex = token_client("globex-app", ["globex/"], write=True, erase=True)
    staff = APIClient()  # staff without any permission is no one special
    staff.force_authenticate(django_user_model.objects.create_user("clerk", is_staff=True))
    return {"no grant": bare, "globex/ grant": globex, "staff without perms": staff}


def _fill(value, rows):
    if isinstance(value, dict):
        return {k: _fill(v, rows) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, rows) for v in value]
    if isinstance(value, str) and value.startswith("<") and value.endswith(">"):
        return rows[value[1:-1]]
    return value


def test_a_client_without_a_grant_gets_404_or_403_on_every_url(acme_rows, django_user_model):
    clients = _outsiders(django_user_model)
    anonymous = APIClient()
    before = _snapshot()
    calls = 0
    for name, pattern, _, actions in api_routes():
        if name in PUBLIC:
            continue
        kwargs = {}
        if "pk" in pattern.pattern.regex.groupindex:
            (basename,) = [b for b in DETAIL_ROWS if name.startswith(f"{b}-")]
            kwargs["pk"] = acme_rows[DETAIL_ROWS[basename]]
        url = reverse(f"memoryapp_api:{name}", kwargs=kwargs)
        # OPTIONS describes the endpoint's shape to any authenticated user, never data:
        # the same answer for acme's row as for an id that does not exist.
        fake = reverse(f"memoryapp_api:{name}", kwargs={k: "0" * 16 for k in kwargs})
        for client in clients.values():
            r, twin = client.options(url), client.options(fake)
            assert (r.status_code, r.content) == (twin.status_code, twin.content), url
            assert b"acme" not in r.content, url
        for method in actions:
            methods = [method, "head"] if method == "get" else [method]
            for query, body in SAMPLES[(name, method)]:
                query, body = _fill(query, acme_rows), _fill(body, acme_rows)
                for verb in methods:
                    for who, client in [*clients.items(), ("anonymous", anonymous)]:
                        call = getattr(client, verb)
                        if verb in ("get", "head"):
                            r = call(url, query)
                        else:
                            r = call(f"{url}?{urlencode(query)}", body or {}, format="json")
                        allowed = (401, 403) if who == "anonymous" else (403, 404)
                        if who != "anonymous" and (name, method) in OWN_ONLY:
                            allowed = (200, 403, 404)
                            if r.status_code == 200 and verb != "head":
                                found = r.json()
                                assert not any(found.get(k) for k in ("results", "receipts"))
                        assert r.status_code in allowed, (who, verb, url, query, body, r.content)
                        assert b"acme" not in r.content, (who, verb, url)
                        calls += 1
    assert calls >= 4 * 30
    assert _snapshot() == before  # nothing of acme's was read, changed or erased


# Acme's rows by table, and the tables where the caller plants its own row with that id.
OTHER_TABLES = {
    "memories": (ReviewItem, SessionSummary),
    "review-items": (Memory, SessionSummary),
    "session-summaries": (Memory, ReviewItem),
}


def _plant(model, namespace: str, pk: str) -> None:
    """The caller's own row with ``pk``: an id that, in another table, is acme's."""
    if model is SessionSummary:
        SessionSummary.objects.create(
            id=pk, namespace=namespace, session_id="s", summary_text="planted"
        )
        return
    fields = {"scope": "project", "type": "note", "title": "planted", "content": "planted"}
    model.objects.create(id=pk, namespace=namespace, key_normalized=f"planted {pk}", **fields)


def _acme_state():
    """Every acme row and event, with what an erasure, a delete or a decision changes."""
    acme = {"namespace__startswith": "acme/"}
    return {
        "memories": sorted(
            Memory.objects.filter(**acme).values_list("pk", "namespace", "content", "deleted_at")
        ),
        "summaries": sorted(SessionSummary.objects.filter(**acme).values_list("pk", "namespace")),
        "review": sorted(ReviewItem.objects.filter(**acme).values_list("pk", "status")),
        "events": sorted(MemoryEvent.objects.filter(**acme).values_list("pk", "memory_id")),
    }


def _retarget(value):
    """A sample aimed at acme's namespaces, aimed at the caller's own instead."""
    if isinstance(value, dict):
        return {k: _retarget(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_retarget(v) for v in value]
    return (
        {NS: "globex/web", USER: "globex/bob"}.get(value, value)
        if isinstance(value, str)
        else value
    )


def _takes_an_id(sample) -> bool:
    return "<" in repr(sample)


def test_acme_ids_planted_in_the_callers_other_tables_reach_only_the_callers_rows(acme_rows):
    """Every id-taking operation, with ids that exist in another table of another tenant.

    Globex (may write and erase in ``globex/``) holds, in its own namespace, rows
    whose ids are acme's rows' ids in the *other* tables — as a client that chose
    them, or an innocent collision, would. Every route taking an id (detail routes,
    erasures by ids, their dry runs, events by memory id, the store's records) is
    called with each of acme's ids, aimed at globex's own namespace: whatever it
    answers, nothing of acme's is shown, changed or erased.
    """
    caller = token_client("globex-app", ["globex/"], write=True, erase=True)
    for basename, models in OTHER_TABLES.items():
        for model in models:
            _plant(model, "globex/web", acme_rows[basename])
    before = _acme_state()
    calls = 0
    for name, pattern, _, actions in api_routes():
        if name in PUBLIC:
            continue
        detail = "pk" in pattern.pattern.regex.groupindex
        for method in actions:
            samples = SAMPLES[(name, method)]
            for query, body in samples if detail else [s for s in samples if _takes_an_id(s)]:
                for acme_id in OTHER_TABLES:  # every acme id, in every id-taking slot
                    rows = dict.fromkeys(acme_rows, acme_rows[acme_id])
                    filled = _retarget(_fill(query, rows)), _retarget(_fill(body, rows))
                    url = reverse(
                        f"memoryapp_api:{name}", kwargs={"pk": rows[acme_id]} if detail else {}
                    )
                    if method == "get":
                        r = caller.get(url, filled[0])
                    else:
                        r = getattr(caller, method)(
                            f"{url}?{urlencode(filled[0])}", filled[1] or {}, format="json"
                        )
                    assert r.status_code < 500, (name, method, filled, r.content)
                    assert b"acme" not in r.content, (name, method, filled, r.content)
                    calls += 1
    assert calls >= 3 * 15
    assert _acme_state() == before  # acme's rows and events: neither read, changed nor erased


def test_requests_naming_no_namespace_answer_an_outsider_with_nothing(acme_rows, django_user_model):
    open_request(subject=USER, right="access", actor="dpo")  # a lookup lists it to staff only
    for client in _outsiders(django_user_model).values():
        for path in ("/api/memories/", "/api/session-summaries/", "/api/review-items/"):
            r = client.get(path)
            assert (r.status_code, r.json()["count"]) == (200, 0), path
        assert client.get("/api/events/").json()["count"] == 0
        # Receipts: only those of the caller's own erasures (acme's owner made one).
        assert client.get("/api/erasures/").json()["count"] == 0
        r = client.post("/api/erasures/lookup/", {"subject": USER}, format="json")
        assert r.json() == {"receipts": [], "exports": [], "requests": []}
        # Purging "everything I may" purges none of acme's items: nothing, or 403 without
        # an erase right anywhere.
        r = client.post("/api/review-items/purge/", {}, format="json")
        assert r.status_code == 403 or r.json() == {"purged": 0, "receipts": []}
    assert ReviewItem.objects.filter(namespace=NS).exists()


def test_the_schema_and_its_docs_stay_public(client):
    assert client.get("/api/schema/", {"format": "json"}).status_code == 200
    assert client.get("/api/docs/").status_code == 200


# ------------------------------------------------ a view that forgets refuses
@pytest.fixture
def people(django_user_model):
    root = django_user_model.objects.create_superuser("root", password="x")
    return {"superuser": root, "acme grantee": token_client("acme-rw", ["acme/"], write=True).user}


def _call(view, user, method="get", data=None):
    factory = APIRequestFactory()
    request = getattr(factory, method)("/x/", data or {}, format="json")
    force_authenticate(request, user=user)
    return view(request)


class _Memories(NamespacedViewSet):
    """A new viewset that declares a rule for ``list`` only."""

    serializer_class = MemorySerializer
    rules = {"list": api_permissions.MEMORY_READ}

    def base_queryset(self):
        return Memory.objects.live().order_by("id")

    def list(self, request):
        return Response([m.id for m in self.get_queryset()])

    @action(detail=False, methods=["get"])
    def everything(self, request):  # a new action without a rule
        return Response([m.id for m in Memory.objects.all()])

    def retrieve(self, request, pk=None):  # a new route without a rule
        return Response({"id": self.get_object().id})


def test_a_new_action_without_a_rule_refuses_even_a_superuser(people):
    memory = MemoryManager(project=NS).upsert("k", "acme roadmap")
    for user in people.values():
        assert _call(_Memories.as_view({"get": "list"}), user).data == [memory.id]
        assert _call(_Memories.as_view({"get": "everything"}), user).status_code == 403
        detail = _Memories.as_view({"get": "retrieve"})
        factory = APIRequestFactory()
        request = factory.get("/x/")
        force_authenticate(request, user=user)
        assert detail(request, pk=memory.id).status_code == 403


def test_a_view_that_checks_its_input_without_declaring_a_rule_refuses(people):
    class Unruled(MemoryAPIMixin, APIView):
        def post(self, request):
            self.check_target_permissions(request, api_permissions.in_namespaces(NS))
            return Response({"secret": "everything"})

    class Unchecked(Unruled):  # someone swapped the permission class for a laxer one
        rule = api_permissions.MEMORY_READ
        permission_classes = [IsAuthenticated]

    class Declared(Unruled):
        rule = api_permissions.MEMORY_READ

    for user in people.values():
        assert _call(Unruled.as_view(), user, "post").status_code == 403
        assert _call(Unchecked.as_view(), user, "post").status_code == 403
        assert _call(Declared.as_view(), user, "post").status_code == 200
    outsider = token_client("globex-app", ["globex/"]).user
    assert _call(Declared.as_view(), outsider, "post").status_code == 404


def test_rows_without_a_namespace_are_refused_as_objects(people):
    view = _Memories()
    view.action = "list"
    request = APIRequestFactory().get("/x/")
    assert not DeclaredRule().has_object_permission(request, view, object())


def test_filters_only_filter():
    """The filter sets narrow by namespace without asking who asks (no request at all)."""
    MemoryManager(project="globex/web").upsert("k", "globex roadmap")
    rows = MemoryFilter({"namespace": "globex/web"}, queryset=Memory.objects.all()).qs
    assert [m.namespace for m in rows] == ["globex/web"]
