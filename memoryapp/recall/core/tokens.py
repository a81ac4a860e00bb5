"""Recall tokenisation (docs/behaviour.md §5): tokeniser, normal forms, query tokens, path hints."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "STOP_WORDS",
    "expand",
    "message_texts",
    "normal_form",
    "path_hints",
    "query_tokens",
    "token_set",
    "tokenize",
]

logger = logging.getLogger(__name__)

_STOP_WORDS_TEXT = """a an the is are was were be been have has had do does did will would can
could should may might shall to of in for on with at by from as into and or but not no so if then
that this it its i you we they my your"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())

# "CJK character": kana, the CJK ideograph blocks (basic, extension A, compatibility and the
# supplementary-plane extensions) and Hangul syllables.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
# "Latin letter or digit": the Latin script's letters (ASCII, Latin-1, Extended-A/B and
# Extended Additional, so "café咖啡" splits too) and the ASCII digits.
_LATIN = "A-Za-z0-9\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"

_HAS_CJK = re.compile(f"[{_CJK}]")
_CJK_RUN = re.compile(f"[{_CJK}]{{2,}}")
_BOUNDARY = re.compile(f"(?<=[{_LATIN}])(?=[{_CJK}])|(?<=[{_CJK}])(?=[{_LATIN}])")
# The split characters of docs/behaviour.md §5 become spaces, then str.split() splits on runs of
# (Unicode) whitespace: the same cut as one regex, about twice as fast.
SPLIT_CHARS = "/\\_-.,:;|@#$%^&*()+=[]{}<>?!'\""
_TO_SPACE = str.maketrans(dict.fromkeys(SPLIT_CHARS, " "))
_PATH = re.compile(r"[\w./\\-]+\.\w{2,6}")  # the rule; path_hints finds its matches linearly
_PATH_RUN = re.compile(r"[\w./\\-]+")
_TWO_WORD_CHARS = re.compile(r"\w\w")
_PATH_SUFFIX = re.compile(r"\w{2,6}")

HINT_MESSAGES = 10
HINT_PATHS = 20

_UNSET: Any = object()
_segment: Any = _UNSET  # jieba.lcut once loaded, None when jieba is not installed
_segment_lock = threading.Lock()


def _segmenter() -> Callable[[str], list[str]] | None:
    """Load jieba on first use; without it CJK runs stay whole (one warning per process)."""
    global _segment
    if _segment is _UNSET:
        with _segment_lock:
            if _segment is _UNSET:
                try:
                    with warnings.catch_warnings():
                        # jieba's last release has non-raw regex literals (SyntaxWarning).
                        warnings.simplefilter("ignore", SyntaxWarning)
                        import jieba
                except ImportError:
                    logger.warning(
                        "jieba is not installed: CJK text is matched as whole runs, not words "
                        "(install memoryapp[cjk] for word segmentation)"
                    )
                    _segment = None
                else:
                    # jieba reports its dictionary load at INFO/DEBUG on its own logger.
                    jieba.setLogLevel(logging.WARNING)
                    _segment = jieba.lcut
    return _segment


@functools.cache
def rules_id() -> str:
    """What the token sets depend on besides this code: ``"1"``, plus jieba's version if installed.

    Persisted recall snapshots record it and are ignored when it differs, so a new
    tokenisation rule (bump the number) or installing jieba never serves old postings.
    """
    try:
        jieba = importlib.metadata.version("jieba")
    except importlib.metadata.PackageNotFoundError:
        return "1"
    return f"1+jieba-{jieba}"


def _cjk_words(token: str) -> Iterator[str]:
    """The 2+ character words of the CJK runs inside ``token`` (nothing without jieba)."""
    segment = _segmenter()
    if segment is None:
        return
    for run in _CJK_RUN.findall(token):
        for word in segment(run):
            # The whole token is already there; keep the 2+ character CJK words.
            if len(word) > 1 and word != token and _HAS_CJK.match(word):
                yield word


def tokenize(text: str) -> list[str]:
    """Split ``text`` into recall tokens, in order of appearance (repeats kept).

    A space is inserted between a Latin letter or digit and a CJK character, the text is
    lower-cased and split on whitespace and the punctuation set of docs/behaviour.md §5; tokens
    of one character and stop words are dropped. When jieba is installed, a token holding CJK
    text is followed by the 2+ character words jieba finds in it (the whole run stays).

    Args:
        text: Any text (a query, a title, a keyword, a content prefix).

    Returns:
        The tokens, without their normal forms (see :func:`expand`).
    """
    if not text:
        return []
    has_cjk = _HAS_CJK.search(text) is not None
    if has_cjk:
        text = _BOUNDARY.sub(" ", text)
    words = text.lower().translate(_TO_SPACE).split()
    tokens = [t for t in words if len(t) > 1 and t not in STOP_WORDS]
    if not has_cjk:
        return tokens
    out: list[str] = []
    for token in tokens:
        out.append(token)
        if _HAS_CJK.search(token):
            out.extend(_cjk_words(token))
    return out


