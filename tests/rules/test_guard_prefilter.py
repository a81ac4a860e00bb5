"""The guard's fast paths give the answers of the plain definitions (pure Python, no database).

``find_secret_family`` runs a default secret pattern only when a literal it needs
is present (``secret_scan._prefilter_mask``). These tests check that each condition is
necessary — every match of a pattern has its bit set — on generated matches of
every pattern (by hand-written generators and by Hypothesis' ``from_regex``), on
every sample of tests/rules/test_guards.py, and on random text mixing the trigger
fragments; and that the answer equals the unfiltered loop over ``SECRET_PATTERNS``.
The ASCII fast path of ``normalize_key``, the line-break scan of ``validate_title``
and the suffix-driven ``_path_tokens`` are compared with the original
implementations, kept here as references, on the bench corpus and edge cases.
"""

from __future__ import annotations

import importlib.util
import random
import re
import string
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.rules import classify, secret_scan, validation
from memoryapp.rules.classify import STOP_WORDS, extract_keywords
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.rules.secret_scan import SECRET_PATTERNS, find_secret_family
from memoryapp.rules.validation import MAX_KEY_CHARS, normalize_key

from .test_guards import NEAR_MISSES, PROSE, SECRET_SAMPLES

# --- references: the definitions the fast paths must agree with ---------------------


def unfiltered_find_secret_family(text: str) -> str | None:
    """``find_secret_family`` as defined: every pattern, in order, no prefilter."""
    for candidate in (text, secret_scan.visible(text)):
        for name, pattern in SECRET_PATTERNS:
            if pattern.search(candidate):
                return name
    return None


_REF_PATH_RUN = re.compile(r"[\w/]+")
_REF_PATH_SUFFIX = re.compile(r"\.\w{2,4}")


def reference_path_tokens(content: str) -> list[str]:
    """The run-by-run scan ``_path_tokens`` used before (itself ``findall``'s result)."""
    tokens: list[str] = []
    pos = 0
    while run := _REF_PATH_RUN.search(content, pos):
        suffix = _REF_PATH_SUFFIX.match(content, run.end())
        if suffix is None:
            pos = run.end()
        else:
            tokens.append(content[run.start() : suffix.end()])
            pos = suffix.end()
    return tokens


def reference_normalize_key(key: str) -> str:
    """``normalize_key`` before its ASCII fast path (the character loop for every key)."""
    if not isinstance(key, str):
        raise MemoryValidationError("Memory key must be a string")
    text = unicodedata.normalize("NFC", key.strip().lower())
    out: list[str] = []
    after_word_char = False
    for char in text:
        if char.isalnum() or (after_word_char and unicodedata.category(char).startswith("M")):
            out.append(char)
            after_word_char = True
        else:
            out.append("_")
            after_word_char = False
    normalized = re.sub(r"_+", "_", "".join(out)).strip("_")
    if not normalized:
        raise MemoryValidationError("Memory key is empty after normalization")
    return normalized[:MAX_KEY_CHARS]


def _outcome(function, *args):
    try:
        return ("ok", function(*args))
    except MemoryValidationError as exc:
        return ("error", str(exc))


BIT = {name: bit for bit, name, _ in secret_scan._DEFAULT_ENTRIES}


def assert_prefilter_sound(text: str) -> None:
    """Every default pattern that matches ``text`` has its bit set; same family either way."""
    for candidate in (text, secret_scan.visible(text)):
        mask = secret_scan._prefilter_mask(candidate)
        for bit, name, pattern in secret_scan._DEFAULT_ENTRIES:
            if pattern.search(candidate):
                assert mask & bit, (name, candidate)
    assert find_secret_family(text) == unfiltered_find_secret_family(text), text


# --- the fold used for the case-insensitive patterns ------------------------------


def test_default_entries_are_the_secret_patterns() -> None:
    assert [(name, pattern) for _, name, pattern in secret_scan._DEFAULT_ENTRIES] == list(
        SECRET_PATTERNS
    )
    assert len(set(BIT.values())) == len(SECRET_PATTERNS)


