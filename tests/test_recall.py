"""Recall tokenisation, scoring and the exact index (docs/behaviour.md §5); reference parity."""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import sqlite3
import sys
import types
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memoryapp import recall, tokens
from memoryapp.recall import (
    REASON_ORDER,
    IndexRecord,
    RecallIndex,
    Scored,
    expand,
    path_hints,
    query_tokens,
    rank_key,
    score,
    tokenize,
)

DAY = 86400.0
NOW = 1_750_000_000.0  # a fixed "now" (2025-06-15), POSIX seconds


def rec(id="m1", title="", content="", tags=(), keywords=(), age_days=0.0, explicit=False):
    """A record updated ``age_days`` before NOW."""
    return IndexRecord(
        id=id,
        title=title,
        content=content,
        tags=tuple(tags),
        keywords=tuple(keywords),
        updated_at=NOW - age_days * DAY,
        explicit=explicit,
    )


def run(record, query, messages=None, now=NOW):
    return score(record, query_tokens(query), path_hints(messages), now)


def brute_force(records, query, messages=None, top_k=5, exclude_ids=(), now=NOW):
    """The definition RecallIndex.query must match exactly."""
    qtokens, hints = query_tokens(query), path_hints(messages)
    hits = [score(r, qtokens, hints, now) for r in records if r.id not in set(exclude_ids)]
    return sorted((h for h in hits if h is not None), key=rank_key)[:top_k]


# --------------------------------------------------------------------------- tokeniser
class TestTokenize:
    def test_splits_on_exactly_the_spec_set_and_whitespace(self):
        for char in "/\\_-.,:;|@#$%^&*()+=[]{}<>?!'\"":
            assert tokenize(f"foo{char}bar") == ["foo", "bar"], char
        assert tokenize("foo \t\n\u3000\xa0bar") == ["foo", "bar"]
        # Characters outside the set do not split.
        for char in "~`§€":
            assert tokenize(f"foo{char}bar") == [f"foo{char}bar"], char

    def test_lower_cases_and_keeps_order_and_repeats(self):
        assert tokenize("Hello WORLD hello") == ["hello", "world", "hello"]

    def test_drops_one_character_tokens_and_every_stop_word(self):
        assert tokenize("x y2 z") == ["y2"]
        assert tokenize(" ".join(sorted(tokens.STOP_WORDS))) == []
        assert tokenize("The Cat is ON the mat") == ["cat", "mat"]
        spec = (
            "a an the is are was were be been have has had do does did will would can could "
            "should may might shall to of in for on with at by from as into and or but not no "
            "so if then that this it its i you we they my your"
        )
        assert set(spec.split()) == tokens.STOP_WORDS

    def test_normal_forms(self):
        assert expand(["v3"]) == {"v3", "3"}
        assert expand(["v42", "v", "v3a", "vv3"]) == {"v42", "42", "v", "v3a", "vv3"}
        assert expand(["keywords"]) == {"keywords", "keyword"}
        assert expand(["class", "bus", "tests", "ss"]) == {"class", "bus", "tests", "test", "ss"}
        assert expand(["classes"]) == {"classes", "classe"}
        # A normal form is kept even when it is a stop word or a single character.
        assert expand(["cans"]) == {"cans", "can"}
        assert query_tokens("v3 cans") == {"v3", "3", "cans", "can"}

    def test_expand_keeps_every_given_token(self):
        assert expand(["the", "x", ""]) == {"the", "x", ""}

    def test_cjk_latin_boundaries(self):
        assert tokenize("Python版本管理") == ["python", "版本管理"]
        assert tokenize("用2个GPU训练") == ["gpu", "训练"]  # 用, 2 and 个 are one character
        assert tokenize("中文abc中文") == ["中文", "abc", "中文"]
        assert tokenize("ab1中文") == ["ab1", "中文"]
        assert tokenize("café咖啡") == ["café", "咖啡"]  # a Latin letter beyond ASCII
        assert tokenize("データベースv2") == ["データベース", "v2"]
        assert tokenize("한국어abc") == ["한국어", "abc"]

    def test_cjk_without_jieba_keeps_runs_whole_and_warns_once(self, monkeypatch, caplog):
        monkeypatch.setattr(tokens, "_segment", tokens._UNSET)
        monkeypatch.setitem(sys.modules, "jieba", None)  # makes ``import jieba`` fail
        with caplog.at_level(logging.WARNING, logger="memoryapp.tokens"):
            assert tokenize("我们决定使用Docker部署服务") == ["我们决定使用", "docker", "部署服务"]
            assert tokenize("部署服务") == ["部署服务"]
        warnings = [r for r in caplog.records if "jieba" in r.getMessage()]
        assert len(warnings) == 1
        assert tokenize("plain ascii") == ["plain", "ascii"]

    def test_cjk_with_a_segmenter_adds_words_of_two_or_more_characters(self, monkeypatch):
        fake = types.SimpleNamespace(
            lcut=lambda run: {"部署服务": ["部署", "服务"], "我们决定": ["我们", "决", "定"]}.get(
                run, [run]
            ),
            setLogLevel=lambda level: None,
        )
        monkeypatch.setattr(tokens, "_segment", tokens._UNSET)
        monkeypatch.setitem(sys.modules, "jieba", fake)
        assert tokenize("部署服务") == ["部署服务", "部署", "服务"]
        assert tokenize("我们决定 Docker") == ["我们决定", "我们", "docker"]
        assert query_tokens("部署服务") == {"部署服务", "部署", "服务"}

    def test_token_set_equals_expand_of_tokenize(self):
        rng = random.Random(5)
        alphabet = "abcv12 sS_-./'\"xyzé中文\t"
        for _ in range(2000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
            assert tokens.token_set(text) == expand(tokenize(text)), text


class TestPathHints:
    def test_last_ten_messages_text_blocks_and_string_content(self):
        messages = [{"role": "user", "content": f"old{i}.py"} for i in range(5)]
        messages += [{"role": "assistant", "content": "see src/app/views.py"}]
        messages += [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and README.md"},
                    {"type": "image", "text": "photo.png"},
                    {"type": "tool_result", "content": "tool.py"},
                ],
            }
        ]
        messages += [{"role": "user", "content": "nothing here"}] * 5
        messages += ["not a message", {"content": None}, {"role": "user"}]
        hints = path_hints(messages)
        # The last 10 are 2 paths' messages plus 8 without paths; old*.py fell out.
        assert hints == {"src", "app", "views", "view", "py", "readme", "md"}
        assert path_hints(None) == frozenset()
        assert path_hints([]) == frozenset()

    def test_at_most_twenty_paths(self):
        text = " ".join(f"file{i}.md" for i in range(30))
        hints = path_hints([{"role": "user", "content": text}])
        assert hints == {f"file{i}" for i in range(20)} | {"md"}

    def test_path_pattern(self):
        hints = path_hints([{"content": "C:\\dir\\file.txt v1.2.3 foo.toolong12 ./x/y.json"}])
        assert hints == {"dir", "file", "txt", "foo", "toolon", "json"}


