"""The generated retrieval sets (bench/retrieval_sets.py) are what the generator writes, stay
small, and the hard set's questions rarely repeat their evidence's words."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from memoryapp.recall.core.tokens import query_tokens

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"


def _module(name: str):
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETS = _module("retrieval_sets")


@pytest.mark.parametrize("name", ["hard", "locomo_shaped"])
def test_the_shipped_set_is_the_generators_output(name):
    path = DATA / f"retrieval_{name}.json"
    assert path.stat().st_size < 3 * 1024 * 1024
    shipped = json.loads(path.read_text(encoding="utf-8"))
    assert shipped == SETS.generate(name)
    turns = {t["id"] for c in shipped["conversations"] for t in c["turns"]}
    questions = [q for c in shipped["conversations"] for q in c["questions"]]
    assert len(turns) == sum(len(c["turns"]) for c in shipped["conversations"])  # unique ids
    assert all(set(q["evidence"]) <= turns and q["evidence"] for q in questions)
    assert 2500 <= len(turns) <= 3500 and 300 <= len(questions) <= 400


def test_hard_questions_rarely_repeat_the_evidence_words():
    data = SETS.generate("hard")
    turns = {t["id"]: t["text"] for c in data["conversations"] for t in c["turns"]}
    shared = []
    for conv in data["conversations"]:
        for q in conv["questions"]:
            words = set(query_tokens(q["question"])) - {conv["speakers"][0].lower()}
            words -= {conv["speakers"][1].lower(), "what", "which", "when", "who", "how"}
            evidence = set().union(*(query_tokens(turns[e]) for e in q["evidence"]))
            shared.append(len(words & evidence))
    # Most hard questions share no word, as written, with their evidence.
    assert sum(n == 0 for n in shared) / len(shared) > 0.6


def test_the_bench_rankers_are_a_list_and_locomo_converts():
    bench = _module("retrieval")
    assert [name for name, _, _ in bench.RANKERS] == [
        "agentao",
        "hybrid",
        "semantic",
        "bm25",
        "bm25-stem",
    ]
    sample = {
        "sample_id": "s1",
        "conversation": {
            "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "later"}],
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "we adopted a puppy"}],
        },
        "qa": [{"question": "What did A adopt?", "evidence": ["D1:1; D2:1"], "category": 1}],
    }
    (conv,) = bench.locomo_conversations([sample])
    assert [t["id"] for t in conv["turns"]] == ["s1:D1:1", "s1:D2:1"]
    assert conv["questions"][0]["evidence"] == ["s1:D1:1", "s1:D2:1"]
    quality = bench.run_quality([conv], ["ids"], ["hybrid", "bm25"])
    assert quality[("ids", "hybrid")]["all"]["found@5"] == 1.0