def test_fold_maps_every_case_insensitive_match_of_a_letter_to_that_letter() -> None:
    # The (?i) prefilter words are ASCII; the fold must turn every character that
    # ``re`` matches case-insensitively against one of their letters into exactly
    # that letter. Enumerated over every code point (surrogates cannot be in a str
    # that reaches the guard from JSON or the ORM, but are checked too).
    every_char = "".join(map(chr, range(sys.maxunicode + 1)))
    words = ["bearer", "authorization", *secret_scan._CREDENTIAL_NAME_PARTS]
    letters = sorted({c for word in words for c in word if c.isalpha()})
    specials = set()
    for letter in letters:
        for char in re.findall("(?i)" + letter, every_char):
            assert secret_scan._fold_for_prefilter(char) == letter, (letter, hex(ord(char)))
            if char not in (letter, letter.upper()):
                specials.add(char)
    # The four non-ASCII letters named in the comment of guards.py, no others.
    assert specials <= {"\u0130", "\u0131", "\u017f", "\u212a"}
    # Caseless characters of the names are matched literally by re and kept by the fold.
    for char in "_-":
        assert re.findall("(?i)" + re.escape(char), every_char) == [char]
        assert secret_scan._fold_for_prefilter(char) == char


def test_fold_keeps_words_contiguous() -> None:
    # One character in, one character out for these (str.lower maps per character).
    for text in ["PAſſWORD", "\u0130\u0131", "TOKEN", "to\u212aen", "ß api_KEY", "Ab-_:="]:
        folded = secret_scan._fold_for_prefilter(text)
        assert folded == "".join(secret_scan._fold_for_prefilter(c) for c in text)
    assert "password" in secret_scan._fold_for_prefilter("PAſſWORD")
    assert "token" in secret_scan._fold_for_prefilter("Σ to\u212aen Σ")
    assert "authorization" in secret_scan._fold_for_prefilter("AUTHOR\u0130ZAT\u0131ON")


# --- generated matches of every pattern -------------------------------------------

KEY_CHARS = string.ascii_letters + string.digits + "_-"
TOKEN68 = string.ascii_letters + string.digits + "._~+/=-"
CASE_SPECIALS = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