# --------------------------------------------------------------------------- scoring terms
class TestScore:
    def test_tag_weight_by_query_size(self):
        record = rec(tags=["Python"])
        assert run(record, "python") == Scored("m1", 1.5 * 1 + 1.0, ("tag_match",))
        assert run(record, "python docker").score == 2.5 * 0.5 + 1.0
        assert run(record, "python docker kafka").score == 4.0 * (1 / 3) + 1.0
        assert run(record, "python docker kafka nginx").score == 4.0 * 0.25 + 1.0
        assert run(record, "python docker redis").score == 4.0 * 0.25 + 1.0  # + "redi"

    def test_tags_are_compared_whole(self):
        assert run(rec(tags=["code-review"]), "code review") is None
        assert run(rec(tags=["3"]), "v3").reasons == ("tag_match",)

    def test_title_jaccard(self):
        hit = run(rec(title="Alpha alpha Beta"), "alpha gamma")
        assert hit.score == 3.0 * (1 / 3) + 1.0  # {alpha} / {alpha, beta, gamma}
        assert hit.reasons == ("title_overlap",)

    def test_keyword_match_uses_keyword_tokens(self):
        record = rec(keywords=["Agent.PY"])
        assert run(record, "agent").score == 2.0 * 1.0 + 1.0
        assert run(record, "agent other").score == 2.0 * 0.5 + 1.0
        assert run(record, "agent.py").score == 2.0 * 1.0 + 1.0  # query {agent, py}
        assert run(rec(keywords=["3"]), "v3").score == 2.0 * 0.5 + 1.0  # raw keyword "3"

    def test_content_match_reads_the_first_500_characters(self):
        assert run(rec(content="gamma delta"), "gamma").score == 1.0 + 1.0
        assert run(rec(content="x " * 247 + "needle"), "needle").reasons == ("content_match",)
        assert run(rec(content="x " * 248 + "needle"), "needle") is None  # cut to "need"

    def test_filepath_hint(self):
        record = rec(keywords=["src/agent.py"])
        messages = [{"role": "user", "content": "look at lib/agent.py"}]
        assert run(record, "zzz", messages) == Scored("m1", 2.0 + 1.0, ("filepath_hint",))
        assert run(record, "the a", messages).score == 3.0  # N = 0: shares are 0
        assert run(rec(content="lib/agent.py"), "zzz", messages) is None  # keywords only

    def test_recency_is_fractional_days_and_clamped(self):
        assert run(rec(tags=["tg"], age_days=30), "tg").score == 1.5 + 1 / (1 + 30 / 30)
        half = run(rec(tags=["tg"], age_days=45.5), "tg").score
        assert half == 1.5 + 1 / (1 + 45.5 / 30)
        assert run(rec(tags=["tg"], age_days=-10), "tg").score == 1.5 + 1.0  # future: 0 days

    def test_stale_after_more_than_ninety_days(self):
        at_ninety = run(rec(tags=["tg"], age_days=90), "tg")
        assert at_ninety.reasons == ("tag_match",)
        old = run(rec(tags=["tg"], age_days=90.01), "tg")
        assert old.reasons == ("tag_match", "stale_penalty")
        assert old.score == pytest.approx(1.5 + 1 / (1 + 90.01 / 30) - 2.0, abs=1e-12)
        assert run(rec(tags=["tg"], age_days=400), "tg").score < 0  # recalled, negative

    def test_gate_needs_one_of_the_first_five_terms(self):
        assert run(rec(title="alpha", explicit=True), "beta") is None
        assert run(rec(), "anything") is None
        assert run(rec(title="alpha"), "the of") is None

    def test_explicit_reason_adds_nothing(self):
        a = run(rec(tags=["tg"], explicit=True), "tg")
        b = run(rec(tags=["tg"], explicit=False), "tg")
        assert a.score == b.score
        assert a.reasons == ("tag_match", "explicit")

    def test_hand_computed_total_and_reason_order(self):
        record = rec(
            title="Python agent setup",
            content="Run the python agent from src.",
            tags=["python"],
            keywords=["agent.py", "setup"],
            age_days=15,
        )
        hit = run(record, "python agent tests")  # N = |{python, agent, tests, test}| = 4
        expected = 4.0 * (1 / 4) + 3.0 * (2 / 5) + 2.0 * (1 / 4) + 1.0 * (2 / 4) + 1 / 1.5
        assert hit.score == pytest.approx(expected, abs=1e-12)
        assert hit.reasons == ("tag_match", "title_overlap", "keyword_match", "content_match")

        everything = rec(
            title="alpha", content="alpha", tags=["alpha"], keywords=["alpha", "a.py"], age_days=100
        )
        hit = run(everything, "alpha", [{"content": "b/a.py"}])
        assert hit.reasons == REASON_ORDER[:6]
        hit = run(replace(everything, explicit=True), "alpha", [{"content": "a.py"}])
        assert hit.reasons == REASON_ORDER


