"""Tokenisation rules that must hold for any input: path hints equal the reference regex."""

from __future__ import annotations

import random
import re

import pytest

from memoryapp.tokens import path_hints, path_matches

# The rule as written (docs: the file-path hint term); quadratic on long runs.
REFERENCE = re.compile(r"[\w./\\-]+\.\w{2,6}")
EDGES = [
    "", ".", "..py", "a.p", "a.py", "x.pyxxxxxxxx", "src/app/main.py", "v1.2.3.tar.gz",
    "see agent.py, README.md and docs/a-b.txt.", "a..py", "a.py/b.c", "C:\\x\\y.cfg",
    "é.ü2", "a._b", "-.md", "a.b c.de", "tests/test_x.py::test_y",
]  # fmt: skip


@pytest.mark.parametrize("text", EDGES)
def test_path_matches_equal_the_regex_on_edge_cases(text):
    assert list(path_matches(text)) == REFERENCE.findall(text)


def test_path_matches_equal_the_regex_on_random_text():
    rng = random.Random(12)
    alphabet = "ab./\\-_Z9é \n:"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert list(path_matches(text)) == REFERENCE.findall(text), text


def test_a_long_run_without_a_suffix_gives_no_hint_and_a_path_after_it_still_counts():
    text = "x" * 200_000 + " see memoryapp/tokens.py"
    assert list(path_matches(text)) == ["memoryapp/tokens.py"]
    assert {"memoryapp", "tokens", "py"} <= path_hints([{"role": "user", "content": text}])
