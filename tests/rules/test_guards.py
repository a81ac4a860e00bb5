"""Unit tests for memoryapp.rules.guard (pure Python: no database, no Django)."""

from __future__ import annotations

import random
import re
import string
import time
import unicodedata

import pytest

from memoryapp.rules import classify
from memoryapp.rules.classify import default_confidence, extract_keywords, infer_scope, infer_type
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.rules.secret_scan import SECRET_PATTERNS, find_secret_family
from memoryapp.rules.validation import (
    AUTO_SOURCE_CAP,
    MAX_CONTENT_CHARS,
    MAX_KEY_CHARS,
    MAX_TITLE_CHARS,
    SCOPES,
    TYPES,
    clean_tags,
    normalize_key,
)

SENSITIVE = "content appears to contain sensitive credentials"


@pytest.fixture
def guard() -> MemoryGuard:
    return MemoryGuard()


# --- constants and errors --------------------------------------------------------


def test_constants() -> None:
    assert (MAX_KEY_CHARS, MAX_TITLE_CHARS, MAX_CONTENT_CHARS, AUTO_SOURCE_CAP) == (
        80,
        120,
        4000,
        50,
    )
    assert SCOPES == ("user", "project")
    assert TYPES == (
        "preference",
        "profile",
        "project_fact",
        "workflow",
        "decision",
        "constraint",
        "note",
    )


def test_errors_are_value_errors() -> None:
    assert issubclass(MemoryValidationError, ValueError)
    assert issubclass(SensitiveMemoryError, ValueError)
    assert not issubclass(SensitiveMemoryError, MemoryValidationError)
    assert str(SensitiveMemoryError()) == SENSITIVE


# --- normalize_key ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("  Hello World!! ", "hello_world"),
        ("my-key.name!", "my_key_name"),
        ("version 3.2", "version_3_2"),
        ("用户 偏好", "用户_偏好"),
        ("Café au lait", "café_au_lait"),
        ("ÜBER Straße", "über_straße"),
        ("a\tb\n c", "a_b_c"),
        ("__x__", "x"),
        ("A__B", "a_b"),
        ("a _-_ b", "a_b"),
        ("snake_case_key", "snake_case_key"),
        ("Ключ номер 1", "ключ_номер_1"),
        ("٣ arabic-indic digit", "٣_arabic_indic_digit"),
        ("emoji 🎉 party", "emoji_party"),
    ],
)
def test_normalize_key_examples(key: str, expected: str) -> None:
    assert normalize_key(key) == expected


def test_normalize_key_decomposed_accent_composes() -> None:
    decomposed = unicodedata.normalize("NFD", "Café au lait")
    assert decomposed != "Café au lait"
    assert normalize_key(decomposed) == "café_au_lait"


def test_normalize_key_keeps_combining_marks_inside_words() -> None:
    # Devanagari vowel signs and virama are marks (Mc/Mn), not letters: dropping
    # them would cut "हिन्दी" into pieces.
    assert normalize_key("हिन्दी नोट") == "हिन्दी_नोट"


def test_normalize_key_drops_leading_stray_mark() -> None:
    assert normalize_key("\u0301abc") == "abc"
    assert normalize_key("- \u0301abc") == "abc"


@pytest.mark.parametrize("key", ["", "   ", "!!!", "-_-", "\u0301", " \t "])
def test_normalize_key_empty(key: str) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory key is empty after normalization$"):
        normalize_key(key)


@pytest.mark.parametrize("key", [None, 3, b"bytes", ["a"]])
def test_normalize_key_non_string(key: object) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory key must be a string$"):
        normalize_key(key)  # type: ignore[arg-type]


def test_normalize_key_length_limit() -> None:
    assert normalize_key("k" * 80) == "k" * 80
    assert normalize_key("k" * 81) == "k" * 80
    assert normalize_key("K" * 200) == "k" * 80
    # The limit applies after normalisation: collapsed separators do not count.
    assert normalize_key("a" + " " * 100 + "b") == "a_b"


def test_normalize_key_cut_keeps_trailing_underscore_like_agentao() -> None:
    assert normalize_key("a" * 79 + " b") == "a" * 79 + "_"
    assert normalize_key("a" * 80 + "_x") == "a" * 80


