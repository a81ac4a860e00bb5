"""The ``hybrid`` recall ranking (memoryapp.recall.core.hybrid) on the shipped corpus and on small
hand-made ones: ordering, reasons, no hit without lexical evidence, CJK, snapshots."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from memoryapp.recall.core import hybrid, snapshot
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import REASON_ORDER, IndexRecord, rank_key
from memoryapp.recall.core.stemming import stem
from memoryapp.recall.core.tokens import path_hints, query_tokens

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0
DAY = 86400.0
LEXICAL = {"tag_match", "title_overlap", "keyword_match", "content_match", "filepath_hint"}


def _bench():
    spec = importlib.util.spec_from_file_location("retrieval", ROOT / "bench" / "retrieval.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
CONVERSATIONS = BENCH.load(BENCH.DATA)


def _q(index: RecallIndex, text: str, top_k: int = 10, messages=None, **kw):
    return hybrid.query(index, query_tokens(text), path_hints(messages), top_k, now=NOW, **kw)


def _rec(id: str, content: str, title: str = "", days: float = 1.0, **kw) -> IndexRecord:
    return IndexRecord(
        id=id, title=title or "memo", content=content, updated_at=NOW - days * DAY, **kw
    )


def _conversation_index(conv: dict, keying: str) -> RecallIndex:
    turns = conv["turns"]
    return RecallIndex(
        BENCH.record_of(t, keying, NOW - 60.0 * (len(turns) - i)) for i, t in enumerate(turns)
    )


# ----------------------------------------------------------------- the shipped corpus
def test_the_shipped_corpus_is_the_generators_output():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "bench" / "retrieval_data.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.generate() == {"name": gen.generate()["name"], "conversations": CONVERSATIONS}
    turns = [t["id"] for c in CONVERSATIONS for t in c["turns"]]
    assert len(turns) == len(set(turns)) > 300
    for conv in CONVERSATIONS:
        ids = {t["id"] for t in conv["turns"]}
        assert all(set(q["evidence"]) <= ids for q in conv["questions"])


@pytest.mark.parametrize("keying", ["ids", "summary"])
def test_hybrid_finds_what_bm25_finds_and_more_than_agentao(keying):
    results = BENCH.run_quality(CONVERSATIONS, [keying], ["agentao", "hybrid", "bm25"])
    agentao = results[(keying, "agentao")]["all"]["found@5"]
    ours = results[(keying, "hybrid")]["all"]["found@5"]
    assert ours >= results[(keying, "bm25")]["all"]["found@5"]
    assert ours >= 1.1 * agentao


@pytest.mark.parametrize("keying", ["ids", "summary"])
def test_hits_are_ordered_have_evidence_and_explain_themselves(keying):
    for conv in CONVERSATIONS[:2]:
        index = _conversation_index(conv, keying)
        contents = {t["id"]: t for t in conv["turns"]}
        for q in conv["questions"]:
            hits = _q(index, q["question"])
            assert hits == sorted(hits, key=rank_key)
            assert len({h.id for h in hits}) == len(hits) <= 10
            qtokens = query_tokens(q["question"])
            for hit in hits:
                assert LEXICAL & set(hit.reasons), hit
                assert list(hit.reasons) == [r for r in REASON_ORDER if r in hit.reasons]
                turn = contents[hit.id]
                text = query_tokens(
                    f"{turn['speaker']}: {turn['text']} {BENCH.key_of(turn, keying)}"
                )
                # Evidence is a shared word up to its English stem ("moving" finds "move").
                assert {stem(t) for t in qtokens} & {stem(t) for t in text}, (q, turn)


def test_a_rare_shared_word_outranks_common_ones():
    index = RecallIndex(
        [_rec(f"chat{i}", "really great week, what else is new") for i in range(30)]
        + [_rec("fact", "we named the puppy Biscuit")]
    )
    hits = _q(index, "what really great name for the puppy")
    assert hits[0].id == "fact"
    # Agentao's formula counts every shared word alike: chatter sharing three wins there.
    assert index.query("what really great name for the puppy", now=NOW)[0].id != "fact"


def test_length_normalisation_prefers_the_focused_memory():
    filler = " ".join(f"word{i}" for i in range(40))
    index = RecallIndex(
        [_rec("long", f"kubernetes {filler}"), _rec("short", "kubernetes cluster")]
        + [_rec(f"other{i}", f"unrelated text {i}") for i in range(10)]
    )
    assert [h.id for h in _q(index, "kubernetes")] == ["short", "long"]


# --------------------------------------------------------------- evidence and reasons
def test_no_lexical_evidence_no_hit_however_recent():
    index = RecallIndex(
        [_rec("new", "fresh unrelated note", days=0.0), _rec("old", "deploy helm", days=10)]
    )
    assert [h.id for h in _q(index, "deploy")] == ["old"]
    assert _q(index, "nothing here matches zzz") == []
    assert _q(index, "") == []
    assert _q(index, "deploy", top_k=0) == []
    assert hybrid.query(RecallIndex(), query_tokens("deploy"), now=NOW) == []


def test_reasons_name_each_signal():
    index = RecallIndex(
        [
            _rec("tagged", "notes about releases", tags=("deploy",)),
            _rec("titled", "how we ship", title="deploy checklist"),
            _rec("hinted", "edit the chart values", keywords=("chart.yaml",)),
            _rec("stale", "deploy by hand", days=200, explicit=True),
        ]
    )
    messages = [{"role": "user", "content": "look at deploy/chart.yaml"}]
    hits = {h.id: h for h in _q(index, "deploy", messages=messages)}
    assert "tag_match" in hits["tagged"].reasons
    assert "title_overlap" in hits["titled"].reasons
    assert "content_match" not in hits["titled"].reasons
    assert hits["hinted"].reasons == ("filepath_hint",)
    assert hits["stale"].reasons == ("content_match", "stale_penalty", "explicit")
    assert hits["stale"].score < hits["tagged"].score


def test_an_exact_tag_and_a_path_hint_lift_a_memory():
    index = RecallIndex(
        [
            _rec("plain", "deploy steps for the api"),
            _rec("tagged", "deploy steps for the web", tags=("deploy",)),
        ]
        + [_rec(f"x{i}", f"filler {i}") for i in range(8)]
    )
    assert [h.id for h in _q(index, "deploy steps")][:2] == ["tagged", "plain"]
    index.add(_rec("hinted", "deploy notes", keywords=("app.py",)))
    messages = [{"role": "user", "content": "see src/app.py"}]
    assert _q(index, "deploy", messages=messages)[0].id == "hinted"


def test_recency_breaks_ties_and_staleness_costs():
    index = RecallIndex(
        [_rec("older", "deploy helm chart", days=20), _rec("newer", "deploy helm chart", days=1)]
        + [_rec("stale", "deploy helm chart", days=120)]
    )
    assert [h.id for h in _q(index, "helm chart")] == ["newer", "older", "stale"]


def test_the_whole_content_counts_for_hybrid_only_its_prefix_for_agentao():
    long = "setup notes " * 50 + "finally the zookeeper quorum"  # past 500 characters
    index = RecallIndex([_rec("long", long), _rec("short", "quorum size is three")])
    hits = _q(index, "zookeeper quorum")
    assert [h.id for h in hits] == ["long", "short"]
    assert hits[0].reasons == ("content_match",)
    assert [h.id for h in index.query("zookeeper quorum", now=NOW)] == ["short"]
    loaded = snapshot.load(snapshot.dump(index))
    assert loaded is not None and _q(loaded, "zookeeper quorum") == hits
    assert [h.id for h in loaded.query("zookeeper quorum", now=NOW)] == ["short"]


def test_excluded_removed_and_replaced_memories():
    index = RecallIndex([_rec(f"m{i}", f"deploy note {i}") for i in range(12)])
    assert "m3" not in {h.id for h in _q(index, "deploy", top_k=20, exclude_ids={"m3"})}
    index.remove("m4")
    index.add(_rec("m5", "nothing relevant"))
    found = {h.id for h in _q(index, "deploy", top_k=20)}
    assert found == {f"m{i}" for i in range(12)} - {"m4", "m5"}
    index.compact()
    assert {h.id for h in _q(index, "deploy", top_k=20)} == found


def test_incremental_adds_rank_as_a_bulk_load():
    records = [
        BENCH.record_of(t, "summary", NOW - i) for i, t in enumerate(CONVERSATIONS[0]["turns"])
    ]
    bulk = RecallIndex(records)
    one_by_one = RecallIndex()
    for record in records:
        one_by_one.add(record)
    for q in CONVERSATIONS[0]["questions"]:
        assert _q(bulk, q["question"]) == _q(one_by_one, q["question"])


def test_idf_weights_follow_the_live_memories():
    index = RecallIndex(
        [_rec(f"m{i}", "alpha beta") for i in range(20)] + [_rec("rare", "gamma beta")]
    )
    before = {h.id: h.score for h in _q(index, "gamma", top_k=30)}
    index.add(_rec("another", "gamma delta"))
    after = {h.id: h.score for h in _q(index, "gamma", top_k=30)}
    assert after["rare"] < before["rare"]  # gamma is less rare now
    assert math.isfinite(after["another"])


# ------------------------------------------------------------------------ snapshots
def test_a_snapshot_round_trip_ranks_identically():
    index = _conversation_index(CONVERSATIONS[1], "summary")
    index.add(BENCH.record_of(CONVERSATIONS[1]["turns"][0], "ids", NOW))  # a replaced slot
    index.compact()
    loaded = snapshot.load(snapshot.dump(index))
    assert loaded is not None
    n = len(index)
    assert loaded.arrays.doc_len[:n].tolist() == index.arrays.doc_len[:n].tolist()
    assert int(index.arrays.doc_len[:n].min()) > 0
    for q in CONVERSATIONS[1]["questions"]:
        assert _q(loaded, q["question"]) == _q(index, q["question"])
    loaded.add(_rec("later", "a brand new clarinet lesson"))
    assert _q(loaded, "clarinet lesson")[0].id == "later"


def test_locomo_converts_to_the_layout(tmp_path):
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "session_1_date_time": "1 May 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy"}],
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Named Biscuit?"}],
        },
        "qa": [{"question": "Pet?", "answer": "x", "evidence": ["D1:1; D2:1"], "category": 4}],
    }
    source, target = tmp_path / "locomo.json", tmp_path / "out.json"
    source.write_text(json.dumps([sample]))
    BENCH.convert_locomo(source, target)
    (conv,) = BENCH.load(target)
    assert [t["id"] for t in conv["turns"]] == ["conv-1:D1:1", "conv-1:D2:1"]
    assert conv["questions"][0]["evidence"] == ["conv-1:D1:1", "conv-1:D2:1"]
    assert conv["questions"][0]["category"] == "4"


def test_unknown_rankings_are_refused():
    assert hybrid.check_ranking("hybrid") == "hybrid"
    assert hybrid.check_ranking("agentao") == "agentao"
    for bad in ("Hybrid", "bm25", "", None, 1):
        with pytest.raises(ValueError):
            hybrid.check_ranking(bad)


# ----------------------------------------------------------------------------- CJK
# Chinese and English memories, mixed ones too. Words are separated by spaces or ASCII
# punctuation, so the tokens hold without the optional segmenter (jieba; full-width
# punctuation does not split a run without it); with it, runs are also split into words.
ZH_EN = [
    ("zh-deploy", "部署流程: 先构建镜像, 再推送到仓库, 最后 kubernetes 滚动更新"),
    ("zh-db", "数据库迁移 每周二 晚上执行, 需要 先备份"),
    ("zh-food", "团队午饭 喜欢 川菜, 不要 太辣"),
    ("mixed", "The staging 环境 uses postgres 16; 数据库迁移 runs there first."),
    ("en-deploy", "Deploy with helm: build the image, push it, then roll out."),
    ("en-food", "Team lunch on Fridays, usually pizza."),
]


@pytest.fixture
def zh_en() -> RecallIndex:
    return RecallIndex(_rec(id, text) for id, text in ZH_EN)


def test_chinese_queries_find_chinese_memories(zh_en):
    assert {h.id for h in _q(zh_en, "数据库迁移 什么时候")} == {"zh-db", "mixed"}
    assert _q(zh_en, "部署流程")[0].id == "zh-deploy"
    assert _q(zh_en, "川菜")[0].id == "zh-food"


def test_mixed_language_queries_and_memories(zh_en):
    hits = [h.id for h in _q(zh_en, "staging 环境 的 数据库迁移")]
    assert hits[0] == "mixed"
    assert {h.id for h in _q(zh_en, "kubernetes 部署流程")} == {"zh-deploy"}
    assert [h.id for h in _q(zh_en, "helm deploy")] == ["en-deploy"]
    assert _q(zh_en, "火锅") == []


def test_segmented_chinese_when_the_segmenter_is_installed(zh_en):
    pytest.importorskip("jieba")
    # jieba splits the run 部署流程 into 部署 / 流程: a query of one word finds it.
    assert _q(zh_en, "部署")[0].id == "zh-deploy"
