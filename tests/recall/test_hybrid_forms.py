"""The ``hybrid`` ranking's word forms, question words and length normalisation (issue #42):
a stem's held forms are found by prefix in the index's sorted tokens and remembered per
index (bounded, counted in ``nbytes``), kept fresh by writes, snapshots and compaction;
question words are never terms; ``b`` is mild. ``agentao`` is not touched."""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.facade import blocks
from memoryapp.recall.core import hybrid, snapshot, stemming
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import IndexRecord
from memoryapp.recall.core.tokens import query_tokens

NOW = 1_800_000_000.0


def _rec(id: str, content: str) -> IndexRecord:
    return IndexRecord(id=id, title="memo", content=content, updated_at=NOW - 86400.0)


def _ids(index: RecallIndex, text: str) -> list[str]:
    return [h.id for h in hybrid.query(index, query_tokens(text), frozenset(), 10, now=NOW)]


@pytest.fixture
def index() -> RecallIndex:
    return RecallIndex(
        [
            _rec("naming", "we were naming the boat"),
            _rec("named", "she named it Biscuit"),
            _rec("namesake", "my namesake lives in Porto"),
            _rec("study", "I study at night"),
            _rec("happiness", "happiness is a warm cup"),
            _rec("chat", "what a week, when is it over, who knows"),
        ]
    )


# ------------------------------------------------------------------------- forms by prefix
def test_every_held_form_of_the_stem_and_nothing_else(index):
    # "naming" → "name": a final e restored by Snowball is not in the word; found anyway.
    assert sorted(_ids(index, "names")) == ["named", "naming"]
    assert "namesake" not in _ids(index, "name")  # a longer word of another stem
    assert _ids(index, "studies") == ["study"]  # y → i: the prefix drops the i
    assert _ids(index, "happy") == ["happiness"]
    assert _ids(index, "namesakes") == ["namesake"]
    index.add(_rec("using", "using a cup"))  # a three-letter stem with a restored e: "use"
    assert _ids(index, "uses") == ["using"]


def test_the_memo_is_per_index_bounded_and_counted(index, monkeypatch):
    before = index.nbytes
    assert index._stem_forms is None  # made by the first hybrid query, not by a build
    _ids(index, "names")
    memo = index._stem_forms
    assert memo is not None and index.nbytes > before
    monkeypatch.setattr(stemming, "MEMO_STEMS", 2)
    for word in ("names", "study", "happy", "boats", "nights", "cups"):
        _ids(index, word)
        assert len(memo._memo) <= 2
    assert sorted(_ids(index, "names")) == ["named", "naming"]  # evicted, then found anew
    other = RecallIndex([_rec("x", "we were naming the boat")])
    assert other._stem_forms is None  # nothing shared between indexes


def test_a_form_written_after_the_memo_is_found(index):
    assert _ids(index, "deploy") == []
    assert sorted(_ids(index, "name")) == ["named", "naming"]  # memo made, stem "name" in it
    index.add(_rec("names", "names are hard"))
    index.add(_rec("deploying", "deploying on friday"))
    assert sorted(_ids(index, "name")) == ["named", "names", "naming"]
    assert _ids(index, "deployments") == ["deploying"]


def test_compaction_drops_the_memo_and_gone_forms(index):
    _ids(index, "name")
    index.remove("naming")
    index.compact()  # repacks the postings: "naming" is no longer a token
    assert index._stem_forms is None
    assert _ids(index, "name") == ["named"]


def test_a_loaded_snapshot_lists_its_tokens_and_later_writes():
    built = RecallIndex([_rec("a", "she named it"), _rec("b", "boats and trains")])
    loaded = snapshot.load(snapshot.dump(built))
    assert loaded is not None
    loaded.add(_rec("c", "naming things"))  # before any hybrid query: in the dict, not the table
    assert sorted(_ids(loaded, "names")) == ["a", "c"]
    loaded.add(_rec("d", "a nameless boat"))
    assert sorted(_ids(loaded, "boat")) == ["b", "d"]


