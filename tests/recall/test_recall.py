"""The exact recall index (docs/behaviour.md §5) against brute-force scoring; reference parity.

The tokeniser's tests are in test_tokens.py, the scoring formula's in test_scoring.py.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memoryapp.recall.core import postings, pruning
from memoryapp.recall.core.index import RecallIndex
from memoryapp.recall.core.scoring import IndexRecord, rank_key, score
from memoryapp.recall.core.tokens import expand, path_hints, query_tokens, tokenize

from .test_scoring import DAY, NOW, rec


def brute_force(records, query, messages=None, top_k=5, exclude_ids=(), now=NOW):
    """The definition RecallIndex.query must match exactly."""
    qtokens, hints = query_tokens(query), path_hints(messages)
    hits = [score(r, qtokens, hints, now) for r in records if r.id not in set(exclude_ids)]
    return sorted((h for h in hits if h is not None), key=rank_key)[:top_k]


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
        from memoryapp.recall.core import snapshot as recall_snapshot

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
        from memoryapp.recall.core import snapshot as recall_snapshot

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
        original = pruning.survivors

        def spy(upper, exact, top_k):
            survivors = original(upper, exact, top_k)
            calls.append((len(upper), len(survivors)))
            return survivors

        monkeypatch.setattr(pruning, "survivors", spy)
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
        assert postings.layout_for(len(query_tokens(query)), 3).lanes > 1
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
    return Path(__file__).resolve().parents[2] / "bench" / "corpus.py"


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
