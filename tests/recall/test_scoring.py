"""The scoring formula of docs/behaviour.md §5, one term at a time.

(memoryapp.recall.core.scoring)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from memoryapp.recall.core.scoring import REASON_ORDER, IndexRecord, Scored, score
from memoryapp.recall.core.tokens import path_hints, query_tokens

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