# --------------------------------------------------------------------------- the index
WORDS = [f"w{i}" for i in range(40)] + ["tests", "test", "v3", "classes", "src", "py"]


def random_record(rng, id):
    def words(k):
        return " ".join(rng.choice(WORDS) for _ in range(k))

    return IndexRecord(
        id=id,
        title=words(rng.randint(0, 4)),
        content=words(rng.randint(0, 30)),
        tags=tuple(rng.sample(WORDS, rng.randint(0, 2))),
        keywords=tuple(rng.sample(WORDS, rng.randint(0, 4)))
        + (("src/w1.py",) if rng.random() < 0.3 else ()),
        # Coarse timestamps make exact ties (broken by id) common.
        updated_at=NOW - rng.choice([0, 1, 10, 89, 91, 200]) * DAY,
        explicit=rng.random() < 0.5,
    )


def random_query(rng):
    query = " ".join(rng.choice(WORDS + ["the", "zzz"]) for _ in range(rng.randint(0, 6)))
    messages = None
    if rng.random() < 0.5:
        messages = [{"role": "user", "content": rng.choice(["src/w1.py", "a/w2.md", "w3.py"])}]
    return query, messages


def assert_same(index, live, rng, rounds=40):
    for _ in range(rounds):
        query, messages = random_query(rng)
        top_k = rng.choice([1, 3, 5, 50, 10_000])
        exclude = rng.sample(sorted(live), min(len(live), rng.randint(0, 3)))
        now = NOW + rng.choice([0, -DAY, 5 * DAY, 3 * 3600, 400 * DAY])
        got = index.query(query, messages, top_k=top_k, exclude_ids=exclude, now=now)
        want = brute_force(live.values(), query, messages, top_k, exclude, now)
        assert got == want, (query, messages, top_k, now)  # ids, order, scores ==, reasons


