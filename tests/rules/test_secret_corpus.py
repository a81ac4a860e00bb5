"""The guard against a corpus of credentials and look-alikes, and against Agentao 0.5.17.

0 misses and 0 false refusals on the corpus; and on every text of the corpus and of
random mixtures of trigger fragments, a refusal wherever the reference runtime
refuses, except the deliberate differences ``secret_corpus.DELIBERATE`` lists.
"""

from __future__ import annotations

import random
import re

import pytest

from memoryapp.rules import secret_scan
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.rules.secret_scan import find_secret_family
from tests.secret_corpus import CREDENTIALS, DELIBERATE, LOOK_ALIKES

from .test_guard_prefilter import _mixed_text

agentao_guards = pytest.importorskip("agentao.memory.guards")


def agentao_refuses(text: str) -> bool:
    try:
        agentao_guards.MemoryGuard().detect_sensitive(text)
    except agentao_guards.SensitiveMemoryError:
        return True
    return False


def test_the_corpus_is_big_enough_and_has_no_duplicates():
    texts = [t for _, t in CREDENTIALS]
    assert len(texts) >= 100 and len(LOOK_ALIKES) >= 100
    assert len(set(texts)) == len(texts) and len(set(LOOK_ALIKES)) == len(LOOK_ALIKES)
    assert not set(texts) & set(LOOK_ALIKES)
    assert set(DELIBERATE) <= set(LOOK_ALIKES)


@pytest.mark.parametrize(("family", "text"), CREDENTIALS, ids=[f for f, _ in CREDENTIALS])
def test_every_credential_is_refused_and_named(family, text):
    assert find_secret_family(text) == family, text
    with pytest.raises(SensitiveMemoryError) as refused:
        MemoryGuard().detect_sensitive(text)
    assert text not in str(refused.value)


def test_no_look_alike_is_refused():
    refused = [t for t in LOOK_ALIKES if find_secret_family(t) is not None]
    assert refused == []


def test_we_refuse_wherever_agentao_refuses_on_the_corpus():
    texts = [t for _, t in CREDENTIALS] + LOOK_ALIKES
    missed = [t for t in texts if agentao_refuses(t) and find_secret_family(t) is None]
    assert sorted(missed) == sorted(t for t in DELIBERATE if agentao_refuses(t))


def test_every_deliberate_difference_is_still_one():
    """A listed difference Agentao no longer refuses is stale: remove it from the list."""
    assert [t for t in DELIBERATE if not agentao_refuses(t)] == []


def _without_deliberate_differences() -> list[re.Pattern[str]]:
    """Our patterns with the two deliberate relaxations undone: placeholders are
    credentials again, and AWS key ids may hold any digit."""
    undo = [
        (secret_scan._PLACEHOLDER, ""),
        (secret_scan._placeholder("(?=@)"), ""),
        ("(?:AKIA|ASIA)[A-Z2-7]{16}", "(?:AKIA|ASIA)[A-Z0-9]{16}"),
    ]
    strict = []
    for _, pattern in secret_scan.SECRET_PATTERNS:
        source = pattern.pattern
        for old, new in undo:
            source = source.replace(old, new)
        strict.append(re.compile(source, pattern.flags))
    return strict


STRICT = _without_deliberate_differences()


def _deliberately_accepted(text: str) -> bool:
    """Whether only a deliberate difference keeps us from refusing ``text``."""
    candidates = (text, secret_scan.visible(text))
    return any(p.search(t) for p in STRICT for t in candidates)


def test_we_refuse_wherever_agentao_refuses_on_random_mixtures():
    rng = random.Random(1203)
    compared = 0
    for _ in range(20000):
        text = _mixed_text(rng)
        if agentao_refuses(text):
            compared += 1
            if find_secret_family(text) is None:
                assert _deliberately_accepted(text), text
    assert compared > 500


def test_the_strict_variant_undoes_each_deliberate_difference():
    """Control for the test above: every DELIBERATE text is refused once undone."""
    assert all(_deliberately_accepted(t) for t in DELIBERATE)
    # ... and it refuses only through them: prose and shapes stay accepted.
    relaxed = ("$", "%(", "<", "****", "xxxxxx", "[REDACTED]", "AKIA", "ASIA")
    plain = [t for t in LOOK_ALIKES if not any(marker in t for marker in relaxed)]
    assert len(plain) > 80 and not any(_deliberately_accepted(t) for t in plain)