def _run(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


def _any_case(rng: random.Random, word: str) -> str:
    out = []
    for char in word:
        roll = rng.random()
        if char in CASE_SPECIALS and roll < 0.15:
            out.append(rng.choice(CASE_SPECIALS[char]))
        elif roll < 0.55:
            out.append(char.upper())
        else:
            out.append(char)
    return "".join(out)


def _ws(rng: random.Random, low: int = 0) -> str:
    return _run(rng, " \t", low, 3)


def _credential_name(rng: random.Random) -> str:
    name = rng.choice(
        ["password", "passwd", "passphrase", "pwd", "secret", "token"]
        + [f"{a}{sep}key" for a in ("api", "secret", "access") for sep in ("", "_", "-")]
        + ["code_verifier", "codeverifier", "private_key_id", "private-keyid"]
    )
    words = [
        _run(rng, string.ascii_letters + string.digits, 1, 6) for _ in range(rng.randint(0, 2))
    ]
    prefix = "".join(word + rng.choice("_-") for word in words)
    return prefix + _any_case(rng, name)


GENERATORS = {
    "anthropic_api_key": lambda r: "sk-ant-" + _run(r, KEY_CHARS, 10, 40),
    "openai_api_key": lambda r: "sk-" + _run(r, KEY_CHARS, 20, 60),
    "google_api_key": lambda r: "AIza" + _run(r, KEY_CHARS, 35, 40),
    "aws_access_key_id": lambda r: (
        r.choice(["AKIA", "ASIA"]) + _run(r, string.ascii_uppercase + "234567", 16, 16)
    ),
    "github_token": lambda r: (
        "gh" + r.choice("pousr") + "_" + _run(r, string.ascii_letters + string.digits, 36, 50)
        if r.random() < 0.6
        else "github_pat_" + _run(r, string.ascii_letters + string.digits + "_", 22, 40)
    ),
    "slack_token": lambda r: (
        "xox"
        + r.choice("baprs")
        + "-"
        + _run(r, string.ascii_letters + string.digits + "-", 10, 30)
    ),
    "jwt": lambda r: (
        "eyJ"
        + _run(r, KEY_CHARS, 5, 20)
        + ".eyJ"
        + _run(r, KEY_CHARS, 5, 20)
        + "."
        + _run(r, KEY_CHARS, 8, 30)
    ),
    "bearer_token": lambda r: _any_case(r, "bearer") + _ws(r, 1) + _run(r, TOKEN68, 20, 40),
    "authorization_header": lambda r: (
        _any_case(r, "authorization")
        + r.choice(["", '"', "'"])
        + _ws(r)
        + r.choice(":=")
        + _ws(r)
        + r.choice(["", '"', "'"])
        + r.choice(["", _run(r, string.ascii_letters, 1, 1) + _run(r, KEY_CHARS, 0, 8) + _ws(r, 1)])
        + _run(r, TOKEN68, 20, 40)
    ),
    "pem_key_block": lambda r: (
        "-----BEGIN "
        + (word := r.choice(["PUBLIC", "RSA PUBLIC", "SSH2 ENCRYPTED", "X9"]))
        + " KEY-----"
        + _run(r, string.ascii_letters + string.digits + "+/=\n", 0, 60)
        + "-----END "
        + r.choice([word, "OTHER"])
        + " KEY-----"
    ),
    "google_oauth_secret": lambda r: "GOCSPX-" + _run(r, KEY_CHARS, 20, 40),
    "aws_secret_access_key": lambda r: (
        _any_case(r, "aws")
        + r.choice([" secret: ", "_SECRET=", " key ", "\n"])
        + "aB1"
        + _run(r, string.ascii_letters + string.digits + "/+", 37, 37)
    ),
    "gitlab_token": lambda r: "glpat-" + _run(r, KEY_CHARS, 20, 30),
    "slack_webhook": lambda r: (
        "https://" + _any_case(r, "hooks.slack.com/services/") + _run(r, KEY_CHARS + "/", 20, 50)
    ),
    "stripe_key": lambda r: (
        (r.choice(["sk", "rk"]) + r.choice(["_live_", "_test_"]) if r.random() < 0.7 else "whsec_")
        + _run(r, string.ascii_letters + string.digits, 20, 40)
    ),
    "twilio_key": lambda r: r.choice(["SK", "AC"]) + _run(r, "0123456789abcdef", 32, 32),
    "sendgrid_key": lambda r: "SG." + _run(r, KEY_CHARS, 22, 22) + "." + _run(r, KEY_CHARS, 43, 43),
    "npm_token": lambda r: "npm_" + _run(r, string.ascii_letters + string.digits, 36, 36),
    "pypi_token": lambda r: "pypi-" + _run(r, KEY_CHARS, 32, 60),
    "vault_token": lambda r: r.choice(["hvs.", "hvb."]) + _run(r, KEY_CHARS, 24, 40),
    "digitalocean_token": lambda r: (
        "do" + r.choice("opr") + "_v1_" + _run(r, "0123456789abcdef", 64, 64)
    ),
    "shopify_token": lambda r: (
        "shp" + r.choice(["at", "ss", "ca", "pa"]) + "_" + _run(r, "0123456789abcdefABCDEF", 32, 32)
    ),
    "mailgun_key": lambda r: "key-" + _run(r, "0123456789abcdef", 32, 32),
    "azure_key": lambda r: (
        _any_case(r, r.choice(["accountkey", "sharedaccesskey"]))
        + _ws(r)
        + "="
        + _ws(r)
        + _run(r, string.ascii_letters + string.digits + "+/", 20, 40)
    ),
    "url_password": lambda r: (
        r.choice(["https", "postgres", "redis", "amqp", "git+ssh"])
        + "://"
        + _run(r, string.ascii_letters + string.digits, 1, 10)
        + ":"
        + r.choice(string.ascii_letters + string.digits)
        + _run(r, string.ascii_letters + string.digits + "!%", 0, 12)
        + "@"
        + _run(r, string.ascii_lowercase, 1, 10)
    ),
    "oauth_code": lambda r: (
        (
            r.choice(["?", "&"]) + _any_case(r, "code") + "="
            if r.random() < 0.5
            else '"' + _any_case(r, "code") + '"' + _ws(r) + ":" + _ws(r) + '"'
        )
        + _run(r, string.ascii_letters + string.digits + "%.-", 8, 20)
    ),
    "password_phrase": lambda r: (
        _any_case(r, r.choice(["my", "our", "the", "your"]))
        + " "
        + _any_case(r, r.choice(["password", "passphrase", "passcode", "passwd"]))
        + " "
        + _any_case(r, r.choice(["is", "was"]))
        + " "
        + _run(r, string.ascii_letters, 3, 8)
        + r.choice("0123456789!@#$%")
        + _run(r, string.ascii_letters + string.digits, 2, 6)
    ),
    "private_key": lambda r: (
        "-----BEGIN "
        + "".join(
            _run(r, string.ascii_uppercase + string.digits, 1, 8) + " "
            for _ in range(r.randint(0, 2))
        )
        + "PRIVATE KEY"
        + r.choice(["", " BLOCK"])
        + "-----"
    ),
    "credential_assignment": lambda r: (
        _credential_name(r)
        + r.choice(["", '"', "'"])
        + _ws(r)
        + r.choice([":=", ":", "="])
        + _ws(r)
        + r.choice(["", "", "", "\n"])
        + (
            r.choice("\"'") + _run(r, string.ascii_letters + string.digits + "!@#$%^&*()", 8, 20)
            if r.random() < 0.3
            else r.choice(string.ascii_letters + string.digits) + _run(r, KEY_CHARS + "!/", 7, 20)
        )
    ),
}

# Left contexts the patterns' look-behinds accept, and arbitrary right contexts.
LEFT = ["", " ", "key: ", "(", "\n", "export X=", "é ", "中 ", '"', "x, "]
RIGHT = ["", " ", ")", ".", "\n", " and more text", "'", " é"]


def test_generators_cover_every_family() -> None:
    assert set(GENERATORS) == {name for name, _ in SECRET_PATTERNS}


@pytest.mark.parametrize("family", sorted(GENERATORS))
def test_every_generated_match_passes_the_prefilter(family: str) -> None:
    rng = random.Random(f"prefilter-{family}")
    pattern = dict(SECRET_PATTERNS)[family]
    for _ in range(3000):
        text = rng.choice(LEFT) + GENERATORS[family](rng) + rng.choice(RIGHT)
        assert pattern.search(text), text  # the generator makes matches
        assert secret_scan._prefilter_mask(text) & BIT[family], text
        assert find_secret_family(text) == unfiltered_find_secret_family(text) is not None


def test_existing_samples_are_caught_as_before() -> None:
    for family, text in SECRET_SAMPLES:
        assert find_secret_family(text) == family == unfiltered_find_secret_family(text)
        assert_prefilter_sound(text)
        assert_prefilter_sound(f"note: {text} (keep safe)")
    for text in NEAR_MISSES + PROSE:
        assert find_secret_family(text) is None is unfiltered_find_secret_family(text)
        assert_prefilter_sound(text)


HYPOTHESIS_SHAPES = {
    "aws_secret_access_key": r"(?i:aws)[^A-Za-z0-9/+]{1,20}aB1[A-Za-z0-9/+]{37}",
}


@pytest.mark.parametrize(
    ("family", "pattern"), SECRET_PATTERNS, ids=[n for n, _ in SECRET_PATTERNS]
)
def test_hypothesis_matches_of_each_pattern_pass_the_prefilter(family, pattern) -> None:
    # Hypothesis cannot satisfy stacked look-aheads; such a family is generated from a
    # simpler regex whose full matches are matches of the pattern (asserted below).
    strategy = (
        st.from_regex(HYPOTHESIS_SHAPES[family], fullmatch=True)
        if family in HYPOTHESIS_SHAPES
        else st.from_regex(pattern)
    )

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy, st.data())
    def check(text: str, data) -> None:
        # Also with the case-insensitive letters swapped for their non-ASCII matches.
        if pattern.flags & re.IGNORECASE and data.draw(st.booleans()):
            swapped = "".join(
                data.draw(st.sampled_from([c, *CASE_SPECIALS[c.lower()]]))
                if c.lower() in CASE_SPECIALS
                else c
                for c in text
            )
            if pattern.search(swapped):
                text = swapped
        assert pattern.search(text)
        assert secret_scan._prefilter_mask(text) & BIT[family]
        assert_prefilter_sound(text)

    check()


