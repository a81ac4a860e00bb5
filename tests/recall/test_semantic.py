"""The opt-in ``semantic`` ranking: the shipped embedder, stored vectors on every write path,
their erasure with the row and its snapshot, ``memory reembed``, the export, the refusal
without an embedder (a system check and a 400), and the similarity floor."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command

from memoryapp import MemoryManager, conf
from memoryapp.api.testing import token_client
from memoryapp.compliance import export
from memoryapp.models import Memory, RecallSnapshot
from memoryapp.ops.checks import check_recall_ranking
from memoryapp.recall.cache import INDEXES
from memoryapp.recall.core import embedding, semantic, vectors
from memoryapp.recall.core import snapshot as recall_snapshot
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.rows import live_records

pytestmark = pytest.mark.django_db

NS = "acme/web"
MODEL = "wordllama/l2_supercat_256"


def failing_embedder(texts):  # a MEMORYAPP_EMBEDDER target is never called when import fails
    raise AssertionError("not reached")


@pytest.fixture
def no_embedder(settings):
    settings.MEMORYAPP_EMBEDDER = "memoryapp_missing_module.embed"
    yield
    conf._load_embedder.cache_clear()


def _stored(namespace=NS):
    return {
        m.key_normalized: (bytes(m.embedding) if m.embedding else None, m.embedding_model)
        for m in Memory.objects.filter(namespace=namespace)
    }


# ------------------------------------------------------------------------------ the model
def test_the_shipped_model_matches_wordllamas_own_embedding():
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    ours = conf.embedder()
    assert ours is not None and ours.model_id == MODEL and ours.dim == 256
    texts = ["Deploy with a blue-green rollout", "the cat sat on the mat", "PostgreSQL vacuum"]
    root = embedding.Path(embedding.importlib.util.find_spec("wordllama").origin).parent
    tokenizer = Tokenizer.from_file(str(root / "tokenizers/l2_supercat_tokenizer_config.json"))
    reference = WordLlamaInference(ours.table, tokenizer).embed(texts, norm=True)
    assert np.abs(ours.embed(texts) - reference).max() < 1e-6
    assert not ours.embed([""]).any()  # an empty text is similar to nothing


def test_the_word_cache_gives_the_tokenizers_own_ids():
    ours = conf.embedder()
    assert ours._by_word  # the shipped tokenizer is tokenised word by word
    texts = [
        "Deploy step 7: run src/app/main.py  then README.md; quote ' and \" and \\ backslash",
        "tab\tend, ünïcødé 中文 emoji 🚀 newline\nnext   three spaces",
        " leading space",
        "trailing space ",
        "",
    ]
    expected = [e.ids for e in ours.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert ours.ids(texts) == expected
    assert ours.ids(texts) == expected  # from the cache


def test_int8_vectors_keep_the_cosine():
    e = conf.embedder()
    a, b = e.embed(["deploying the web service to production", "release the app to prod servers"])
    stored = np.frombuffer(vectors.encode(b), dtype=np.int8).reshape(1, -1)
    assert abs(float(vectors.similarities(stored, a)[0]) - float(a @ b)) < 0.01
    # The index's half-length form (Matryoshka prefix, unit length again) is a cosine too.
    held = vectors.index_form(stored[0]).reshape(1, -1)
    qa, qb = (vectors.query_form(v, vectors.INDEX_DIMS) for v in (a, b))
    assert abs(float(vectors.similarities(held, qa)[0]) - float(qa @ qb)) < 0.01


def test_a_dotted_path_names_another_embedder(settings):
    settings.MEMORYAPP_EMBEDDER = "tests.recall.test_semantic.ones"
    try:
        e = conf.embedder()
        assert e is not None and e.model_id == "callable:tests.recall.test_semantic.ones"
        assert np.allclose(np.linalg.norm(e.embed(["a", "b"]), axis=1), 1.0)
    finally:
        conf._load_embedder.cache_clear()


def ones(texts):
    return np.ones((len(texts), 8))


# ------------------------------------------------------------------------ refusal, floor
def test_semantic_without_an_embedder_is_refused_at_start_up_and_per_call(no_embedder, settings):
    assert conf.embedder() is None and "cannot be imported" in conf.embedder_problem()
    settings.MEMORYAPP_RECALL_RANKING = "semantic"
    (error,) = check_recall_ranking()
    assert error.id == "memoryapp.E004" and "not served" in error.msg
    settings.MEMORYAPP_RECALL_RANKING = "agentao"
    # Named on purpose and not loading: a warning even where semantic is not configured.
    assert [m.id for m in check_recall_ranking()] == ["memoryapp.W012"]
    mm = MemoryManager(project=NS)
    mm.upsert("pet", "we named the puppy Biscuit")
    assert _stored()["pet"] == (None, None)  # no vectors written without an embedder
    with pytest.raises(ValueError, match="semantic recall ranking is not served"):
        mm.recall("puppy", ranking="semantic")
    client = token_client("acme-app", ["acme/"])
    r = client.post("/api/recall/", {"project": NS, "query": "puppy", "ranking": "semantic"})
    assert r.status_code == 400 and "ranking" in str(r.json())
    schema = client.get("/api/schema/?format=json").content.decode()
    assert '"semantic"' not in schema


def test_the_schema_lists_semantic_where_it_is_served():
    client = token_client("acme-app", ["acme/"])
    assert '"semantic"' in client.get("/api/schema/?format=json").content.decode()


def test_the_floor_keeps_unrelated_memories_out():
    mm = MemoryManager(project=NS)
    mm.upsert("deploy", "Deployments go out with a blue-green rollout on Kubernetes")
    mm.upsert("lunch", "Tuesday lunch is usually pasta with tomato sauce")
    hits = mm.recall("how do we ship releases to the cluster", ranking="semantic", top_k=5)
    assert [h.title for h in hits] == ["deploy"]
    assert "semantic_match" in hits[0].reasons
    assert mm.recall("zebra xylophone quantum", ranking="semantic") == []
    index = RecallIndex(live_records("default", NS, "project"))
    q = conf.embedder().embed(["how do we ship releases to the cluster"])[0]
    q = vectors.query_form(q, vectors.INDEX_DIMS)
    sims = vectors.similarities(index.arrays.vec[: len(index._ids)], q)
    lunch = index._slot_of[Memory.objects.get(key_normalized="lunch").id]
    assert sims[lunch] <= semantic.FLOOR  # why it is left out: not a tie-break


def test_lexical_evidence_alone_still_returns_a_memory(monkeypatch):
    mm = MemoryManager(project=NS)
    mm.upsert("code", "ticket ZX-4471 blocked")
    monkeypatch.setattr(semantic, "FLOOR", 1.0)  # no similarity counts
    assert [h.title for h in mm.recall("ZX-4471", ranking="semantic")] == ["code"]


def test_the_prefilter_shortlist_keeps_the_nearest(monkeypatch):
    mm = MemoryManager(project=NS)
    mm.upsert("deploy", "Deployments go out with a blue-green rollout on Kubernetes")
    for i in range(30):
        mm.upsert(f"n{i}", f"grocery list item {i}: apples, bread, cheese")
    exact = mm.recall("shipping releases to the cluster", ranking="semantic", top_k=3)
    monkeypatch.setattr(semantic, "PREFILTER_FROM", 1)
    monkeypatch.setattr(semantic, "SHORTLIST", 5)
    assert mm.recall("shipping releases to the cluster", ranking="semantic", top_k=3) == exact


# ----------------------------------------------------------------- vectors on every path
def _check_vectors(namespace=NS):
    stored = _stored(namespace)
    assert stored
    assert all(blob and len(blob) == 256 and made == MODEL for blob, made in stored.values())


def test_a_single_write_and_an_update_store_the_vector():
    mm = MemoryManager(project=NS)
    mm.upsert("pet", "we named the puppy Biscuit")
    _check_vectors()
    before = _stored()["pet"][0]
    mm.upsert("pet", "the database runs PostgreSQL 16")
    assert _stored()["pet"][0] != before


def test_an_import_stores_every_vector():
    records = [{"key": f"k{i}", "value": f"imported fact {i}"} for i in range(20)]
    report = MemoryManager(project=NS).import_memories(list(enumerate(records, 1)))
    assert report.created == 20
    _check_vectors()


def test_an_approval_stores_the_vector():
    mm = MemoryManager(project=NS, user="u1")
    message = {"role": "user", "content": "I prefer dark mode in every editor."}
    items = mm.crystallize_user_messages([message])
    assert items and not Memory.objects.exists()
    memory = mm.approve_review_item(items[0].id)
    memory.refresh_from_db()
    assert len(bytes(memory.embedding)) == 256 and memory.embedding_model == MODEL


def test_the_agentao_store_stores_the_vector():
    from agentao.memory.models import MemoryRecord

    from memoryapp.agentao import DjangoMemoryStore

    record = MemoryRecord(
        id="abcd1234", scope="project", type="decision", key_normalized="use_redis",
        title="Use Redis", content="Redis caches sessions", tags=[], keywords=[],
        source="explicit", confidence="explicit_user", sensitivity="normal",
        created_at="2026-01-02T03:04:05", updated_at="2026-01-02T03:04:05",
    )  # fmt: skip
    DjangoMemoryStore("ns/a").upsert_memory(record)
    _check_vectors("ns/a")


# -------------------------------------------------- erasure, snapshots, reembed, export
@pytest.mark.django_db(transaction=True)
def test_vectors_go_into_the_snapshot_and_leave_with_the_row():
    from memoryapp import compliance

    alice, bob = MemoryManager(project=NS, user="alice"), MemoryManager(project=NS, user="bob")
    alice.upsert("pet", "we named the puppy Biscuit")
    bob.upsert("db", "the database runs PostgreSQL 16")
    warm = alice.recall("what is the dog called", ranking="semantic")
    assert [h.title for h in warm][:1] == ["pet"]
    INDEXES.clear()
    assert alice.recall("what is the dog called", ranking="semantic") == warm  # the snapshot
    payload = bytes(RecallSnapshot.objects.get(namespace=NS, scope="project").payload)
    loaded = recall_snapshot.load(payload, MODEL)
    pet = Memory.objects.get(namespace=NS, key_normalized="pet")
    vector = vectors.index_form(np.frombuffer(bytes(pet.embedding), np.int8)).tobytes()
    assert len(vector) == vectors.INDEX_DIMS
    assert loaded.arrays.vec[loaded._slot_of[pet.id]].tobytes() == vector
    assert vector in payload
    assert recall_snapshot.load(payload, "another/model") is None  # another model: rebuilt
    compliance.erase(subject="alice", actor="dpo", include_authored=True)
    assert not Memory.objects.filter(pk=pet.id).exists()
    assert Memory.objects.filter(key_normalized="db").exists()
    bob.recall("database", ranking="semantic")  # the slice's snapshot, written again
    payloads = [bytes(r.payload) for r in RecallSnapshot.objects.filter(namespace=NS)]
    assert all(vector not in p for p in payloads)


def test_reembed_stores_the_vectors_of_another_model():
    mm = MemoryManager(project=NS)
    for i in range(3):
        mm.upsert(f"k{i}", f"fact number {i} about caching")
    Memory.objects.filter(namespace=NS).update(embedding_model="old/model")
    Memory.objects.filter(namespace=NS, key_normalized="k0").update(embedding=None)
    # Read lazily meanwhile: recall compares only current-model vectors.
    assert mm.recall("caching", ranking="semantic")
    out, err = io.StringIO(), io.StringIO()
    call_command("memory", "reembed", stdout=out, stderr=err)
    assert "Embedded 3 memories" in out.getvalue()
    _check_vectors()
    call_command("memory", "reembed", stdout=out, stderr=err)
    assert "Embedded 0 memories" in out.getvalue()
    call_command("memory", "reembed", "--all", stdout=out, stderr=err)
    assert out.getvalue().count("Embedded 3 memories") == 2


def test_reembed_without_an_embedder_fails_plainly(no_embedder):
    err = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("memory", "reembed", stdout=io.StringIO(), stderr=err)
    assert "no embedder" in err.getvalue()


def test_the_export_leaves_the_vectors_out_and_says_so():
    MemoryManager(project=NS).upsert("pet", "we named the puppy Biscuit")
    document = export(namespace=NS)
    assert "embedding" in json.dumps(document["omitted"])
    (memory,) = document["memories"]
    assert not {"embedding", "embedding_model"} & set(memory)


# ------------------------------------------------------------------ a failing embedder
FAIL = {"now": False}


def flaky(texts):
    """Works while loading (the dimension probe), fails once FAIL says so."""
    if FAIL["now"]:
        raise RuntimeError("the model server is down")
    return np.ones((len(texts), 8))


def test_an_embedder_that_does_not_load_is_reported_never_raised(settings):
    settings.MEMORYAPP_EMBEDDER = "os.getcwd"  # a callable of the wrong shape
    try:
        assert conf.embedder() is None and "does not load" in conf.embedder_problem()
        settings.MEMORYAPP_RECALL_RANKING = "semantic"
        assert [m.id for m in check_recall_ranking()] == ["memoryapp.E004"]
        settings.MEMORYAPP_RECALL_RANKING = "hybrid"
        assert [m.id for m in check_recall_ranking()] == ["memoryapp.W012"]
        MemoryManager(project=NS).upsert("pet", "we named the puppy Biscuit")
        assert _stored()["pet"] == (None, None)
    finally:
        conf._load_embedder.cache_clear()


def test_an_embedder_failing_at_write_time_stores_the_row_without_a_vector(settings):
    settings.MEMORYAPP_EMBEDDER = "tests.recall.test_semantic.flaky"
    try:
        assert conf.embedder() is not None
        FAIL["now"] = True
        mm = MemoryManager(project=NS)
        mm.upsert("pet", "we named the puppy Biscuit")  # no error: vectors are derived data
        assert _stored()["pet"] == (None, None)
        hits = mm.recall("puppy Biscuit", ranking="semantic")  # read by its words alone
        assert [h.title for h in hits] == ["pet"]
        FAIL["now"] = False
        mm.upsert("pet", "we named the puppy Biscuit, a beagle")
        assert _stored()["pet"][1] == "callable:tests.recall.test_semantic.flaky"
    finally:
        FAIL["now"] = False
        conf._load_embedder.cache_clear()


def test_the_embedding_caches_hold_no_text():
    mm = MemoryManager(project=NS)
    mm.upsert("ssn", "Alice SSN 123-45-6789")
    assert _stored()["ssn"][0] is not None  # the shipped model embedded it
    cached = [k for k in vectors._recent] + list(conf.embedder()._words)
    assert cached and not any("123-45-6789" in repr(k) for k in cached)
    assert all(isinstance(text_key, bytes) for _, text_key in vectors._recent)


def test_reembed_leaves_a_row_rewritten_while_it_embedded(monkeypatch):
    mm = MemoryManager(project=NS)
    mm.upsert("phone", "my phone is 555-0100")
    Memory.objects.filter(namespace=NS).update(embedding_model="old/model")
    real = vectors.embed

    def embed_while_a_write_lands(embedder, texts):
        if any("555-0100" in t for t in texts):  # reembed's batch: the row changes meanwhile
            monkeypatch.setattr(vectors, "embed", real)
            mm.upsert("phone", "no phone on file")
        return real(embedder, texts)

    monkeypatch.setattr(vectors, "embed", embed_while_a_write_lands)
    from memoryapp.writes.reembed import reembed

    assert reembed("default") == 0  # the row changed under it: its own write stored its vector
    blob, model = _stored()["phone"]
    (expected,) = real(conf.embedder(), [vectors.text_of("phone", "no phone on file")])
    assert blob == expected and model == conf.embedder().model_id
