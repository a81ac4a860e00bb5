"""English stemming in the ``hybrid`` ranking (memoryapp.recall.core.stemming): word forms match
at query time, CJK and numbers are matched as they are, and ``agentao`` is unchanged."""

from __future__ import annotations

import pytest

from memoryapp.recall.core import hybrid, snapshot, stemming
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import IndexRecord
from memoryapp.recall.core.tokens import path_hints, query_tokens

NOW = 1_800_000_000.0


def _rec(id: str, content: str, title: str = "memo") -> IndexRecord:
    return IndexRecord(id=id, title=title, content=content, updated_at=NOW - 86400.0)


def _ids(index: RecallIndex, text: str, ranking: str = "hybrid") -> list[str]:
    if ranking == "hybrid":
        hits = hybrid.query(index, query_tokens(text), path_hints(None), 5, now=NOW)
    else:
        hits = index.query(text, top_k=5, now=NOW)
    return [h.id for h in hits]


@pytest.fixture
def index() -> RecallIndex:
    return RecallIndex(
        [
            _rec("deploy", "we deploy the service on friday"),
            _rec("cats", "the cat sleeps all day"),
            _rec("study", "she studied chemistry at night"),
            _rec("zh", "部署服务在周五"),
            _rec("num", "port 8080 is open"),
        ]
    )


def test_stems_of_latin_words_only():
    assert stemming.stem("deployments") == stemming.stem("deploy") == "deploy"
    assert stemming.stem("running") == "run"
    assert stemming.stem("8080") == "8080"
    assert stemming.stem("部署") == "部署"
    assert stemming.stem("v2api") == "v2api"  # digits: an identifier, kept whole


@pytest.mark.parametrize(
    ("query", "expected"),
    [("deployments", "deploy"), ("deploying", "deploy"), ("cats", "cats"), ("studies", "study")],
)
def test_a_word_form_finds_the_memory_of_its_stem(index, query, expected):
    assert _ids(index, query) == [expected]


def test_agentao_does_not_stem(index):
    assert _ids(index, "deployments", "agentao") == []
    assert _ids(index, "deploy", "agentao") == ["deploy"]


def test_cjk_and_numbers_are_matched_as_they_are(index):
    assert _ids(index, "部署服务在周五") == ["zh"]
    assert _ids(index, "8080") == ["num"]
    assert _ids(index, "8081") == []


def test_forms_of_one_stem_count_once_per_memory():
    index = RecallIndex(
        [
            _rec("both", "deploy deployment deployments deployed"),
            _rec("one", "deploy"),
            _rec("other", "nothing here at all"),
        ]
    )
    hits = hybrid.query(index, query_tokens("deployments deploying"), frozenset(), 5, now=NOW)
    scores = {h.id: h.score for h in hits}
    assert set(scores) == {"both", "one"}
    # One term, one posting union: the memory holding four forms is not scored four times;
    # the shorter memory wins on length normalisation alone.
    assert scores["one"] >= scores["both"]


def test_a_loaded_snapshot_stems_the_same(index):
    loaded = snapshot.load(snapshot.dump(index))
    assert loaded is not None
    for text in ("deployments", "studies", "cats", "部署服务在周五"):
        assert _ids(loaded, text) == _ids(index, text)