class TestRecallIndexExactness:
    def test_random_corpora_with_writes_removes_and_compactions(self):
        rng = random.Random(20240601)
        for _ in range(6):
            size = rng.choice([5, 80, 400])
            live = {f"id{i:04d}": random_record(rng, f"id{i:04d}") for i in range(size)}
            index = RecallIndex(live.values())
            assert len(index) == size
            assert_same(index, live, rng)
            next_id = size
            for _ in range(120):
                action = rng.random()
                if action < 0.4:  # add
                    record = random_record(rng, f"id{next_id:04d}")
                    next_id += 1
                    live[record.id] = record
                    index.add(record)
                elif action < 0.7 and live:  # replace
                    record = random_record(rng, rng.choice(sorted(live)))
                    live[record.id] = record
                    index.add(record)
                elif live:  # remove
                    victim = rng.choice(sorted(live))
                    del live[victim]
                    assert index.remove(victim)
                    assert not index.remove(victim)
                if rng.random() < 0.2:
                    assert_same(index, live, rng, rounds=5)
            assert index.ids() == set(live)
            assert all(id in index for id in live)
            assert_same(index, live, rng)
            # Compaction kept the dead slots under a quarter of all slots.
            assert 4 * index._dead < max(len(index._ids), 1)

    def test_a_loaded_snapshot_is_exact_before_and_after_writes(self):
        from memoryapp import recall_snapshot

        rng = random.Random(15)
        # Tokens outside ASCII too: the snapshot keeps them sorted by code point and a
        # loaded index finds them by bisection in that same order.
        words = ["café", "zürich", "東京", "ångström", "naïve", "Éclair"]
        live = {}
        for i in range(200):
            record = random_record(rng, f"s{i:03d}")
            if rng.random() < 0.4:
                record = replace(record, content=record.content + " " + rng.choice(words))
            live[record.id] = record
        loaded = recall_snapshot.load(recall_snapshot.dump(RecallIndex(live.values())))
        assert isinstance(loaded._postings, recall_snapshot._PackedPostings)
        assert_same(loaded, live, rng)
        for word in words:  # every token is found, never a neighbour's posting
            want = brute_force(live.values(), word, top_k=10_000)
            assert loaded.query(word, top_k=10_000, now=NOW) == want
        for i in range(30):  # writes into the loaded (still packed) index
            record = random_record(rng, rng.choice([f"s{i:03d}", f"new{i}"]))
            loaded.add(record)
            live[record.id] = record
        for victim in rng.sample(sorted(live), 20):
            assert loaded.remove(victim)
            del live[victim]
        assert_same(loaded, live, rng)
        again = recall_snapshot.load(recall_snapshot.dump(loaded))  # a snapshot of a snapshot
        assert_same(again, live, rng)

    def test_a_loaded_snapshot_counts_what_it_holds(self):
        from memoryapp import recall_snapshot

        rng = random.Random(16)
        built = RecallIndex(random_record(rng, f"c{i:03d}") for i in range(300))
        loaded = recall_snapshot.load(recall_snapshot.dump(built))
        packed = loaded.nbytes
        # No object per token until a query asks for it: fewer bytes than the built
        # index's, more than its postings alone; once unpacked, its tokens as built.
        assert loaded._posting_bytes < packed < built.nbytes
        loaded.query("w1 w2 w3", top_k=5, now=NOW)
        assert packed < loaded.nbytes < built.nbytes
        loaded._own_postings()
        assert loaded._token_bytes() == built._token_bytes()

    def test_bulk_load_into_a_non_empty_index_with_duplicate_ids(self):
        rng = random.Random(7)
        first = [random_record(rng, f"a{i}") for i in range(50)]
        index = RecallIndex(first)
        index.add(random_record(rng, "b0"))  # left pending in append buffers
        second = [random_record(rng, f"a{i}") for i in range(0, 50, 2)]  # replaces
        second += [random_record(rng, "dup"), random_record(rng, "dup")]
        index.bulk_load(second)
        live = {r.id: r for r in first} | {r.id: r for r in second}  # the last "dup" wins
        assert "b0" in index
        assert index.remove("b0")
        assert index.ids() == set(live)
        assert_same(index, live, rng)

    def test_remove_many_and_a_streamed_bulk_load_stay_exact(self):
        rng = random.Random(11)
        records = [random_record(rng, f"r{i:03d}") for i in range(300)]
        index = RecallIndex()
        index.bulk_load(r for r in records)  # a generator: consumed once
        live = {r.id: r for r in records}
        victims = rng.sample(sorted(live), 200) + ["never-indexed"]
        assert index.remove_many(victims) == 200
        for victim in victims[:-1]:
            del live[victim]
        assert index.ids() == set(live)
        assert 4 * index._dead < max(len(index._ids), 1)
        assert_same(index, live, rng)
        assert index.remove_many(list(live)) == len(live)
        assert len(index) == 0 and index.query("anything at all", top_k=5) == []
        index.bulk_load(iter(()))  # an empty stream is a no-op
        assert len(index) == 0

    def test_pruning_path_is_exercised_and_exact(self, monkeypatch):
        calls = []
        original = recall._survivors

        def spy(upper, exact, top_k):
            survivors = original(upper, exact, top_k)
            calls.append((len(upper), len(survivors)))
            return survivors

        monkeypatch.setattr(recall, "_survivors", spy)
        rng = random.Random(3)
        live = {f"r{i}": random_record(rng, f"r{i}") for i in range(1500)}
        index = RecallIndex(live.values())
        assert_same(index, live, rng, rounds=60)
        assert calls and any(n > 200 and kept < n / 2 for n, kept in calls)

    def test_ties_are_broken_by_ascending_id(self):
        records = [rec(id=i, tags=["same"]) for i in ("c", "a", "d", "b")]
        index = RecallIndex(records)
        hits = index.query("same", top_k=3, now=NOW)
        assert [h.id for h in hits] == ["a", "b", "c"]
        assert len({h.score for h in hits}) == 1

    def test_top_k_larger_than_the_candidates_and_exclusions(self):
        records = [rec(id=f"m{i}", content=f"alpha w{i}") for i in range(10)]
        records.append(rec(id="other", content="beta"))
        index = RecallIndex(records)
        hits = index.query("alpha", top_k=100, exclude_ids=["m3", "unknown"], now=NOW)
        assert {h.id for h in hits} == {f"m{i}" for i in range(10)} - {"m3"}
        assert index.query("alpha", top_k=0, now=NOW) == []
        assert index.query("the of", now=NOW) == []
        assert RecallIndex().query("alpha", now=NOW) == []

    def test_queries_wider_than_one_accumulator_lane(self):
        vocabulary = [f"t{i}" for i in range(2200)]
        rng = random.Random(11)
        live = {}
        for i in range(60):
            text = " ".join(rng.sample(vocabulary, 60))
            keywords = text.split()[:5]
            live[f"x{i}"] = rec(id=f"x{i}", title=text[:40], content=text, keywords=keywords)
        index = RecallIndex(live.values())
        query = " ".join(vocabulary[:2100])
        assert recall._layout(len(query_tokens(query)), 3).lanes > 1
        messages = [{"content": "t1.py t2.md"}]
        for top_k in (1, 5, 100):
            got = index.query(query, messages, top_k=top_k, now=NOW)
            assert got == brute_force(live.values(), query, messages, top_k)

    def test_recency_bound_survives_the_clock_going_back(self):
        rng = random.Random(9)
        live = {f"r{i}": random_record(rng, f"r{i}") for i in range(600)}
        index = RecallIndex(live.values())
        for now in (NOW + 200 * DAY, NOW, NOW - 300 * DAY, NOW + 7200, NOW + 100 * DAY):
            for _ in range(10):
                query, messages = random_query(rng)
                assert index.query(query, messages, now=now) == brute_force(
                    live.values(), query, messages, now=now
                )

    def test_size_and_footprint(self):
        rng = random.Random(1)
        index = RecallIndex()
        assert len(index) == 0 and index.ids() == set()
        empty = index.nbytes
        index.bulk_load(random_record(rng, f"n{i}") for i in range(500))
        assert len(index) == 500
        assert index.nbytes > empty + 500 * 100