# --- title and content -----------------------------------------------------------


def test_validate_title_strips_and_limits(guard: MemoryGuard) -> None:
    assert guard.validate_title("  Hello World!! ") == "Hello World!!"
    assert guard.validate_title("t" * 120) == "t" * 120
    assert guard.validate_title("t" * 121) == "t" * 120
    assert guard.validate_title("  " + "t" * 121 + "  ") == "t" * 120
    assert guard.validate_title("用户 偏好") == "用户 偏好"


@pytest.mark.parametrize(
    "key", ["a\nb", "a\rb", "a\r\nb", "trailing\n", "\nleading", "a\u2028b", "a\x0bb", "a\x85b"]
)
def test_validate_title_single_line(guard: MemoryGuard, key: str) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory key/title must be single-line$"):
        guard.validate_title(key)


def test_validate_title_tab_is_allowed(guard: MemoryGuard) -> None:
    assert guard.validate_title("a\tb") == "a\tb"


def test_validate_title_non_string(guard: MemoryGuard) -> None:
    with pytest.raises(MemoryValidationError, match="must be a string"):
        guard.validate_title(None)  # type: ignore[arg-type]


def test_validate_content_limits(guard: MemoryGuard) -> None:
    assert guard.validate_content("  hi \n") == "hi"
    assert guard.validate_content("c" * 4000) == "c" * 4000
    # Surrounding whitespace does not count towards the limit.
    assert guard.validate_content("  " + "c" * 4000 + "\n\n") == "c" * 4000
    with pytest.raises(MemoryValidationError) as excinfo:
        guard.validate_content("c" * 4001)
    assert str(excinfo.value) == "Memory content exceeds max length (4001 > 4000)"
    with pytest.raises(MemoryValidationError) as excinfo:
        guard.validate_content(" " + "c" * 5000 + " ")
    assert str(excinfo.value) == "Memory content exceeds max length (5000 > 4000)"


@pytest.mark.parametrize("content", ["", "   ", "\n\t\n"])
def test_validate_content_empty(guard: MemoryGuard, content: str) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory content is empty$"):
        guard.validate_content(content)


def test_validate_content_non_string(guard: MemoryGuard) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory content must be a string$"):
        guard.validate_content(42)  # type: ignore[arg-type]


def test_validate_content_keeps_inner_newlines(guard: MemoryGuard) -> None:
    assert guard.validate_content("line one\nline two") == "line one\nline two"


# --- check -----------------------------------------------------------------------


def test_check_returns_normalized_title_content(guard: MemoryGuard) -> None:
    assert guard.check("  Hello World!! ", "  likes tea  ") == (
        "hello_world",
        "Hello World!!",
        "likes tea",
    )


def test_check_order_title_before_key_before_content(guard: MemoryGuard) -> None:
    with pytest.raises(MemoryValidationError, match="single-line"):
        guard.check("!!!\n", "")
    with pytest.raises(MemoryValidationError, match="empty after normalization"):
        guard.check("!!!", "")
    with pytest.raises(MemoryValidationError, match="content is empty"):
        guard.check("ok", "   ")


def test_check_validates_content_before_sensitive(guard: MemoryGuard) -> None:
    with pytest.raises(MemoryValidationError, match=r"\(4001 > 4000\)"):
        guard.check("k", "password=hunter2hunter2 " + "x" * 3977)


def test_check_refuses_secret_in_content(guard: MemoryGuard) -> None:
    with pytest.raises(SensitiveMemoryError):
        guard.check("deploy", "use password=hunter2hunter2 for staging")


def test_check_refuses_secret_in_key(guard: MemoryGuard) -> None:
    secret = "sk-" + "Ab1" * 10
    with pytest.raises(SensitiveMemoryError) as excinfo:
        guard.check(f"openai key {secret}", "the key for the demo")
    assert secret not in str(excinfo.value)