def test_numbers_identifiers_and_cjk_are_not_stemmed():
    index = RecallIndex([_rec("n", "port 8080 and 80"), _rec("v", "v2api v2apis")])
    assert _ids(index, "8080") == ["n"]
    assert _ids(index, "80") == ["n"]  # "8080" does not start a stem's forms
    assert _ids(index, "v2api") == ["v"]


# ------------------------------------------------------------------------- question words
def test_question_words_are_not_terms(index):
    assert _ids(index, "what when who") == []
    # The chatter holds three of the question's words, all question words: no evidence.
    assert _ids(index, "When was the boat named? Who named it?") == ["naming", "named"]
    # agentao keeps matching them (its formula is Agentao's, unchanged).
    assert index.query("what when who", top_k=5, now=NOW)[0].id == "chat"


# ---------------------------------------------------------------------------- b
def test_a_long_memory_holding_more_of_the_query_beats_short_chatter(monkeypatch):
    # "long" holds both query words among 27 tokens; each "c" is a 2-token chat turn with
    # the common one. BM25's usual b (0.75) lets the short chatter win; 0.4 does not.
    long = "the vet gave the puppy a biscuit " + " ".join(f"filler{i}" for i in range(20))
    index = RecallIndex(
        [_rec("long", long), _rec("short", "vet")]
        + [_rec(f"c{i}", f"puppy {i} time") for i in range(6)]
        + [_rec(f"d{i}", f"nothing to see {i} today") for i in range(20)]
    )
    assert hybrid.B == 0.4
    order = _ids(index, "vet puppy")
    assert order.index("long") < order.index("c0")
    monkeypatch.setattr(hybrid, "B", 0.75)
    order = _ids(index, "vet puppy")
    assert order.index("long") > order.index("c0")


# ------------------------------------------------------------------ through the store
@pytest.mark.django_db
def test_through_the_store_forms_and_question_words(monkeypatch):
    mm = MemoryManager(project="acme/forms")
    for i in range(6):
        mm.upsert(f"chat {i}", f"what a week {i}, when is it over, who knows")
    mm.upsert("pet", "we were naming the new puppy Biscuit")
    clock = blocks.time.time()
    monkeypatch.setattr(blocks.time, "time", lambda: clock)
    assert [h.title for h in mm.recall("What name did we give the puppies?", ranking="hybrid")][
        :1
    ] == ["pet"]
    assert mm.recall("who what when", ranking="hybrid") == []
    assert mm.recall("who what when", ranking="agentao") != []
    # A write after the first recall (the cached index, its memo made) is found by form.
    mm.upsert("move", "they are relocating to Porto")
    assert [h.title for h in mm.recall("relocated", ranking="hybrid")] == ["move"]
    assert mm.delete_by_title("pet") == 1
    assert mm.recall("names", ranking="hybrid") == []


def test_the_memo_does_not_depend_on_the_order_of_writes_and_queries():
    texts = ["the die is cast", "dying plants", "naming day", "names", "nameless"]
    bulk = RecallIndex([_rec(f"m{i}", t) for i, t in enumerate(texts)])
    stepwise = RecallIndex()
    for i, text in enumerate(texts):
        stepwise.add(_rec(f"m{i}", text))
        _ids(stepwise, "die name")  # the memo made early, then told of each new token
    for query in ("die", "dies", "name", "naming"):
        assert _ids(stepwise, query) == _ids(bulk, query)


def test_an_irregular_form_still_finds_itself():
    index = RecallIndex([_rec("d", "dying plants"), _rec("t", "the die is cast")])
    # Snowball stems "dying" to "die", whose prefix scan ("di") misses "dying": the query
    # word itself is still read, with the forms the scan finds.
    assert sorted(_ids(index, "dying")) == ["d", "t"]
    assert _ids(index, "die") == ["t"]  # the documented miss: an irregular form by table
