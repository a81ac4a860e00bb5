"""Secret detection: the credential families a stored text must not contain.

Pure Python over plain strings. :func:`find_secret_family` names the first family
found (never the matched text); :class:`memoryapp.guards.MemoryGuard` refuses a write
on it.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_PATTERNS", "find_secret_family"]

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