def test_subclass_can_extend_detect_sensitive() -> None:
    class CodenameGuard(MemoryGuard):
        def detect_sensitive(self, content: str) -> None:
            super().detect_sensitive(content)
            if "bluebird" in content.lower():
                raise SensitiveMemoryError()

    strict = CodenameGuard()
    with pytest.raises(SensitiveMemoryError):
        strict.check("project", "Project Bluebird ships in May")
    with pytest.raises(SensitiveMemoryError):
        strict.check("k", "token=" + "q" * 12)
    assert strict.check("project", "Project Robin ships in May")[2] == "Project Robin ships in May"


def test_subclass_can_relax_detect_sensitive() -> None:
    class PermissiveGuard(MemoryGuard):
        def detect_sensitive(self, content: str) -> None:
            return None

    content = "password=hunter2hunter2"
    with pytest.raises(SensitiveMemoryError):
        MemoryGuard().check("k", content)
    assert PermissiveGuard().check("k", content) == ("k", "k", content)


# --- scope -----------------------------------------------------------------------


def test_infer_scope_user_prefix() -> None:
    assert infer_scope("user_language", []) == "user"
    assert infer_scope("username", []) == "project"
    assert infer_scope("the_user_name", []) == "project"
    assert infer_scope("build_cmd", []) == "project"


@pytest.mark.parametrize("tag", ["user", "preference", "profile", "personal"])
def test_infer_scope_user_tags_case_insensitive(tag: str) -> None:
    for variant in (tag, tag.upper(), tag.capitalize(), f"  {tag} "):
        assert infer_scope("k", ["misc", variant]) == "user"


def test_infer_scope_other_tags_are_project() -> None:
    assert infer_scope("k", ["users", "preferences", "workflow"]) == "project"
    assert infer_scope("k", None) == "project"  # type: ignore[arg-type]


def test_infer_scope_explicit_wins_both_ways() -> None:
    assert infer_scope("user_language", ["preference"], scope="project") == "project"
    assert infer_scope("build_cmd", [], scope="user") == "user"
    assert infer_scope("k", [], scope=" User ") == "user"


@pytest.mark.parametrize("scope", [None, "", "  "])
def test_infer_scope_blank_explicit_means_inferred(scope: str | None) -> None:
    assert infer_scope("user_x", [], scope=scope) == "user"
    assert infer_scope("x", [], scope=scope) == "project"


@pytest.mark.parametrize("scope", ["global", "users", "session"])
def test_infer_scope_invalid_explicit(scope: str) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory scope must be one of: user, project$"):
        infer_scope("k", [], scope=scope)


def test_infer_scope_non_string_explicit() -> None:
    with pytest.raises(MemoryValidationError, match="scope must be a string"):
        infer_scope("k", [], scope=1)  # type: ignore[arg-type]


# --- type ------------------------------------------------------------------------

PRIORITY = ["preference", "workflow", "decision", "constraint", "profile", "project_fact"]


def test_infer_type_priority_example() -> None:
    assert infer_type(["constraint", "preference"]) == "preference"


@pytest.mark.parametrize(
    ("higher", "lower"),
    [(PRIORITY[i], PRIORITY[j]) for i in range(len(PRIORITY)) for j in range(i + 1, len(PRIORITY))],
)
def test_infer_type_priority_pairs(higher: str, lower: str) -> None:
    assert infer_type([lower, higher]) == higher
    assert infer_type([higher.upper(), lower]) == higher


@pytest.mark.parametrize("type_", PRIORITY)
def test_infer_type_single_tag(type_: str) -> None:
    assert infer_type(["misc", type_.title()]) == type_


def test_infer_type_fallback_note() -> None:
    assert infer_type([]) == "note"
    assert infer_type(["misc", "preferences", "project-fact"]) == "note"
    assert infer_type(["note"]) == "note"


def test_infer_type_explicit_wins() -> None:
    assert infer_type(["preference"], type="decision") == "decision"
    assert infer_type([], type="Note") == "note"
    assert infer_type(["workflow"], type=None) == "workflow"
    assert infer_type(["workflow"], type="") == "workflow"


@pytest.mark.parametrize("type_", ["fact", "notes", "project fact"])
def test_infer_type_invalid_explicit(type_: str) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory type must be one of: preference,"):
        infer_type([], type=type_)