# Whole triggers, their pieces and near variants, separators and case/Unicode twists.
FRAGMENTS = [
    "sk-", "sk-ant-", "sk", "-ant-", "AIza", "AIz", "aiza", "AKIA", "ASIA", "AKI", "ghp_", "gho_",
    "ghu_", "ghs_", "ghr_", "ghx_", "gh", "github_pat_", "github_", "xoxb-", "xoxz-", "xox",
    "eyJ", ".eyJ", "eyj", ".", "-----BEGIN ", "-----BEGIN", "PRIVATE KEY", " BLOCK", "-----",
    "bearer", "Bearer ", "BEARER\t", "bea", "authorization", "Authorization: ", "AUTHOR",
    "pass", "password", "PASSWD", "passphrase", "pwd", "secret", "SECRET_KEY", "token",
    "Token", "api_key", "api-key", "apikey", "API", "access_key", "access-key", "accesskey",
    "db_", "x-", "my", "=", ":", ":=", '"', "'", " ", "\t", "\n", "_", "-", "/", "+", "~",
    "\u0130", "\u0131", "\u017f", "\u212a", "é", "中", "Σ",
    "GOCSPX-", "aws", "AWS", "glpat-", "xapp-1-", "hooks.slack.com/services/", "sk_live_",
    "rk_test_", "whsec_", "SK", "AC", "SG.", "npm_", "pypi-", "hvs.", "hvb.", "dop_v1_",
    "shpat_", "key-", "AccountKey=", "sharedaccesskey =", "https://", "://", "@", "?code=",
    "&code=", '"code": "', "my password is ", "our passphrase was ", "${", "<redacted>",
    "****", "-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----", "0123456789abcdef",
    "\u200b", "\ufeff", "\u00ad",
]  # fmt: skip
FILLER = string.ascii_letters + string.digits