def normal_form(token: str) -> str | None:
    """The normalised form of one token, or None when it has none.

    ``v`` followed only by digits gives the digits (``v3`` → ``3``); otherwise a token longer
    than 3 characters ending in ``s`` but not ``ss`` loses the ``s`` (``keywords`` →
    ``keyword``, ``class`` and ``bus`` stay).

    Args:
        token: One token from :func:`tokenize`.

    Returns:
        The other form, or None.
    """
    if token[:1] == "v" and token[1:].isdecimal():  # isdecimal() is regex \d
        return token[1:]
    if len(token) > 3 and token[-1] == "s" and token[-2] != "s":
        return token[:-1]
    return None


def expand(tokens: Iterable[str]) -> set[str]:
    """The set of ``tokens`` plus each one's normal form (originals are kept).

    A normal form is kept even when it is a stop word or one character (``v3`` adds ``3``).

    Args:
        tokens: Tokens from :func:`tokenize`.

    Returns:
        A new set.
    """
    return set().union(*map(_WORD_FORMS.forms, tokens))


class _WordForms(dict[str, tuple[str, ...]]):
    """Memo: split word → the tokens it contributes (itself and its normal form, or nothing).

    Words repeat heavily across memories, so indexing pays the filters once per distinct
    word; the memo is dropped when it reaches its cap (about 20 MB per process at most).
    """

    MAX = 200_000

    def __missing__(self, word: str) -> tuple[str, ...]:
        if len(word) < 2 or word in STOP_WORDS:
            value: tuple[str, ...] = ()
        else:
            form = normal_form(word)
            value = (word,) if form is None else (word, form)
        if len(self) >= self.MAX:
            self.clear()
        self[word] = value
        return value

    def forms(self, token: str) -> tuple[str, ...]:
        """``token`` and its normal form (even for a stop word or a 1-character token)."""
        value = self[token]
        if value:
            return value
        form = normal_form(token)
        return (token,) if form is None else (token, form)


_WORD_FORMS = _WordForms()


def token_set(text: str) -> set[str]:
    """``expand(tokenize(text))``, computed faster (the indexing hot path).

    Args:
        text: Any text.

    Returns:
        A new set.
    """
    if not text:
        return set()
    if _HAS_CJK.search(text) is not None:
        return expand(tokenize(text))
    return set().union(*map(_WORD_FORMS.__getitem__, text.lower().translate(_TO_SPACE).split()))


def query_tokens(query: str) -> frozenset[str]:
    """The query's token set after expansion; its size is the N of the scoring shares.

    Args:
        query: The current user message.

    Returns:
        The expanded token set (empty for a query of stop words only).
    """
    return frozenset(token_set(query))


def message_texts(messages: Iterable[Any] | None) -> Iterator[str]:
    """The texts of the last 10 messages: string contents and the text blocks of list contents.

    Args:
        messages: Chat messages (mappings with ``content``); anything else is skipped.

    Yields:
        Each text, oldest message first.
    """
    if not messages:
        return
    for message in list(messages)[-HINT_MESSAGES:]:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list | tuple):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "text":
                    text = block.get("text")
                    if isinstance(text, str):
                        yield text


def path_matches(text: str) -> Iterator[str]:
    """``_PATH.finditer(text)``'s matches, in time linear in ``len(text)``.

    ``re`` tries the pattern at every start inside a long run of path characters
    that holds no ``.xx`` suffix, rescanning the run each time: quadratic (80,000
    characters took 32 s). Every match lies inside one maximal run of
    ``[\\w./\\-]`` (its suffix characters are path characters too), and starts at
    the run's first character: the greedy ``[…]+`` then backs off to the *last*
    ``.`` at index 1 or more that is followed by two word characters, and
    ``\\w{2,6}`` takes up to six. No later match fits in the same run (it would
    need a later such ``.``), so each run gives at most one match, found by
    walking its dots from the right — every character is looked at a bounded
    number of times. ``tests/recall/test_tokens.py`` checks this against ``finditer``.
    """
    for run in _PATH_RUN.finditer(text):
        start, end = run.span()
        dot = text.rfind(".", start + 1, end)
        while dot != -1 and not _TWO_WORD_CHARS.match(text, dot + 1, end):
            dot = text.rfind(".", start + 1, dot)
        if dot != -1:
            suffix = _PATH_SUFFIX.match(text, dot + 1, end)
            assert suffix is not None  # two word characters follow the dot (the loop's test)
            yield text[start : suffix.end()]


def path_hints(messages: Iterable[Any] | None) -> frozenset[str]:
    """The tokens of the file paths mentioned in the last 10 messages (the hint term).

    Paths are the ``[\\w./\\\\-]+\\.\\w{2,6}`` matches, in message order, repeats counted, at
    most 20; each is tokenised and expanded like the query.

    Args:
        messages: Chat messages, oldest first (see :func:`message_texts`).

    Returns:
        The union of the paths' expanded tokens.
    """
    paths: list[str] = []
    for text in message_texts(messages):
        for path in path_matches(text):
            paths.append(path)
            if len(paths) == HINT_PATHS:
                break
        if len(paths) == HINT_PATHS:
            break
    hints: set[str] = set()
    for path in paths:
        hints |= token_set(path)
    return frozenset(hints)
