"""Choosing the recall ranking: ``MEMORYAPP_RECALL_RANKING``, ``ranking=`` on the facade, on
``Memory.objects...recall`` and in the recall API; an unknown value is refused."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.facade import blocks
from memoryapp.models import Memory
from memoryapp.recall.cache import INDEXES
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import fields_of
from memoryapp.recall.rows import record_of

pytestmark = pytest.mark.django_db

NS = "acme/web"
QUERY = "what really great name for the puppy"


@pytest.fixture
def seeded(monkeypatch):
    """Chatter sharing three common query words, and the one memory naming the puppy.

    Agentao's formula counts every shared word alike, so chatter ranks first there;
    the hybrid ranking weighs the rare word and puts the fact first.
    """
    mm = MemoryManager(project=NS)
    for i in range(12):
        mm.upsert(f"chat {i}", f"what a really great week number {i}")
    mm.upsert("pet", "we named the puppy Biscuit")
    MemoryManager(project="other/ns").upsert("pet", "the puppy of another tenant")
    clock = blocks.time.time()
    monkeypatch.setattr(blocks.time, "time", lambda: clock)
    return mm


def _titles(hits) -> list[str]:
    return [h.title for h in hits]


def test_the_default_is_agentao_and_hybrid_is_opt_in(seeded):
    default = seeded.recall(QUERY, top_k=3)
    assert default == seeded.recall(QUERY, top_k=3, ranking="agentao")
    assert _titles(default)[0] != "pet"
    hybrid = seeded.recall(QUERY, top_k=3, ranking="hybrid")
    assert _titles(hybrid)[0] == "pet"
    assert all(h.memory_id in {m.id for m in Memory.objects.filter(namespace=NS)} for h in hybrid)
    assert "content_match" in hybrid[0].reasons


def test_the_setting_chooses_the_default(seeded, settings):
    settings.MEMORYAPP_RECALL_RANKING = "hybrid"
    assert seeded.recall(QUERY, top_k=3) == seeded.recall(QUERY, top_k=3, ranking="hybrid")
    assert _titles(seeded.recall(QUERY, top_k=3, ranking="agentao"))[0] != "pet"
    candidates, context = seeded.recall_turn(QUERY, top_k=3)
    assert _titles(candidates)[0] == "pet"
    settings.MEMORYAPP_RECALL_RANKING = "bogus"
    with pytest.raises(ValueError, match="unknown recall ranking"):
        seeded.recall(QUERY)


@pytest.mark.parametrize("bad", ["bm25", "Hybrid", "", 3])
def test_an_unknown_ranking_raises_before_any_read(seeded, bad, django_assert_num_queries):
    with django_assert_num_queries(0), pytest.raises(ValueError):
        seeded.recall(QUERY, ranking=bad)
    with pytest.raises(ValueError):
        seeded.recall_turn(QUERY, ranking=bad)
    with pytest.raises(ValueError):
        Memory.objects.in_namespace(NS).recall(QUERY, ranking=bad)


@pytest.mark.parametrize("ranking", ["agentao", "hybrid"])
def test_the_queryset_recall_equals_the_facades(seeded, ranking):
    ours = seeded.recall(QUERY, top_k=5, ranking=ranking)
    assert Memory.objects.in_namespace(NS).recall(QUERY, None, 5, ranking=ranking) == ours


def test_hybrid_sees_writes_and_erasure_of_the_same_index(seeded):
    assert _titles(seeded.recall("biscuit", ranking="hybrid")) == ["pet"]
    seeded.upsert("pet", "the puppy is called Pepper now")
    assert seeded.recall("biscuit", ranking="hybrid") == []
    assert _titles(seeded.recall("pepper", ranking="hybrid")) == ["pet"]
    pet = Memory.objects.get(namespace=NS, key_normalized="pet")
    assert seeded.delete(pet.id)
    assert seeded.recall("pepper puppy", ranking="hybrid") == []


@pytest.mark.django_db(transaction=True)  # snapshots are written outside transactions only
def test_a_cold_worker_ranks_hybrid_from_the_snapshot(seeded):
    warm = seeded.recall(QUERY, top_k=5, ranking="hybrid")
    INDEXES.clear()
    loads = INDEXES.loads
    assert MemoryManager(project=NS).recall(QUERY, top_k=5, ranking="hybrid") == warm
    assert INDEXES.loads == loads + 1


def test_the_stored_rows_give_the_lengths_hybrid_needs(seeded):
    records = [record_of(m) for m in Memory.objects.filter(namespace=NS)]
    index = RecallIndex(records)
    for record in records:
        slot = index._slot_of[record.id]
        assert int(index.arrays.doc_len[slot]) == len(fields_of(record).content) > 0


# ------------------------------------------------------------------------------- API
def _post(body):
    client = token_client("acme-app", ["acme/"])
    return client.post("/api/recall/", {"project": NS, **body}, format="json")


def test_the_api_selects_the_ranking(seeded):
    r = _post({"query": QUERY, "top_k": 3, "ranking": "hybrid"})
    assert r.status_code == 200
    assert r.json()["candidates"][0]["title"] == "pet"
    default = _post({"query": QUERY, "top_k": 3})
    assert default.status_code == 200
    assert default.json() == _post({"query": QUERY, "top_k": 3, "ranking": "agentao"}).json()
    assert default.json()["candidates"][0]["title"] != "pet"
    assert _post({"query": QUERY, "top_k": 3, "ranking": None}).json() == default.json()


@pytest.mark.parametrize("bad", ["bm25", "HYBRID", "", 1, ["hybrid"]])
def test_the_api_refuses_an_unknown_ranking(seeded, bad):
    r = _post({"query": QUERY, "ranking": bad})
    assert r.status_code == 400
    assert "ranking" in str(r.json())


def test_the_schema_documents_the_ranking():
    client = token_client("acme-app", ["acme/"])
    schema = client.get("/api/schema/?format=json").json()
    names = [n for n in schema["components"]["schemas"] if n.startswith("RecallInput")]
    assert names
    fields = schema["components"]["schemas"][names[0]]["properties"]
    field = fields["ranking"]
    values = set(field.get("enum", []))
    for part in field.get("oneOf", []) + field.get("allOf", []):  # a nullable enum's parts
        if "$ref" in part:
            values.update(schema["components"]["schemas"][part["$ref"].rsplit("/", 1)[1]]["enum"])
    assert {"agentao", "hybrid"} <= values