def _mixed_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.7:
            parts.append(rng.choice(FRAGMENTS))
        else:
            parts.append(_run(rng, FILLER, 1, 40))
    return "".join(parts)


def test_random_mixtures_of_trigger_fragments_agree_with_the_unfiltered_loop() -> None:
    rng = random.Random(8)
    hits = 0
    for _ in range(30000):
        text = _mixed_text(rng)
        assert_prefilter_sound(text)
        hits += unfiltered_find_secret_family(text) is not None
    assert hits > 1000  # the mixtures do reach the patterns, not only their prefilters


def test_hypothesis_mixtures_agree_with_the_unfiltered_loop() -> None:
    pieces = st.one_of(
        st.sampled_from(FRAGMENTS), st.text(alphabet=FILLER, max_size=40), st.text(max_size=20)
    )

    @settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(pieces, max_size=14).map("".join))
    def check(text: str) -> None:
        assert_prefilter_sound(text)

    check()


def test_patterns_added_by_other_code_are_always_run(monkeypatch) -> None:
    extra = ("internal_token", re.compile(r"ACME-[0-9]{6}"))
    monkeypatch.setattr(
        secret_scan, "SECRET_PATTERNS", (*secret_scan._DEFAULT_SECRET_PATTERNS, extra)
    )
    assert find_secret_family("ticket ACME-123456") == "internal_token"
    assert find_secret_family(f"x {SECRET_SAMPLES[0][1]}") == SECRET_SAMPLES[0][0]
    assert find_secret_family("plain prose") is None
    monkeypatch.setattr(secret_scan, "SECRET_PATTERNS", (extra,))
    assert find_secret_family(SECRET_SAMPLES[0][1]) is None
    assert find_secret_family("ACME-654321") == "internal_token"


# --- keys, titles, path tokens: fast paths against the original code ----------------