# --- confidence, tags ------------------------------------------------------------


def test_default_confidence() -> None:
    assert default_confidence("explicit") == "explicit_user"
    assert default_confidence("crystallized") == "auto_summary"
    assert default_confidence("auto") == "auto_summary"


def test_clean_tags() -> None:
    assert clean_tags(None) == []
    assert clean_tags([]) == []
    assert clean_tags([" b ", "a", "", "  ", "b", "A", "a"]) == ["b", "a", "A"]
    assert clean_tags(t for t in ("x", "y", "x")) == ["x", "y"]
    assert clean_tags(("Tag",)) == ["Tag"]


@pytest.mark.parametrize("tags", [["ok", 1], ["ok", None], [b"bytes"]])
def test_clean_tags_rejects_non_string_items(tags: list[object]) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory tags must be strings$"):
        clean_tags(tags)  # type: ignore[arg-type]


@pytest.mark.parametrize("tags", ["user", 5])
def test_clean_tags_rejects_non_lists(tags: object) -> None:
    with pytest.raises(MemoryValidationError, match="^Memory tags must be a list of strings"):
        clean_tags(tags)  # type: ignore[arg-type]


# --- keywords --------------------------------------------------------------------


def test_keywords_title_words_longer_than_two() -> None:
    assert extract_keywords("Go to DB Setup", "X", []) == ["setup"]
    assert extract_keywords("API key rotation", "X", []) == ["api", "key", "rotation"]


def test_keywords_tags_lowercased_and_stop_words_removed() -> None:
    assert extract_keywords("", "X", ["Python", "The", "ci", "Ops Team"]) == [
        "ci",
        "ops team",
        "python",
    ]


def test_keywords_path_tokens_keep_case() -> None:
    content = "Edit README.md, agent.py and src/app/main.py; see Config.YAML"
    kws = extract_keywords("", content, [])
    for token in ("README.md", "agent.py", "src/app/main.py", "Config.YAML"):
        assert token in kws
    assert "readme.md" not in kws
    # The lower-case words of the paths are content words too; "and" is a stop word.
    assert {"agent", "src", "app", "main", "see"} <= set(kws)
    assert "and" not in kws and "edit" not in kws


def test_keywords_path_suffix_is_two_to_four_chars() -> None:
    assert "a.c" not in extract_keywords("", "a.c", [])
    assert extract_keywords("", "main.python", []) == ["main", "main.pyth", "python"]


def test_keywords_only_all_lowercase_ascii_words() -> None:
    kws = extract_keywords("", "Check TESTS run_tests now Ok café naïve __init__", [])
    assert kws == ["__init__", "now", "run_tests"]


def test_keywords_first_30_occurrences_repeats_count() -> None:
    content = " ".join(["abc"] * 29 + ["zzz", "yyy"])
    assert extract_keywords("", content, []) == ["abc", "zzz"]


def test_keywords_stop_words_count_towards_30() -> None:
    content = " ".join(["the"] * 30 + ["late"])
    assert extract_keywords("", content, []) == []


def test_keywords_sorted_code_point_and_capped_at_20() -> None:
    words = [f"w{chr(97 + i)}x" for i in range(25)]
    content = " ".join(reversed(words))
    kws = extract_keywords("", content, ["Zed"])
    assert kws == sorted(kws)
    assert len(kws) == 20
    assert kws == sorted([*words, "zed"])[:20]
    # Upper-case path tokens sort before lower-case words (code-point order).
    assert extract_keywords("", "zeta README.md", []) == ["README.md", "zeta"]


def test_keywords_dedupe_across_sources() -> None:
    assert extract_keywords("Deploy", "deploy deploy", ["DEPLOY"]) == ["deploy"]


def test_path_tokens_match_plain_findall() -> None:
    pattern = re.compile(r"[\w/]+\.\w{2,4}")
    rng = random.Random(7)
    alphabet = "ab/._ .é1"
    samples = ["a.pyxyz.md", "x.y.zz", "/a/b.cc/d.eee", "a..bb", "é.py", "", "...", "a/" * 50]
    samples += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)
    ]
    for sample in samples:
        assert classify._path_tokens(sample) == pattern.findall(sample), sample


