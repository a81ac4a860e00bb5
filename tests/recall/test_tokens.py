"""The tokeniser of docs/behaviour.md §5: tokens, normal forms, CJK runs and path hints."""

from __future__ import annotations

import logging
import random
import re
import sys
import types

import pytest

from memoryapp.recall.core import tokens
from memoryapp.recall.core.tokens import expand, path_hints, path_matches, query_tokens, tokenize

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
    text = "x" * 200_000 + " see memoryapp/recall/core/tokens.py"
    assert list(path_matches(text)) == ["memoryapp/recall/core/tokens.py"]
    assert {"memoryapp", "tokens", "py"} <= path_hints([{"role": "user", "content": text}])


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

    def test_cjk_latin_boundaries(self, monkeypatch):
        monkeypatch.setattr(tokens, "_segment", None)  # the cut alone, as without jieba
        assert tokenize("Python版本管理") == ["python", "版本管理"]
        assert tokenize("用2个GPU训练") == ["gpu", "训练"]  # 用, 2 and 个 are one character
        assert tokenize("中文abc中文") == ["中文", "abc", "中文"]
        assert tokenize("ab1中文") == ["ab1", "中文"]
        assert tokenize("café咖啡") == ["café", "咖啡"]  # a Latin letter beyond ASCII
        assert tokenize("データベースv2") == ["データベース", "v2"]
        assert tokenize("한국어abc") == ["한국어", "abc"]

    def test_cjk_latin_boundaries_with_jieba(self, monkeypatch):
        pytest.importorskip("jieba")  # installed by the dev extra
        monkeypatch.setattr(tokens, "_segment", tokens._UNSET)
        # The same cut; each whole run is then followed by the words jieba finds in it.
        assert tokenize("Python版本管理") == ["python", "版本管理", "版本", "管理"]
        assert tokenize("用2个GPU训练") == ["gpu", "训练"]
        assert tokenize("我们决定使用Docker部署服务") == [
            *("我们决定使用", "我们", "决定", "使用"),
            "docker",
            *("部署服务", "部署", "服务"),
        ]

    def test_cjk_without_jieba_keeps_runs_whole_and_warns_once(self, monkeypatch, caplog):
        monkeypatch.setattr(tokens, "_segment", tokens._UNSET)
        monkeypatch.setitem(sys.modules, "jieba", None)  # makes ``import jieba`` fail
        with caplog.at_level(logging.WARNING, logger="memoryapp.recall.core.tokens"):
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
