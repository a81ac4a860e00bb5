"""Write-time rules for memories: validation, secret refusal, key normalisation, classification."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "AUTO_SOURCE_CAP",
    "MAX_CONTENT_CHARS",
    "MAX_KEY_CHARS",
    "MAX_TITLE_CHARS",
    "SCOPES",
    "SECRET_PATTERNS",
    "STOP_WORDS",
    "TYPES",
    "MemoryGuard",
    "MemoryValidationError",
    "SensitiveMemoryError",
    "clean_tags",
    "default_confidence",
    "extract_keywords",
    "find_secret_family",
    "infer_scope",
    "infer_type",
    "normalize_key",
]

MAX_KEY_CHARS = 80
MAX_TITLE_CHARS = 120
MAX_CONTENT_CHARS = 4000
AUTO_SOURCE_CAP = 50

SCOPES = ("user", "project")
TYPES = ("preference", "profile", "project_fact", "workflow", "decision", "constraint", "note")

# Tags (case-insensitive) that put a memory in user scope when no scope is given.
_USER_SCOPE_TAGS = frozenset({"user", "preference", "profile", "personal"})
# Tag-to-type inference order (SPEC §2); "note" is the fallback, never inferred from a tag.
_TYPE_PRIORITY = ("preference", "workflow", "decision", "constraint", "profile", "project_fact")

# fmt: off
STOP_WORDS = frozenset({
    "a", "an", "the", "is", "in", "of", "to", "and", "or", "for",
    "with", "on", "at", "by", "be", "it", "as", "are", "was", "were",
})
# fmt: on
_MAX_KEYWORDS = 20
_MAX_CONTENT_WORDS = 30

_SENSITIVE_MESSAGE = "content appears to contain sensitive credentials"

# Every boundary str.splitlines() honours: a title is rendered on one line of the
# prompt, so a vertical tab or U+2028 would break it just like "\n" or "\r".
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_LINE_BREAK_CHAR = re.compile("[" + re.escape("".join(sorted(_LINE_BREAKS))) + "]")

_UNDERSCORE_RUN = re.compile(r"_+")
_TITLE_WORD = re.compile(r"\w+")
_PATH_RUN = re.compile(r"[\w/]+")
_PATH_SUFFIX = re.compile(r"\.\w{2,4}")
_PATH_SUFFIX_PROBE = re.compile(r"\.\w{2}")
_ASCII_NON_ALNUM_RUN = re.compile(r"[^a-z0-9]+")
_LOWER_WORD = re.compile(r"\b[a-z_]{3,}\b")


class MemoryValidationError(ValueError):
    """A memory was refused because of bad input; ``str(error)`` is the reason."""


class SensitiveMemoryError(ValueError):
    """A memory was refused because its content looks like a credential.

    The message is always the same fixed sentence and never includes the refused text.
    """

    def __init__(self, message: str = _SENSITIVE_MESSAGE) -> None:
        super().__init__(message)


# --- Secret families (SPEC §8) ----------------------------------------------------
# Each pattern is anchored on a left boundary so that an ordinary hyphenated or
# underscored word ("task-management-…", "risk-…") never starts a match mid-word.

#: Anthropic API keys: ``sk-ant-`` plus 10+ key characters. The literal prefix never
#: occurs in prose, so a shorter tail than OpenAI's is enough evidence (it also
#: catches a key pasted half-way). Checked before OpenAI so the family is named right.
ANTHROPIC_KEY_RE = re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{10,}")

#: OpenAI-style secret keys: ``sk-`` plus 20+ characters of ``[A-Za-z0-9_-]``
#: (covers legacy ``sk-…`` and project ``sk-proj-…`` keys).
OPENAI_KEY_RE = re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}")

#: Google API keys: ``AIza`` plus 35 characters of ``[A-Za-z0-9_-]`` (39 in all, the
#: documented shape). Longer runs are matched too: only the shape's minimum is required.
GOOGLE_API_KEY_RE = re.compile(r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}")

#: AWS access key ids: ``AKIA`` (long-term) or ``ASIA`` (temporary) plus exactly 16
#: upper-case letters or digits, as a whole token (case-sensitive).
AWS_ACCESS_KEY_RE = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")

#: GitHub tokens: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` plus 36+ alphanumerics,
#: and fine-grained personal access tokens ``github_pat_`` plus 22+ characters.
GITHUB_TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"
)

#: Slack tokens: ``xoxb-``/``xoxa-``/``xoxp-``/``xoxr-``/``xoxs-`` plus 10+ characters.
SLACK_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])xox[baprs]-[A-Za-z0-9-]{10,}")

#: JSON Web Tokens: three base64url segments of 8+ characters joined by ``.``, the
#: first two (header and payload, both JSON objects) starting ``eyJ``.
JWT_RE = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}"
)

# An HTTP credential: 20+ characters of the RFC 6750 token68 alphabet.
_CREDENTIAL = r"[A-Za-z0-9._~+/=-]{20,}"

#: ``Bearer <credential>`` (any case). "Use bearer tokens for auth" is prose: the
#: word after "bearer" is far shorter than a credential.
BEARER_TOKEN_RE = re.compile(r"(?i)\bbearer[ \t]+" + _CREDENTIAL)

#: ``Authorization: [scheme] <credential>`` (any case, ``:`` or ``=``). A bare
#: "Authorization: Basic" has no credential and is accepted.
AUTHORIZATION_HEADER_RE = re.compile(
    r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?"
    + _CREDENTIAL
)

#: PEM/OpenSSH/PGP private-key armour: the header alone is refused
#: (``-----BEGIN RSA PRIVATE KEY-----``, ``-----BEGIN OPENSSH PRIVATE KEY-----``,
#: ``-----BEGIN PGP PRIVATE KEY BLOCK-----``…). Public keys and certificates pass.
PRIVATE_KEY_RE = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")

#: Credential assignments, case-insensitive: a credential name, ``=``/``:``/``:=``
#: with optional spaces or tabs (never a line break), and a value of 8+ non-space
#: characters; a quoted value needs 8+ characters inside its quotes. Names:
#: ``password``, ``passwd``, ``passphrase``, ``pwd``, ``secret``, ``token``,
#: ``api_key``/``api-key``/``apikey``, ``secret_key``, ``access_key`` (``_``, ``-``
#: or nothing between the words).
#: The name must not be glued to a preceding letter, digit or ``_`` (``mypassword``,
#: ``csrftoken`` are not names), but it may be the last word of an identifier made of
#: ``_``/``-``-joined words, so ``access_token``, ``auth_token``, ``client_secret``,
#: ``DB_PASSWORD``, ``GITHUB_TOKEN``, ``aws_secret_access_key`` and ``x-api-key`` are
#: names too. A closing quote after the name is allowed (``"password": "…"``).
#: Plurals and prose ("max_tokens: 4096", "rotate the password monthly") do not match.
#: A match never starts right after "word-": the identifier is taken from its first
#: word, which keeps the scan linear on long hyphenated runs.
CREDENTIAL_ASSIGNMENT_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?<![A-Za-z0-9]-)(?:[A-Za-z0-9]+[_-])*"
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|secret[_-]?key|access[_-]?key)"
    r"[\"']?[ \t]*(?::=|[:=])[ \t]*(?:[\"'][^\s\"']{8,}|[^\s\"']\S{7,})"
)

#: The default secret families, in the order they are tried: ``(name, pattern)``.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic_api_key", ANTHROPIC_KEY_RE),
    ("openai_api_key", OPENAI_KEY_RE),
    ("google_api_key", GOOGLE_API_KEY_RE),
    ("aws_access_key_id", AWS_ACCESS_KEY_RE),
    ("github_token", GITHUB_TOKEN_RE),
    ("slack_token", SLACK_TOKEN_RE),
    ("jwt", JWT_RE),
    ("bearer_token", BEARER_TOKEN_RE),
    ("authorization_header", AUTHORIZATION_HEADER_RE),
    ("private_key", PRIVATE_KEY_RE),
    ("credential_assignment", CREDENTIAL_ASSIGNMENT_RE),
)


# --- The prefilter: a cheap necessary condition per pattern -------------------------
# Running the 11 patterns costs ~40 µs on a 220-character memory: their leading
# look-behinds keep ``re`` from skipping ahead to a literal, so each one tries every
# position. Plain substring tests (``in`` on ``str``, a C scan) are ~20× cheaper, and
# almost every memory fails all of them. ``_prefilter_mask`` names the patterns whose
# literal necessary condition holds; only those are run. Each condition below is
# *implied by* a match of its pattern (argued next to it), so skipping a pattern whose
# condition fails never changes the result: ``find_secret_family`` names the same
# family as running every pattern in order (tests/test_guard_prefilter.py checks it
# by enumeration and by property tests against the unfiltered loop).
#
# The case-sensitive patterns (no ``(?i)``) are tested on the text itself. The three
# ``(?i)`` patterns (bearer, authorization, credential assignment) are tested on the
# text folded by ``_fold_for_prefilter``: a letter of ``re``'s case-insensitive match
# of an ASCII word is that ASCII letter, its upper case, or one of four non-ASCII
# letters (U+0130 İ and U+0131 ı match ``i``, U+017F ſ matches ``s``, U+212A KELVIN
# SIGN matches ``k``: the complete list for CPython's ``re``, enumerated over every
# code point in the test). The fold maps the first three to ASCII and then lower-cases;
# ``str.lower`` maps A-Z to a-z and the Kelvin sign to ``k``, and is applied character
# by character (only the Greek sigma looks at its neighbours, and only to choose its
# own lower case), so every character that ``re`` matched against ``L`` becomes exactly
# ``L``, one character for one, and the matched word appears, contiguous, in the fold.
# Characters that lower-case to ASCII letters elsewhere only make a condition hold more
# often, which is safe. ``_`` and ``-`` inside names are caseless: ``re`` matches them
# literally, and the fold keeps them.
_PREFILTER_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})

# Every name of CREDENTIAL_ASSIGNMENT_RE contains one of these (after the fold):
# password/passwd/passphrase contain "pass"; "pwd"; "secret" (also in secret[_-]?key);
# "token"; api[_-]?key is one of "apikey"/"api_key"/"api-key"; access[_-]?key is one of
# "accesskey"/"access_key"/"access-key".
_CREDENTIAL_NAME_PARTS = (
    "pass", "pwd", "secret", "token",
    "apikey", "api_key", "api-key", "accesskey", "access_key", "access-key",
)  # fmt: skip


def _fold_for_prefilter(text: str) -> str:
    """Lower-case ``text`` so that every ``(?i)`` match of an ASCII word shows as that word."""
    if not text.isascii():
        text = text.translate(_PREFILTER_FOLD)
    return text.lower()


# One bit per default pattern.
_BITS = {name: 1 << i for i, (name, _) in enumerate(SECRET_PATTERNS)}
_ANTHROPIC = _BITS["anthropic_api_key"]
_OPENAI = _BITS["openai_api_key"]
_GOOGLE = _BITS["google_api_key"]
_AWS = _BITS["aws_access_key_id"]
_GITHUB = _BITS["github_token"]
_SLACK = _BITS["slack_token"]
_JWT = _BITS["jwt"]
_BEARER = _BITS["bearer_token"]
_AUTHORIZATION = _BITS["authorization_header"]
_PRIVATE_KEY = _BITS["private_key"]
_CREDENTIAL_ASSIGNMENT = _BITS["credential_assignment"]


def _prefilter_mask(text: str) -> int:
    """The bits of the default patterns whose necessary literal condition holds in ``text``."""
    mask = 0
    if "sk-" in text:
        # ANTHROPIC_KEY_RE matches the literal "sk-ant-", OPENAI_KEY_RE the literal "sk-"
        # (case-sensitive patterns); "sk-ant-" contains "sk-".
        mask |= _OPENAI
        if "sk-ant-" in text:
            mask |= _ANTHROPIC
    if "AIza" in text:  # GOOGLE_API_KEY_RE: the literal "AIza".
        mask |= _GOOGLE
    if "AKIA" in text or "ASIA" in text:  # AWS_ACCESS_KEY_RE: the literal "AKIA" or "ASIA".
        mask |= _AWS
    if "_" in text and (
        "ghp_" in text
        or "gho_" in text
        or "ghu_" in text
        or "ghs_" in text
        or "ghr_" in text
        or "github_pat_" in text
    ):
        # GITHUB_TOKEN_RE: "gh" + one of p/o/u/s/r + "_", or the literal "github_pat_";
        # each contains "_".
        mask |= _GITHUB
    if "xox" in text:  # SLACK_TOKEN_RE: the literal "xox" (then [baprs]-).
        mask |= _SLACK
    if ".eyJ" in text:  # JWT_RE: its second segment starts with the literal ".eyJ".
        mask |= _JWT
    if "-----BEGIN " in text:  # PRIVATE_KEY_RE: the literal "-----BEGIN " (then …KEY).
        mask |= _PRIVATE_KEY
    folded = _fold_for_prefilter(text)
    if "bearer" in folded:  # BEARER_TOKEN_RE: "bearer" in any case (see the fold above).
        mask |= _BEARER
    if ":" in text or "=" in text:
        # AUTHORIZATION_HEADER_RE: "authorization" in any case, then ":" or "=".
        if "authorization" in folded:
            mask |= _AUTHORIZATION
        # CREDENTIAL_ASSIGNMENT_RE: a name in any case (see _CREDENTIAL_NAME_PARTS), then
        # ":=", ":" or "=" (each contains ":" or "=").
        for part in _CREDENTIAL_NAME_PARTS:
            if part in folded:
                mask |= _CREDENTIAL_ASSIGNMENT
                break
    return mask


#: SECRET_PATTERNS as defined here, with each pattern's prefilter bit.
_DEFAULT_SECRET_PATTERNS = SECRET_PATTERNS
_DEFAULT_ENTRIES: tuple[tuple[int, str, re.Pattern[str]], ...] = tuple(
    (1 << i, name, pattern) for i, (name, pattern) in enumerate(SECRET_PATTERNS)
)
# By identity (a compiled pattern's own hash digests its whole program on every call).
_PREFILTER_BITS: dict[int, int] = {id(pattern): bit for bit, _, pattern in _DEFAULT_ENTRIES}


def find_secret_family(text: str) -> str | None:
    """Name the first default secret family found in ``text``.

    The same answer as searching every pattern of :data:`SECRET_PATTERNS` in order;
    a default pattern is skipped only when a literal it needs is absent from ``text``
    (``_prefilter_mask``). Patterns that other code put into :data:`SECRET_PATTERNS`
    are always searched.

    Args:
        text: Any text.

    Returns:
        The family name from :data:`SECRET_PATTERNS`, or ``None`` when nothing matches.
        The matched text itself is never returned, so callers cannot leak it.
    """
    mask = _prefilter_mask(text)
    if SECRET_PATTERNS is _DEFAULT_SECRET_PATTERNS:
        if mask:
            for bit, name, pattern in _DEFAULT_ENTRIES:
                if mask & bit and pattern.search(text):
                    return name
        return None
    for name, pattern in SECRET_PATTERNS:
        bit = _PREFILTER_BITS.get(id(pattern))
        if (bit is None or mask & bit) and pattern.search(text):
            return name
    return None


# --- Keys, tags, classification ---------------------------------------------------


def _require_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise MemoryValidationError(f"{what} must be a string")
    return value


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def normalize_key(key: str) -> str:
    """Normalise a memory key into its identity form (SPEC §2).

    Strip, lower-case, turn every run of characters that are not letters, digits or
    ``_`` (whitespace included) into one ``_``, collapse ``_`` runs, strip ``_`` at
    both ends, then keep the first 80 characters.

    "Letters and digits" are those of every script: a character is kept when
    ``str.isalnum()`` is true (the same set as ``[^\\W_]`` in CPython). Unicode
    combining marks (categories M*) are not alphanumeric, yet they are part of words
    in many scripts (Devanagari vowel signs, decomposed accents), so a mark is kept
    when it follows a kept letter, digit or mark. The text is NFC-composed after
    lower-casing so that a decomposed "Café" and a precomposed one give one key.
    ASCII keys normalise exactly as Agentao's do: in particular a trailing ``_`` left
    by the 80-character cut is kept, as Agentao keeps it.

    Args:
        key: The key as given by the caller.

    Returns:
        The normalised key, 1 to 80 characters.

    Raises:
        MemoryValidationError: ``key`` is not a string, or nothing is left.
    """
    text = _require_str(key, "Memory key").strip().lower()
    if text.isascii():
        # The same result, without the loop: NFC leaves ASCII alone, an ASCII
        # character is alphanumeric exactly when it is [a-z0-9] once lower-cased,
        # and ASCII has no combining marks, so each maximal run of other characters
        # becomes one "_" (what the loop's "_" per character and the collapse give).
        normalized = _ASCII_NON_ALNUM_RUN.sub("_", text).strip("_")
        if not normalized:
            raise MemoryValidationError("Memory key is empty after normalization")
        return normalized[:MAX_KEY_CHARS]
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    after_word_char = False
    for char in text:
        if char.isalnum() or (after_word_char and _is_mark(char)):
            out.append(char)
            after_word_char = True
        else:
            out.append("_")
            after_word_char = False
    normalized = _UNDERSCORE_RUN.sub("_", "".join(out)).strip("_")
    if not normalized:
        raise MemoryValidationError("Memory key is empty after normalization")
    return normalized[:MAX_KEY_CHARS]


def clean_tags(tags: Iterable[str] | None) -> list[str]:
    """Clean a tag list: strip each tag, drop empties, drop repeats.

    Case is kept as given and repeats are exact (case-sensitive) repeats; the first
    occurrence wins its position.

    Args:
        tags: ``None`` or an iterable of strings. A bare string is refused rather than
            split into characters.

    Returns:
        The cleaned tags, in first-occurrence order.

    Raises:
        MemoryValidationError: ``tags`` is a string or not iterable, or an item is not
            a string.
    """
    if tags is None:
        return []
    if isinstance(tags, str | bytes):
        raise MemoryValidationError("Memory tags must be a list of strings, not a string")
    try:
        items = list(tags)
    except TypeError:
        raise MemoryValidationError("Memory tags must be a list of strings") from None
    seen: set[str] = set()
    cleaned: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise MemoryValidationError("Memory tags must be strings")
        tag = item.strip()
        if tag and tag not in seen:
            seen.add(tag)
            cleaned.append(tag)
    return cleaned


def _explicit_choice(value: object, allowed: tuple[str, ...], what: str) -> str | None:
    """Canonicalise an explicit scope/type; ``None`` or blank means "not given"."""
    if value is None:
        return None
    text = _require_str(value, what).strip().lower()
    if not text:
        return None
    if text not in allowed:
        raise MemoryValidationError(f"{what} must be one of: {', '.join(allowed)}")
    return text


def infer_scope(key_normalized: str, tags: Iterable[str] | None, scope: str | None = None) -> str:
    """Choose the scope of a memory (SPEC §2).

    Args:
        key_normalized: The key after :func:`normalize_key`.
        tags: The memory's tags.
        scope: An explicit scope; it wins when given. Matched case-insensitively after
            stripping; ``None`` or a blank string means "not given".

    Returns:
        ``"user"`` or ``"project"``: the explicit scope, else ``"user"`` when the key
        starts with ``user_`` or a tag is ``user``/``preference``/``profile``/
        ``personal`` (any case), else ``"project"``.

    Raises:
        MemoryValidationError: The explicit scope is not one of :data:`SCOPES`, or the
            tags are malformed.
    """
    explicit = _explicit_choice(scope, SCOPES, "Memory scope")
    lowered = {tag.lower() for tag in clean_tags(tags)}
    if explicit is not None:
        return explicit
    if _require_str(key_normalized, "Memory key").startswith("user_"):
        return "user"
    if lowered & _USER_SCOPE_TAGS:
        return "user"
    return "project"


def infer_type(tags: Iterable[str] | None, type: str | None = None) -> str:
    """Choose the type of a memory (SPEC §2).

    Args:
        tags: The memory's tags.
        type: An explicit type; it wins when given. Matched case-insensitively after
            stripping; ``None`` or a blank string means "not given".

    Returns:
        The explicit type, else the first of ``preference``, ``workflow``,
        ``decision``, ``constraint``, ``profile``, ``project_fact`` found among the
        tags (any case), else ``"note"``.

    Raises:
        MemoryValidationError: The explicit type is not one of :data:`TYPES`, or the
            tags are malformed.
    """
    explicit = _explicit_choice(type, TYPES, "Memory type")
    lowered = {tag.lower() for tag in clean_tags(tags)}
    if explicit is not None:
        return explicit
    for candidate in _TYPE_PRIORITY:
        if candidate in lowered:
            return candidate
    return "note"


def default_confidence(source: str) -> str:
    """Return the confidence implied by a memory's source.

    Args:
        source: ``"explicit"``, ``"crystallized"`` or ``"auto"``.

    Returns:
        ``"explicit_user"`` for ``"explicit"``, otherwise ``"auto_summary"``.
    """
    return "explicit_user" if source == "explicit" else "auto_summary"


def _path_tokens(content: str) -> list[str]:
    """Return ``re.findall(r"[\\w/]+\\.\\w{2,4}", content)``, in linear time.

    The plain ``findall`` retries from every character of a long ``[\\w/]`` run that
    is not followed by ``.xx`` (quadratic: 0.15 s on 4000 characters). Every start
    inside one maximal run reaches the same run end, so they all succeed or fail
    together: the scan ``findall`` performs is, equivalently, "take the next run of
    ``[\\w/]`` (from the end of the last token, or from the start of a maximal run),
    and keep it with the ``\\.\\w{2,4}`` at its end if there is one".

    This walks the suffixes instead of the runs (most memories have none, and a
    memory has far fewer suffixes than words): every token ends with a suffix match
    ``\\.\\w{2,4}`` (``finditer`` finds each of them, with the same greedy extent:
    a suffix holds one ``.``, at its start, so they never overlap), and a suffix at
    ``k`` makes a token exactly when ``content[k - 1]`` is in ``[\\w/]`` at or after
    the end of the last token; the token then starts where that run of ``[\\w/]``,
    read backwards from ``k - 1``, stops — at a character outside ``[\\w/]`` or at the
    end of the last token. Read backwards by matching ``[\\w/]+`` forwards in the
    reversed text; no character is read backwards twice (a suffix's ``.`` stops the
    next one), so the whole scan stays linear.
    """
    if "." not in content:  # every token contains ".": the common case, at C speed
        return []
    first = _PATH_SUFFIX_PROBE.search(content)
    if first is None:  # every token contains a match of \.\w{2}
        return []
    tokens: list[str] = []
    size = len(content)
    reverse = content[::-1]
    last_end = 0
    for suffix in _PATH_SUFFIX.finditer(content, first.start()):
        dot = suffix.start()
        if dot <= last_end:  # the run before it would be empty (or inside the last token)
            continue
        # content[j] is reverse[size - 1 - j]: the run ending at content[dot - 1],
        # not reaching back before content[last_end].
        run = _PATH_RUN.match(reverse, size - dot, size - last_end)
        if run is None:
            continue
        tokens.append(content[dot - (run.end() - run.start()) : suffix.end()])
        last_end = suffix.end()
    return tokens


def extract_keywords(title: str, content: str, tags: Iterable[str] | None) -> list[str]:
    """Compute the search/recall keywords of a memory (SPEC §2).

    The set of: the title's ``\\w+`` words longer than 2 characters, lower-cased; the
    tags (cleaned as by :func:`clean_tags`), lower-cased; the content's path-like
    tokens ``[\\w/]+\\.\\w{2,4}`` with their case kept; the first 30 occurrences
    (repeats count) of ``\\b[a-z_]{3,}\\b`` in the content. Stop words are removed,
    the rest sorted by code point and the first 20 kept.

    Args:
        title: The memory's title.
        content: The memory's content.
        tags: The memory's tags.

    Returns:
        Up to 20 distinct keywords in code-point order.

    Raises:
        MemoryValidationError: A non-string title/content or malformed tags.
    """
    title = _require_str(title, "Memory title")
    content = _require_str(content, "Memory content")
    words: set[str] = {w.lower() for w in _TITLE_WORD.findall(title) if len(w) > 2}
    words.update(tag.lower() for tag in clean_tags(tags))
    words.update(_path_tokens(content))
    words.update(_LOWER_WORD.findall(content)[:_MAX_CONTENT_WORDS])
    return sorted(words - STOP_WORDS)[:_MAX_KEYWORDS]


# --- The guard ---------------------------------------------------------------------


class MemoryGuard:
    """The write-time checks every memory goes through (SPEC §8).

    Hosts subclass and override :meth:`detect_sensitive` to refuse more (or less);
    the ``MEMORYAPP_GUARD`` setting names the class to use.
    """

    def validate_title(self, key: str) -> str:
        """Derive the title from the key as given.

        Args:
            key: The key as given by the caller.

        Returns:
            The key stripped, cut to its first 120 characters (possibly empty: an
            empty key is refused by :func:`normalize_key`).

        Raises:
            MemoryValidationError: ``key`` is not a string, or contains a line break
                (``\\n``, ``\\r`` or any other boundary ``str.splitlines`` honours),
                anywhere, even at an end.
        """
        _require_str(key, "Memory key")
        if _LINE_BREAK_CHAR.search(key):
            raise MemoryValidationError("Memory key/title must be single-line")
        return key.strip()[:MAX_TITLE_CHARS]

    def validate_content(self, content: str) -> str:
        """Validate and strip the content; it is never truncated.

        Args:
            content: The memory's text.

        Returns:
            The content stripped.

        Raises:
            MemoryValidationError: Not a string, empty after stripping, or longer than
                4000 characters after stripping.
        """
        text = _require_str(content, "Memory content").strip()
        if not text:
            raise MemoryValidationError("Memory content is empty")
        if len(text) > MAX_CONTENT_CHARS:
            raise MemoryValidationError(
                f"Memory content exceeds max length ({len(text)} > {MAX_CONTENT_CHARS})"
            )
        return text

    def detect_sensitive(self, content: str) -> None:
        """Refuse text that looks like a credential (the families of :data:`SECRET_PATTERNS`).

        It does not look for personal data (card numbers, national ids).

        Args:
            content: The text to scan.

        Raises:
            SensitiveMemoryError: A credential was found; the message never includes it.
            MemoryValidationError: ``content`` is not a string.
        """
        if find_secret_family(_require_str(content, "Memory content")) is not None:
            raise SensitiveMemoryError()

    def check(self, key: str, content: str) -> tuple[str, str, str]:
        """Run every check of a write, in SPEC §8 order.

        ``validate_title``, :func:`normalize_key`, ``validate_content``, then
        ``detect_sensitive`` on the content and on the key: a title is stored and
        rendered into prompts just like the content, so a credential pasted into the
        key is refused too.

        Args:
            key: The key as given by the caller.
            content: The memory's text as given.

        Returns:
            ``(key_normalized, title, content)`` with the content stripped.

        Raises:
            MemoryValidationError: Bad key or content.
            SensitiveMemoryError: The content or the key contains a credential.
        """
        title = self.validate_title(key)
        key_normalized = normalize_key(key)
        text = self.validate_content(content)
        self.detect_sensitive(text)
        self.detect_sensitive(key.strip())
        return key_normalized, title, text