# --- secrets ---------------------------------------------------------------------

OPENAI = "sk-" + "A1b2C3d4" * 6
OPENAI_PROJ = "sk-proj-" + "Xy9_Zw8-" * 5
ANTHROPIC = "sk-ant-api03-" + "Q7w_E5r-" * 10 + "AA"
GOOGLE = "AIza" + "SyD3x_Q-" * 4 + "abc"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_TEMP = "ASIA" + "Y34FZKBOKMUTVV7A"
GITHUB = "ghp_" + "a1B2c3D4e5F6" * 3
GITHUB_FINE = "github_pat_" + "11ABCDEFG0" * 3 + "_xyz"
SLACK = "xoxb-" + "1234567890-1234567890-abcdefgh"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

SECRET_SAMPLES = [
    ("openai_api_key", f"my OpenAI key is {OPENAI}"),
    ("openai_api_key", f"OPENAI_KEY={OPENAI_PROJ}"),
    ("anthropic_api_key", f"export ANTHROPIC_KEY=({ANTHROPIC})"),
    ("anthropic_api_key", "key sk-ant-api03-abcd"),
    ("google_api_key", f"maps key: {GOOGLE}"),
    ("aws_access_key_id", f"aws id {AWS} in us-east-1"),
    ("aws_access_key_id", f"temporary ({AWS_TEMP})"),
    ("github_token", f"push with {GITHUB}"),
    ("github_token", f"use {'gho_' + 'x' * 36}"),
    ("github_token", f"{'ghu_' + 'Y' * 40}"),
    ("github_token", f"{'ghs_' + '9' * 36}"),
    ("github_token", f"{'ghr_' + 'z1' * 18}"),
    ("github_token", f"pat {GITHUB_FINE}"),
    ("slack_token", f"slack bot {SLACK}"),
    ("slack_token", "xoxp-0123456789"),
    ("jwt", f"session cookie {JWT}"),
    ("bearer_token", "curl -H 'Bearer abcdefghijklmnopqrstuv0123'"),
    ("bearer_token", "bearer dGhpcyBpcyBhIHRva2Vu+/=~.-_"),
    ("authorization_header", "Authorization: Basic dXNlcjpwYXNzd29yZHBhc3N3b3Jk"),
    ("authorization_header", "authorization: Token 9944b09199c62bcf9418ad846dd0e4bb"),
    ("authorization_header", "Authorization: 9944b09199c62bcf9418ad846dd0e4bb"),
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----"),
    ("private_key", "key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg..."),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE"),
    ("private_key", "-----BEGIN EC PRIVATE KEY-----"),
    ("private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    ("credential_assignment", "password=hunter2hunter2"),
    ("credential_assignment", "db PASSWORD : S3cr3t!pass"),
    ("credential_assignment", "secret: abcdefgh"),
    ("credential_assignment", "token=abcd1234"),
    ("credential_assignment", "api_key = 0123456789abcdef"),
    ("credential_assignment", "API-KEY: 0123456789abcdef"),
    ("credential_assignment", "apikey=0123456789abcdef"),
    ("credential_assignment", "passwd=abcdefgh"),
    ("credential_assignment", "pwd: abcdefgh"),
    ("credential_assignment", "passphrase=correct-horse"),
    ("credential_assignment", "access_token=abcdefgh"),
    ("credential_assignment", "auth_token: abcdefgh"),
    ("credential_assignment", "client_secret=abcdefgh"),
    ("credential_assignment", "refresh_token=abcdefgh"),
    ("credential_assignment", "SECRET_KEY='django-insecure-abcdefgh'"),
    ("credential_assignment", "DB_PASSWORD=hunter2hunter2"),
    ("credential_assignment", "export GITHUB_TOKEN=abcdefgh123"),
    ("credential_assignment", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY"),
    ("credential_assignment", "x-api-key: abcdefgh1234"),
    ("credential_assignment", "run with --password=hunter2hunter2"),
    ("credential_assignment", '{"password": "hunter2hunter2"}'),
    ("credential_assignment", "token='abcdefgh'"),
    ("credential_assignment", "config.token := abcdefgh12"),
    ("credential_assignment", "password:\tabcdefgh"),
    ("credential_assignment", "password\n= hunter2hunter2"),
    ("credential_assignment", "password=\nhunter2hunter2"),
    ("credential_assignment", '"private_key_id": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"'),
    ("credential_assignment", "code_verifier=dBjftJeZ4CVP-mB92K27uhbUJU1p1r"),
    ("pem_key_block", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0B\n-----END PUBLIC KEY-----"),
    ("google_oauth_secret", "client secret GOCSPX-" + "aB3dE5fG7hI9jK1lM3nO5pQ"),
    ("aws_secret_access_key", "AWS secret access key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("gitlab_token", "glpat-" + "Xy7zW9vU5tS3rQ1pO0nM"),
    ("slack_token", "xapp-1-A0123456789-abcdefghij"),
    (
        "slack_webhook",
        "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx",
    ),
    ("stripe_key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe_key", "whsec_" + "abcdefghijklmnopqrstuvwx12"),
    ("twilio_key", "SK" + "2c3f0e9a7b6d5c4b3a29180f7e6d5c4b"),
    ("sendgrid_key", "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "T" * 43),
    ("npm_token", "npm_" + "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("pypi_token", "pypi-" + "AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAw"),
    ("vault_token", "hvs." + "CAESIJabcdefghijklmnopqrstuvwxyz"),
    ("digitalocean_token", "dop_v1_" + "0123456789abcdef" * 4),
    ("shopify_token", "shpat_" + "0123456789abcdef" * 2),
    ("mailgun_key", "key-" + "0123456789abcdef" * 2),
    ("azure_key", "AccountName=x;AccountKey=" + "abcdEFGH1234abcdEFGH1234abcd==;"),
    ("url_password", "db at https://admin:S3cretPw@db.example.com/app"),
    ("oauth_code", "https://app.example.com/cb?state=x&code=4%2F0AX4XfWh"),
    ("oauth_code", '{"code": "abcdefgh1234"}'),
    ("password_phrase", "fyi my password is hunter2"),
]


@pytest.mark.parametrize(("family", "text"), SECRET_SAMPLES)
def test_secret_refused(guard: MemoryGuard, family: str, text: str) -> None:
    assert find_secret_family(text) == family
    with pytest.raises(SensitiveMemoryError) as excinfo:
        guard.detect_sensitive(text)
    assert str(excinfo.value) == SENSITIVE
    assert excinfo.value.args == (SENSITIVE,)
    with pytest.raises(SensitiveMemoryError):
        guard.check("some key", f"note: {text} (keep safe)")


NEAR_MISSES = [
    # OpenAI / Anthropic: too short, or "sk-" inside a hyphenated word.
    "sk-" + "a" * 19,
    "task-management-and-planning-system",
    "risk-assessment-for-the-whole-project-plan",
    "sk-ant-short",
    # Google: 34 characters after the prefix.
    "AIza" + "B" * 34,
    # AWS: 15 characters, lower case, or part of a longer token.
    "AKIA" + "IOSFODNN7EXAMP",
    "akia" + "iosfodnn7example",
    "AKIA" + "IOSFODNN7EXAMPLE" + "X",
    "AKIDIOSFODNN7EXAMPLE",
    # GitHub: 35 characters, unknown prefix.
    "ghp_" + "a" * 35,
    "ghx_" + "a" * 40,
    # Slack: 9 characters, unknown letter.
    "xoxb-123456789",
    "xoxz-1234567890",
    # JWT: two segments, short third segment, header not JSON.
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc1234",
    "abJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmN",
    "eyJhbGciOiJIUzI1NiJ9.c3ViamVjdDEyMzQ.dozjgNryP4J3jVmN",
    # Bearer / Authorization without a credential.
    "Use bearer tokens for auth",
    "Send a Bearer token in the header",
    "Bearer abcdefghijklmnopqrs",
    "Authorization: Basic",
    "The Authorization: header carries the scheme",
    # Public material is not a private key.
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "BEGIN RSA PRIVATE KEY",
    # Assignments: short values, no separator, glued names, plurals.
    "password=hunter2",
    "token: abc",
    "password: at least 12 characters",
    "mypassword=hunter2hunter2",
    "csrftoken=abcdefghijk",
    "max_tokens: 4096",
    "num_tokens=123456789",
    "api key: see the vault",
    'password: "hunter2"',
    "token='abc def ghi'",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_miss_accepted(guard: MemoryGuard, text: str) -> None:
    assert find_secret_family(text) is None
    guard.detect_sensitive(text)


PROSE = [
    "Remember to rotate the password every month",
    "the token bucket algorithm limits requests per second",
    "Use bearer tokens for auth; never basic auth",
    "Password policy: minimum 12 characters, rotated quarterly",
    "The API key lives in the secrets manager, never in the repo",
    "Secrets are injected by the CI runner; tokens expire after 1 hour",
    "Ask the user before resetting a password or revoking a token",
    "Our tokenizer splits on whitespace; tokens longer than 20 chars are dropped",
    "Card 4111 1111 1111 1111 and SSN 078-05-1120 are test data",  # PII is out of scope
    "User prefers skim-reading: short-answers-with-bullet-points-first",
    "Authorization is handled by the gateway, see docs/auth.md",
]


@pytest.mark.parametrize("text", PROSE)
def test_prose_accepted(guard: MemoryGuard, text: str) -> None:
    assert find_secret_family(text) is None
    assert guard.check("note", text)[2] == text


def test_sensitive_error_never_contains_text(guard: MemoryGuard) -> None:
    for _family, text in SECRET_SAMPLES:
        with pytest.raises(SensitiveMemoryError) as excinfo:
            guard.check("k", text)
        rendered = f"{excinfo.value!s} {excinfo.value!r} {excinfo.value.args!r}"
        assert text not in rendered
        assert excinfo.value.__cause__ is None
        assert excinfo.value.__context__ is None


def test_detect_sensitive_non_string(guard: MemoryGuard) -> None:
    with pytest.raises(MemoryValidationError):
        guard.detect_sensitive(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["a-" * 10000, "a_" * 10000, "aaaa-" * 4000, "a/" * 10000])
def test_scans_are_linear_on_pathological_input(guard: MemoryGuard, text: str) -> None:
    # 20,000 characters: a quadratic scan takes seconds here, a linear one milliseconds.
    start = time.perf_counter()
    guard.detect_sensitive(text)
    extract_keywords("t", text, [])
    assert time.perf_counter() - start < 0.5


def test_secret_patterns_are_named_and_compiled() -> None:
    names = [name for name, _ in SECRET_PATTERNS]
    assert len(names) == len(set(names))
    assert all(isinstance(p, re.Pattern) for _, p in SECRET_PATTERNS)
    assert {family for family, _ in SECRET_SAMPLES} == set(names)


# --- parity with the reference runtime (Agentao 0.5.17), ASCII inputs only --------

agentao_guards = pytest.importorskip("agentao.memory.guards")


@pytest.fixture(scope="module")
def reference() -> object:
    return agentao_guards.MemoryGuard()


def _random_ascii(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


KEY_ALPHABET = string.ascii_letters + string.digits + "  __--..!?/\t" + string.punctuation
HAND_KEYS = [
    "  Hello World!! ",
    "my-key.name!",
    "version 3.2",
    "USER_Language",
    "a" * 79 + " b",
    "a" * 79 + "-" + "b" * 5,
    "a" * 80 + "_x",
    "_" * 10 + "x" * 90,
    "x" * 200,
    "--a--b--",
    "tab\there",
    "CamelCaseKey",
    "123 456",
]


def test_parity_normalize_key(reference: object) -> None:
    rng = random.Random(20240517)
    keys = HAND_KEYS + [_random_ascii(rng, KEY_ALPHABET, 0, 120) for _ in range(2000)]
    compared = 0
    for key in keys:
        try:
            expected = reference.normalize_key(key)  # type: ignore[attr-defined]
        except ValueError as exc:
            with pytest.raises(MemoryValidationError) as excinfo:
                normalize_key(key)
            assert str(excinfo.value) == str(exc)
            continue
        assert normalize_key(key) == expected, key
        compared += 1
    assert compared > 1500


WORDS = [
    "the",
    "and",
    "deploy",
    "Deploy",
    "TESTS",
    "Check",
    "run_tests",
    "__init__",
    "api",
    "db",
    "ok",
    "README.md",
    "agent.py",
    "src/app/main.py",
    "main.python",
    "x.c",
    "v2",
    "snake_case",
    "foo-bar",
    "a.b.cc",
    "CI",
    "prod",
    "staging",
    "with",
    "is",
]


def test_parity_extract_keywords(reference: object) -> None:
    rng = random.Random(5170)
    seps = [" ", " ", ", ", ". ", "\n", "/", "-", "(", ")"]
    for _ in range(1500):
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))
        content = "".join(rng.choice(WORDS) + rng.choice(seps) for _ in range(rng.randint(1, 60)))
        tag_pool = ["Python", "ops", "The", "CI", "user", "preference", "db", "a"]
        tags = clean_tags(rng.sample(tag_pool, rng.randint(0, 4)))
        expected = reference.extract_keywords(title, tags, content)  # type: ignore[attr-defined]
        assert extract_keywords(title, content, tags) == expected, (title, content, tags)


def test_parity_extract_keywords_random_text(reference: object) -> None:
    rng = random.Random(99)
    alphabet = string.ascii_letters + string.digits + "_/. .,-\n"
    for _ in range(1000):
        title = _random_ascii(rng, alphabet, 0, 40)
        content = _random_ascii(rng, alphabet, 1, 400)
        expected = reference.extract_keywords(title, [], content)  # type: ignore[attr-defined]
        assert extract_keywords(title, content, []) == expected


# --- the field a refusal names (MemoryValidationError.field, SensitiveMemoryError.field) ---
@pytest.mark.parametrize(
    ("key", "content", "field"),
    [
        ("two\nlines", "fine", "key"),
        ("!!!", "fine", "key"),
        ("fine", "   ", "content"),
        ("fine", "x" * (MAX_CONTENT_CHARS + 1), "content"),
    ],
)
def test_the_guard_names_the_refused_field(key: str, content: str, field: str) -> None:
    with pytest.raises(MemoryValidationError) as caught:
        MemoryGuard().check(key, content)
    assert caught.value.field == field


def test_a_credential_is_refused_on_the_field_that_held_it() -> None:
    with pytest.raises(SensitiveMemoryError) as caught:
        MemoryGuard().check("fine", f"the key is {AWS}")
    assert caught.value.field == "content"
    with pytest.raises(SensitiveMemoryError) as caught:
        MemoryGuard().check(f"key {AWS}", "fine")
    assert caught.value.field == "key"


def test_a_host_guard_refusal_is_attributed_by_the_caller() -> None:
    class Strict(MemoryGuard):
        def detect_sensitive(self, content: str) -> None:
            if "forbidden" in content:
                raise SensitiveMemoryError()  # a host's guard need not name the field

    with pytest.raises(SensitiveMemoryError) as caught:
        Strict().check("a forbidden key", "fine")
    assert caught.value.field == "key"
    assert str(caught.value) == "content appears to contain sensitive credentials"


def test_an_error_that_names_its_field_keeps_it_and_its_message() -> None:
    error = MemoryValidationError("Memory tags must be strings", field="tags")
    assert (str(error), error.field, error.args) == (
        "Memory tags must be strings",
        "tags",
        error.args,
    )
    assert MemoryValidationError("no field").field is None


def test_refusals_name_each_field_as_the_write_path_does() -> None:
    refused = MemoryGuard().refusals("two\nlines", f"the key is {AWS}", ["ok", f"tag {AWS}"])
    assert list(refused) == ["key", "content", "tags"]
    fields = {name: getattr(error, "field", None) for name, error in refused.items()}
    assert fields == {"key": "key", "content": "content", "tags": "tags"}
    assert isinstance(refused["content"], SensitiveMemoryError)
    assert MemoryGuard().refusals("fine", "fine", ["ok"]) == {}