def _load_corpus():
    path = Path(__file__).resolve().parents[2] / "bench" / "corpus.py"
    spec = importlib.util.spec_from_file_location("bench_corpus_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_corpus(2000, seed=1234)


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    corpus, extras, queries = _load_corpus()
    texts = [t for key, value, tags in corpus + extras for t in (key, value, *tags)]
    return texts + [query for query, _ in queries]


PATH_EDGES = [
    "", ".", "..", "a.", ".py", "a.py", "a..py", "a/.py", "/.py", "a.b.cc", "x.py/y.py",
    "file.python", "a.py.cc", "a.pyxyz.md", "/a/b.cc/d.eee", "__.__", "é.py", "中文.md",
    "1.23", "v1.2.3", "٣.٣٣", "a.\u0661\u0662", "Ⅻ.py", "a" * 5000 + ".x", "a.bb" * 1000,
    "a/" * 3000, ("word " * 50) + "end.", "src/app/main.py, README.md and agent.py.",
]  # fmt: skip


def test_path_tokens_equal_the_original_on_the_corpus(corpus_texts) -> None:
    findall = re.compile(r"[\w/]+\.\w{2,4}").findall
    with_paths = 0
    for text in corpus_texts + PATH_EDGES:
        expected = reference_path_tokens(text)
        assert classify._path_tokens(text) == expected, text
        if len(text) < 1000:
            assert expected == findall(text)
        with_paths += bool(expected)
    assert with_paths > 200  # the corpus does mention paths


def test_path_tokens_equal_the_original_on_random_text() -> None:
    rng = random.Random(31)
    alphabet = "ab_/..  xé中1\n-Ⅻ٣A"
    for _ in range(40000):
        text = _run(rng, alphabet, 0, 40)
        assert classify._path_tokens(text) == reference_path_tokens(text), text


def test_keywords_on_the_corpus_are_unchanged(corpus_texts) -> None:
    rng = random.Random(5)
    for text in corpus_texts:
        title = rng.choice(corpus_texts)[:120]
        got = extract_keywords(title, text, ["Docs", "ci"])
        words = {w.lower() for w in re.findall(r"\w+", title) if len(w) > 2} | {"docs", "ci"}
        words |= set(reference_path_tokens(text))
        words |= set(re.findall(r"\b[a-z_]{3,}\b", text)[:30])
        assert got == sorted(words - STOP_WORDS)[:20]


KEY_EDGES = [
    "", "   ", "_", "__a__", "  Hello World!! ", "my-key.name!", "version 3.2", "a" * 200,
    "a" * 79 + " b", "\u212aelvin", "\u0130stanbul", "Café au lait", "Cafe\u0301", "用户 偏好",
    "x\u0301", "\u0301x", "tab\there", "\x1c\x1dsep", "ǅemal", "ß", "ＡＢＣ",
]  # fmt: skip


def test_normalize_key_equals_the_original(corpus_texts) -> None:
    rng = random.Random(77)
    alphabet = string.ascii_letters + string.digits + " _-.!?/\t\n" + "\u212a\u0130é\u0301中ß"
    keys = KEY_EDGES + corpus_texts
    keys += [_run(rng, alphabet, 0, 100) for _ in range(20000)]
    keys += [_run(rng, string.printable, 0, 120) for _ in range(20000)]
    for key in keys:
        assert _outcome(normalize_key, key) == _outcome(reference_normalize_key, key), key


def test_title_line_breaks_equal_the_original() -> None:
    every_char = "".join(map(chr, range(sys.maxunicode + 1)))
    assert set(validation._LINE_BREAK_CHAR.findall(every_char)) == validation._LINE_BREAKS
    guard = MemoryGuard()
    for char in sorted(validation._LINE_BREAKS):
        for key in (f"a{char}b", char, f"key{char}"):
            assert _outcome(guard.validate_title, key) == (
                "error",
                "Memory key/title must be single-line",
            )
    for key in ["plain key", "\t tab \t", "a\u2027b", "x\x1fy", "é 中"]:
        assert _outcome(guard.validate_title, key) == ("ok", key.strip())