# --------------------------------------------------------------------------- parity with agentao
def _find_corpus() -> Path:
    """The benchmark corpus generator, ``bench/corpus.py``."""
    return Path(__file__).resolve().parents[1] / "bench" / "corpus.py"


@pytest.fixture(scope="module")
def bench_corpus():
    path = _find_corpus()
    spec = importlib.util.spec_from_file_location("shared_bench_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tie_groups(pairs):
    """[(score, key)] in rank order → a list of key sets of (near-)equal scores."""
    groups: list[set] = []
    last = None
    for value, key in pairs:
        if last is None or abs(value - last) > 1e-9:
            groups.append(set())
            last = value
        groups[-1].add(key)
    return groups


def freeze_reference_clock(monkeypatch, retriever_module, instant: datetime) -> None:
    """Make the reference retriever's ``datetime.now`` return ``instant`` (its clock input)."""

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return instant if tz else instant.replace(tzinfo=None)

    monkeypatch.setattr(retriever_module, "datetime", Frozen)


def test_tokenizer_matches_the_reference_on_ascii_text(bench_corpus):
    retriever = pytest.importorskip("agentao.memory.retriever")
    reference = retriever.MemoryRetriever(None)
    corpus, _, queries = bench_corpus.make_corpus(300, seed=1234)
    texts = [q for q, _ in queries] + [k for k, _, _ in corpus] + [v for _, v, _ in corpus]
    texts += ["v3 keywords class classes tests", "a the foo_bar-baz.qux x y12", "it's don't"]
    for text in texts:
        assert expand(tokenize(text)) == reference.tokenize(text), text


def test_parity_with_the_reference_retriever(bench_corpus, tmp_path, monkeypatch):
    """2,000 corpus memories, the 200 warm queries with their path hints, a fixed now."""
    retriever = pytest.importorskip("agentao.memory.retriever")
    from agentao.memory.guards import MemoryGuard
    from agentao.memory.manager import MemoryManager
    from agentao.memory.storage import SQLiteMemoryStore

    instant = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
    freeze_reference_clock(monkeypatch, retriever, instant)
    corpus, _, queries = bench_corpus.make_corpus(2000, seed=1234)
    guard = MemoryGuard()
    rng = random.Random(77)
    records, rows = [], []
    for i, (key, value, tags) in enumerate(corpus):
        title = key.strip()
        updated = instant - timedelta(seconds=rng.uniform(0, 200 * DAY))
        record = IndexRecord(
            id=f"m{i:05d}",
            title=title,
            content=value,
            tags=tuple(tags),
            keywords=tuple(guard.extract_keywords(title, list(tags), value)),
            updated_at=updated.timestamp(),
            explicit=rng.random() < 0.5,
        )
        records.append(record)
        confidence = "explicit_user" if record.explicit else "auto_summary"
        rows.append(
            (record.id, guard.normalize_key(key), title, value, json.dumps(list(tags)))
            + (json.dumps(list(record.keywords)), confidence, updated.isoformat())
        )
    # The reference store's file is the shared format of docs/behaviour.md §1; one bulk insert keeps
    # the chosen timestamps (its own writes stamp rows with the wall clock).
    path = tmp_path / "reference.db"
    store = SQLiteMemoryStore(str(path))
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO memories (id, scope, type, key_normalized, title, content, tags_json,"
            " keywords_json, source, confidence, sensitivity, created_at, updated_at)"
            " VALUES (?, 'project', 'note', ?, ?, ?, ?, ?, 'explicit', ?, 'normal', ?8, ?8)",
            rows,
        )
    reference = retriever.MemoryRetriever(MemoryManager(project_store=store))
    index = RecallIndex(records)
    key_of = {row[0]: row[1] for row in rows}
    compared = 0
    for query, hints in queries[:200]:
        want = reference.recall_candidates(query, context_hints=hints, top_k=5)
        messages = [{"role": "user", "content": " ".join(hints)}] if hints else None
        got = index.query(query, messages, top_k=5, now=instant.timestamp())
        assert len(got) == len(want), query
        for ours, theirs in zip(got, want, strict=True):
            assert ours.score == pytest.approx(theirs.score, abs=1e-6), query
        # Same memories in the same order, except inside a group of equal scores.
        ours_groups = tie_groups([(h.score, key_of[h.id]) for h in got])
        their_groups = tie_groups([(c.score, key_of[c.memory_id]) for c in want])
        assert ours_groups[:-1] == their_groups[:-1], query
        if ours_groups:  # the last group may be cut by top_k differently
            assert len(ours_groups[-1]) == len(their_groups[-1]), query
        reasons = {c.memory_id: tuple(c.reasons) for c in want}
        for hit in got:
            if hit.id in reasons:
                assert hit.reasons == reasons[hit.id], query
        compared += len(got)
    assert compared > 500
