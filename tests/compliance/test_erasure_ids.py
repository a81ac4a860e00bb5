"""Erasure by id acts on (table, namespace, id) rows that were each authorised (issue #26).

Ids are unique per table (and, on PostgreSQL, per table *and* namespace), never
across tables: a memory of globex and a review item of acme may share an id. An
erasure by ids resolves each id to its rows once, authorises those, and deletes
exactly them — through the API, the admin, the command line and Python alike.
Also here: a subject's erasure or export by a client stays within its grants
(pseudonymised rows included), exports list only the client's own receipts, and
the store endpoints choose every new row's id.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import ErasureRequestError, erase, preview
from memoryapp.compliance.selection import MEMORIES, REVIEW, ROW_MODELS, SUMMARIES
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._admin_support import COMPLIANCE_PERMS, act, client_for, make_staff
from tests._admin_support import MEMORIES as ADMIN_MEMORIES
from tests._admin_support import REVIEW as ADMIN_REVIEW

pytestmark = pytest.mark.django_db

ACME, GLOBEX = "acme/web", "globex/web"
VICTIM = "GLOBEX VICTIM"


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


def plant(table: str, namespace: str, pk: str, *, subject: str | None = None):
    """A row of ``table`` in ``namespace`` with id ``pk`` (another table's id, on purpose)."""
    if table in (MEMORIES, REVIEW):  # the same columns matter in both
        return ROW_MODELS[table].objects.create(
            id=pk,
            namespace=namespace,
            subject=subject,
            scope="project",
            type="note",
            key_normalized=f"planted {pk}",
            title="decoy",
            content="decoy",
        )
    return SessionSummary.objects.create(
        id=pk, namespace=namespace, subject=subject, session_id="s", summary_text="decoy"
    )


@pytest.fixture
def victim():
    """Globex's memory (written through the API, as in the repro) and its id."""
    globex = token_client("globex-app", ["globex/"], write=True, erase=True)
    r = globex.post(
        "/api/memories/",
        {"project": GLOBEX, "key": "victim row", "value": VICTIM},
        format="json",
    )
    assert r.status_code == 201, r.content
    gid = r.json()["id"]
    assert MemoryEvent.objects.filter(memory_id=gid, namespace=GLOBEX).exists()
    return gid


def globex_intact(gid: str) -> bool:
    return (
        Memory.objects.filter(pk=gid, namespace=GLOBEX, content=VICTIM).exists()
        and MemoryEvent.objects.filter(memory_id=gid, namespace=GLOBEX).exists()
    )


# ------------------------------------------------------------------ the API
def test_the_repro_a_planted_review_item_does_not_reach_globex_memory(acme, victim):
    plant(REVIEW, ACME, victim)  # acme's own review item, with globex's memory id
    dry = acme.post("/api/erasures/", {"ids": [victim], "dry_run": True}, format="json")
    assert dry.status_code == 200, dry.content
    assert dry.json()["counts"][MEMORIES] == 0 and dry.json()["counts"][REVIEW] == 1
    r = acme.post("/api/erasures/", {"ids": [victim]}, format="json")
    assert r.status_code == 201, r.content
    receipt = r.json()
    assert receipt["counts"][MEMORIES] == 0 and receipt["counts"][REVIEW] == 1
    assert receipt["erased_ids"] == {REVIEW: [victim]}
    assert globex_intact(victim)
    assert not ReviewItem.objects.filter(pk=victim).exists()


@pytest.mark.parametrize("table", [REVIEW, SUMMARIES])
def test_a_foreign_row_sharing_the_id_of_the_clients_row_is_never_counted_or_erased(
    acme, victim, table
):
    # The other way round: acme's row in one table, globex's in another, one id.
    plant(table, ACME, victim)
    before = Memory.objects.filter(namespace=GLOBEX).count()
    r = acme.post("/api/erasures/", {"ids": [victim], "namespace": ACME}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["counts"][MEMORIES] == 0 and r.json()["counts"][table] == 1
    assert globex_intact(victim) and Memory.objects.filter(namespace=GLOBEX).count() == before


def test_an_id_only_in_another_tenants_table_is_unknown(acme, victim):
    r = acme.post("/api/erasures/", {"ids": [victim], "dry_run": True}, format="json")
    assert r.status_code == 404
    assert acme.post("/api/erasures/", {"ids": [victim]}, format="json").status_code == 404
    assert globex_intact(victim)


def test_erasing_one_memory_leaves_another_tenants_rows_with_its_id(acme):
    mine = MemoryManager(project=ACME).upsert("ours", "acme row")
    foreign_item = plant(REVIEW, GLOBEX, mine.id)
    foreign_summary = plant(SUMMARIES, GLOBEX, mine.id)
    r = acme.post(f"/api/memories/{mine.id}/erase/")
    assert r.status_code == 201, r.content
    counts = r.json()["counts"]
    assert (counts[MEMORIES], counts[REVIEW], counts[SUMMARIES]) == (1, 0, 0)
    assert not Memory.objects.filter(pk=mine.id).exists()
    assert ReviewItem.objects.filter(pk=foreign_item.pk, namespace=GLOBEX).exists()
    assert SessionSummary.objects.filter(pk=foreign_summary.pk, namespace=GLOBEX).exists()


def test_the_worker_erases_exactly_the_authorised_rows(acme, victim, settings):
    # Deferred to the worker: the request (its rows) is sealed into the receipt and
    # read back there; the worker's deletion must not widen it either.
    from memoryapp.compliance import engine

    settings.MEMORYAPP_ERASURE_WORKER = True
    plant(REVIEW, ACME, victim)
    r = acme.post("/api/erasures/", {"ids": [victim]}, format="json")
    assert r.status_code == 202, r.content
    engine.retry(r.json()["id"])
    assert globex_intact(victim)
    assert not ReviewItem.objects.filter(pk=victim).exists()


# ------------------------------------------------------------- Python, CLI
def test_python_an_id_in_two_namespaces_is_ambiguous_until_a_namespace_says_which(victim):
    plant(REVIEW, ACME, victim)
    with pytest.raises(ErasureRequestError, match="2 namespaces"):
        erase(ids=[victim])
    with pytest.raises(ErasureRequestError, match="2 namespaces"):
        preview(ids=[victim])
    assert globex_intact(victim) and ReviewItem.objects.filter(pk=victim).exists()
    receipt = erase(ids=[victim], namespace=ACME)
    assert receipt.counts[MEMORIES] == 0 and receipt.counts[REVIEW] == 1
    assert globex_intact(victim)
    receipt = erase(ids=[victim])  # now only globex's memory holds it: no ambiguity
    assert receipt.counts[MEMORIES] == 1 and receipt.counts[REVIEW] == 0
    assert not Memory.objects.filter(pk=victim).exists()
    assert not MemoryEvent.objects.filter(memory_id=victim).exists()


def test_python_rows_of_one_namespace_sharing_an_id_are_all_erased(victim):
    plant(REVIEW, GLOBEX, victim)
    receipt = erase(ids=[victim])
    assert receipt.counts[MEMORIES] == 1 and receipt.counts[REVIEW] == 1
    assert receipt.criteria["ids_requested"] == 1


def test_python_exact_rows_touch_nothing_else(victim):
    plant(REVIEW, ACME, victim)
    receipt = erase(rows={REVIEW: [(ACME, victim)]})
    assert receipt.counts[REVIEW] == 1 and receipt.counts[MEMORIES] == 0
    assert globex_intact(victim)
    with pytest.raises(ErasureRequestError):
        erase(rows={"django_admin_log": [(ACME, victim)]})
    with pytest.raises(ErasureRequestError):
        erase(rows={REVIEW: [(ACME, 5)]})


def cli(*args) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_cli_erase_by_id_refuses_an_ambiguous_id_and_honours_namespace(victim):
    plant(REVIEW, ACME, victim)
    with pytest.raises(CommandError, match="2 namespaces"):
        cli("erase", "--id", victim, "--yes")
    with pytest.raises(CommandError, match="2 namespaces"):
        cli("erase", "--id", victim, "--dry-run")
    assert globex_intact(victim)
    cli("erase", "--id", victim, "--namespace", ACME, "--yes", "--no-purge")
    assert globex_intact(victim) and not ReviewItem.objects.filter(pk=victim).exists()


# ------------------------------------------------------------------ admin
def test_admin_erase_selected_memories_erases_those_rows_only(victim):
    plant(REVIEW, ACME, victim)
    admin = client_for(make_staff("dpo", ("view_memory", "view_reviewitem", *COMPLIANCE_PERMS)))
    page = act(admin, ADMIN_MEMORIES, "erase_selected", [victim])
    assert page.status_code == 200
    # The confirmation counts the memory only, not the review item sharing its id.
    assert "1 memory" in page.content.decode() and "review item" not in page.content.decode()
    act(admin, ADMIN_MEMORIES, "erase_selected", [victim], confirm=True)
    assert not Memory.objects.filter(pk=victim).exists()
    assert ReviewItem.objects.filter(pk=victim, namespace=ACME).exists()


def test_admin_purge_selected_review_items_purges_those_rows_only(victim):
    plant(REVIEW, ACME, victim)
    admin = client_for(make_staff("dpo", ("view_memory", "view_reviewitem", *COMPLIANCE_PERMS)))
    act(admin, ADMIN_REVIEW, "purge_selected", [victim], confirm=True)
    assert not ReviewItem.objects.filter(pk=victim).exists()
    assert globex_intact(victim)


# ------------------------------------- include_authored after an operator erasure
def test_include_authored_never_reaches_a_pseudonymised_row_of_another_tenant(acme):
    dave = "acme/dave"
    kept = MemoryManager(project=GLOBEX, user=dave).upsert(
        "globex plan", "authored by dave", scope="project"
    )
    assert Memory.objects.get(pk=kept.id).subject == dave
    erase(subject=dave)  # the operator: the globex row is kept, pseudonymised
    row = Memory.objects.get(pk=kept.id)
    assert row.subject.startswith("erased:")
    body = {"subject": dave, "include_authored": True}
    dry = acme.post("/api/erasures/", {**body, "dry_run": True}, format="json")
    assert dry.status_code == 200 and dry.json()["counts"][MEMORIES] == 0
    r = acme.post("/api/erasures/", body, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["counts"][MEMORIES] == 0
    assert Memory.objects.filter(pk=kept.id, namespace=GLOBEX).exists()
    # Before the operator's erasure too, the globex row is out of reach (not a 403
    # that would say it exists): the erasure stays within acme's grants.
    other = MemoryManager(project=GLOBEX, user="acme/erin").upsert(
        "globex doc", "by erin", scope="project"
    )
    r = acme.post(
        "/api/erasures/", {"subject": "acme/erin", "include_authored": True}, format="json"
    )
    assert r.status_code == 201 and r.json()["counts"][MEMORIES] == 0
    assert Memory.objects.get(pk=other.id).subject == "acme/erin"  # not even pseudonymised


def test_a_subject_erasure_is_the_same_answer_with_or_without_foreign_data(acme):
    for user, foreign in (("acme/alice", True), ("acme/nobody", False)):
        mm = MemoryManager(project=ACME, user=user)
        mm.upsert("editor", "vim", ["preference"])
        if foreign:
            MemoryManager(project=GLOBEX, user=user).save_session_summary("elsewhere")
        r = acme.post("/api/erasures/", {"subject": user}, format="json")
        assert r.status_code == 201, r.content
        assert r.json()["counts"][MEMORIES] == 1 and r.json()["counts"][SUMMARIES] == 0
    assert SessionSummary.objects.filter(namespace=GLOBEX, subject="acme/alice").exists()


# ------------------------------------------------------------------ export
def _shape(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("generated_at", "query")}


def test_export_lists_only_receipts_the_client_may_see(acme):
    globex = token_client("globex-app", ["globex/"], write=True, erase=True)
    MemoryManager(project=GLOBEX, user="globex/carl").upsert("editor", "vim", ["preference"])
    assert (
        globex.post("/api/erasures/", {"subject": "globex/carl"}, format="json").status_code == 201
    )
    r = acme.get("/api/exports/", {"subject": "globex/carl", "namespace": ACME})
    assert r.status_code == 200
    assert r.json()["erasure_receipts"] == [] and r.json()["counts"]["erasure_receipts"] == 0
    # globex sees its own receipt.
    mine = globex.get("/api/exports/", {"subject": "globex/carl"}).json()
    assert mine["counts"]["erasure_receipts"] == 1
    # acme's own erasure of an acme subject is listed to acme.
    MemoryManager(project=ACME, user="acme/ann").upsert("editor", "vim", ["preference"])
    own = acme.post("/api/erasures/", {"subject": "acme/ann"}, format="json").json()
    doc = acme.get("/api/exports/", {"subject": "acme/ann"}).json()
    assert [x["id"] for x in doc["erasure_receipts"]] == [own["id"]]
    # A colleague (another client of acme) does not see it: receipts are the requester's.
    colleague = token_client("colleague", ["acme/"], erase=True)
    assert colleague.get("/api/exports/", {"subject": "acme/ann"}).json()["erasure_receipts"] == []


def test_export_of_a_subject_with_foreign_data_answers_as_for_an_unknown_key(acme):
    MemoryManager(project=GLOBEX, user="acme/alice").save_session_summary("elsewhere")
    held = acme.get("/api/exports/", {"subject": "acme/alice"})
    unknown = acme.get("/api/exports/", {"subject": "acme/zed"})
    assert held.status_code == unknown.status_code == 200
    assert _shape(held.json()) == _shape(unknown.json())
    assert held.json()["limited_to_grants"] is True
    assert b"elsewhere" not in held.content
    mine = MemoryManager(project=ACME, user="acme/alice")
    mine.upsert("editor", "vim", ["preference"])
    doc = acme.get("/api/exports/", {"subject": "acme/alice"}).json()
    assert doc["counts"]["memories"] == 1 and doc["counts"]["session_summaries"] == 0


def test_export_events_are_those_of_the_exported_rows_not_of_a_shared_id(acme, victim):
    mine = plant(REVIEW, ACME, victim)
    assert mine.pk == victim
    doc = acme.get("/api/exports/", {"namespace": ACME}).json()
    assert all(e["namespace"] == ACME for e in doc["events"])
    assert b"globex" not in acme.get("/api/exports/", {"namespace": ACME}).content


# --------------------------------------------------------- records: the id
@pytest.mark.parametrize(
    "path, extra",
    [
        ("/api/memories/records/", {"scope": "project", "type": "note"}),
        ("/api/review-items/records/", {"scope": "project", "type": "note"}),
    ],
)
def test_records_answer_alike_for_a_free_an_own_and_a_foreign_id(acme, victim, path, extra):
    own = MemoryManager(project=ACME).upsert("ours", "acme row").id
    answers = []
    for n, wanted in enumerate(("0123abcd", own, victim)):
        body = {"namespace": ACME, "id": wanted, "key_normalized": f"k{n}", "title": "t"}
        r = acme.post(path, {**body, **extra, "content": "c"}, format="json")
        assert r.status_code == 200, r.content
        got = r.json()["id"]
        assert got != wanted and len(got) == 16  # a server id, whatever was sent
        answers.append(sorted(r.json()))
    assert answers[0] == answers[1] == answers[2]
    assert globex_intact(victim)


@pytest.mark.postgres_only
def test_same_table_two_namespaces_one_id_postgres(acme, victim):
    # PostgreSQL's partitioned tables key on (namespace, id): one table may hold the
    # same id in two namespaces (an import, an old collision). Each stays its owner's.
    plant(MEMORIES, ACME, victim)
    assert Memory.objects.filter(pk=victim).count() == 2
    r = acme.post("/api/erasures/", {"ids": [victim]}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["counts"][MEMORIES] == 1
    assert globex_intact(victim)
    assert not Memory.objects.filter(pk=victim, namespace=ACME).exists()
    plant(MEMORIES, ACME, victim)
    with pytest.raises(ErasureRequestError, match="2 namespaces"):
        erase(ids=[victim])
    assert erase(ids=[victim], namespace=ACME).counts[MEMORIES] == 1
    assert globex_intact(victim)
