"""Secret detection: the credential families a stored text must not contain.

Pure Python over plain strings. :func:`find_secret_family` names the first family
found (never the matched text); :class:`memoryapp.rules.guard.MemoryGuard` refuses a write
on it.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_PATTERNS", "find_secret_family", "visible"]

# Each pattern is anchored on a left boundary so that an ordinary hyphenated or
# underscored word ("task-management-…", "risk-…") never starts a match mid-word.
# Every repetition is either unbounded over one character class or bounded, so a
# search is linear in the text's length (bench/linear_scan.py measures it).

#: Private-key armour: the header alone is refused (``-----BEGIN RSA PRIVATE KEY-----``,
#: ``-----BEGIN OPENSSH PRIVATE KEY-----``, ``-----BEGIN PGP PRIVATE KEY BLOCK-----``…).
PRIVATE_KEY_RE = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")

#: A complete PEM block of any ``… KEY`` (``PUBLIC KEY`` and ``SSH2 ENCRYPTED KEY``
#: too: Agentao refuses whole key blocks, and a memory has no use for one). A lone
#: public-key header or a certificate passes. The body stops at the next ``BEGIN``,
#: so a text of many unterminated headers is still scanned in linear time.
PEM_KEY_BLOCK_RE = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )+KEY(?: BLOCK)?-----(?:(?!-----BEGIN )[\s\S])*?"
    r"-----END (?:[A-Z0-9]+ )+KEY(?: BLOCK)?-----"
)

#: Anthropic API keys: ``sk-ant-`` plus 10+ key characters. The literal prefix never
#: occurs in prose, so a shorter tail than OpenAI's is enough evidence (it also
#: catches a key pasted half-way). Checked before OpenAI so the family is named right.
ANTHROPIC_KEY_RE = re.compile(r"(?<![A-Za-z0-9_])sk-ant-[A-Za-z0-9_-]{10,}")

#: OpenAI-style secret keys: ``sk-`` plus 20+ characters of ``[A-Za-z0-9_-]``
#: (covers legacy ``sk-…`` and project ``sk-proj-…`` keys).
OPENAI_KEY_RE = re.compile(r"(?<![A-Za-z0-9_])sk-[A-Za-z0-9_-]{20,}")

#: Google API keys: ``AIza`` plus 35 characters of ``[A-Za-z0-9_-]`` (39 in all, the
#: documented shape). Longer runs are matched too: only the shape's minimum is required.
GOOGLE_API_KEY_RE = re.compile(r"(?<![A-Za-z0-9_])AIza[A-Za-z0-9_-]{35}")

#: Google OAuth client secrets: ``GOCSPX-`` plus 20+ characters.
GOOGLE_OAUTH_SECRET_RE = re.compile(r"(?<![A-Za-z0-9_])GOCSPX-[A-Za-z0-9_-]{20,}")

#: AWS access key ids: ``AKIA`` (long-term) or ``ASIA`` (temporary) plus exactly 16
#: characters of the base32 alphabet (``A``–``Z``, ``2``–``7``: an id is base32, so
#: ``0``, ``1``, ``8`` and ``9`` never occur), as a whole token, case-sensitive. The
#: alphabet is what tells ``ASIAPACIFICSALES2024`` (a ``0``) from a key.
AWS_ACCESS_KEY_RE = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")

#: AWS secret access keys: 40 characters of ``[A-Za-z0-9/+]`` with an upper-case
#: letter, a lower-case letter and a digit, as a whole token, within 100 characters
#: after the word "aws" (any case). Without that context a 40-character run cannot
#: be told from an identifier; named assignments (``aws_secret_access_key = …``) are
#: refused by the assignment family anyway.
_AWS_SECRET = (
    r"(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[0-9])"
)
AWS_SECRET_KEY_RE = re.compile(
    r"(?i:aws)[\s\S]{0,100}?(?<![A-Za-z0-9/+])"
    + _AWS_SECRET
    + r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)

#: GitHub tokens: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` plus 36+ alphanumerics,
#: and fine-grained personal access tokens ``github_pat_`` plus 20+ characters.
GITHUB_TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{20,})"
)

#: GitLab personal, project and group access tokens: ``glpat-`` plus 20+ characters.
GITLAB_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}")

#: Slack tokens: ``xoxb-``/``xoxa-``/``xoxp-``/``xoxr-``/``xoxs-`` plus 10+ characters,
#: and app-level tokens ``xapp-<digit>-`` plus 10+.
SLACK_TOKEN_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:xox[baprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})"
)

#: Slack incoming-webhook and workflow URLs: whoever holds one can post to the channel.
SLACK_WEBHOOK_RE = re.compile(
    r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}"
)

#: Stripe secret and restricted keys, live and test (a test key still reaches the
#: account's test data), and webhook signing secrets.
STRIPE_KEY_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}|whsec_[A-Za-z0-9]{20,})"
)

#: Twilio API key SIDs and account SIDs (``SK``/``AC`` plus 32 lower-case hex digits).
TWILIO_KEY_RE = re.compile(r"(?<![A-Za-z0-9])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])")

#: SendGrid API keys: ``SG.`` + 22 + ``.`` + 43 characters.
SENDGRID_KEY_RE = re.compile(r"(?<![A-Za-z0-9_-])SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")

#: npm access tokens: ``npm_`` plus 36 alphanumerics.
NPM_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")

#: PyPI API tokens: ``pypi-`` plus 32+ characters (real ones are ~180).
PYPI_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_-])pypi-[A-Za-z0-9_-]{32,}")

#: HashiCorp Vault service and batch tokens: ``hvs.``/``hvb.`` plus 24+ characters.
VAULT_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_.-])hv[sb]\.[A-Za-z0-9_-]{24,}")

#: DigitalOcean personal, OAuth and refresh tokens: ``dop_v1_``/``doo_v1_``/``dor_v1_``
#: plus 64 hex digits.
DIGITALOCEAN_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])do[opr]_v1_[a-f0-9]{64}")

#: Shopify access tokens and shared secrets: ``shpat_``/``shpss_``/``shpca_``/``shppa_``
#: plus 32 hex digits.
SHOPIFY_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_])shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}")

#: Mailgun API keys: ``key-`` plus 32 lower-case hex digits, as a whole token.
MAILGUN_KEY_RE = re.compile(r"(?<![A-Za-z0-9_-])key-[0-9a-f]{32}(?![A-Za-z0-9])")

#: Azure storage and service-bus connection strings: ``AccountKey=``/``SharedAccessKey=``
#: (any case) and 20+ base64 characters.
AZURE_KEY_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:account|sharedaccess)key\s*=\s*[A-Za-z0-9+/]{20,}"
)

#: JSON Web Tokens: three base64url segments of 8+ characters joined by ``.``, the
#: first two (header and payload, both JSON objects) starting ``eyJ``.
JWT_RE = re.compile(
    r"(?<![A-Za-z0-9_])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}"
)

# Values that only name where a credential comes from: an environment variable
# (``$DB_PASSWORD``, ``${DB_PASSWORD}``), a template (``{{ secret }}``, ``%(pw)s``), an
# angle-bracket placeholder (``<redacted>``, ``<your-token>``), a mask (``****``,
# ``xxxxxxxx``) or a redaction marker. Agentao refuses them; a memory that says where
# the password lives is useful and holds none (tests/secret_corpus.py lists it as a
# deliberate difference).


def _placeholder(end: str) -> str:
    """A look-ahead refusing a value that is only a placeholder, ended by ``end``."""
    return (
        r"(?![\"']?(?:\$\{[^{}\s]{1,60}\}" + end + r"|(?-i:\$[A-Z_][A-Z0-9_]*)" + end
        + r"|\{\{[^{}]{1,60}\}\}|%\([A-Za-z0-9_]{1,40}\)s|<[^<>\s]{1,60}>" + end
        + r"|\*{3,}" + end + r"|x{6,}" + end + r"|\[redacted\]|redacted" + end + r"))"
    )  # fmt: skip


_PLACEHOLDER = _placeholder(r"(?=[\s\"']|$)")  # the whole value, up to a space or quote

#: A password in a URL's authority: ``scheme://user:password@host``. ``user@host``
#: and a placeholder password (``${PASS}``, ``****``) pass.
URL_PASSWORD_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9+.-])[a-z][a-z0-9+.-]{0,30}://[^\s/?#:@]{0,256}:"
    + _placeholder("(?=@)")  # the whole password, up to the "@"
    + r"[^\s/?#@]{1,256}@[A-Za-z0-9\[]"
)

#: OAuth authorization codes in their wire shapes: a query or form ``code=`` after
#: ``?`` or ``&``, and a JSON ``"code": "…"`` string, with 8+ characters.
OAUTH_CODE_RE = re.compile(r"(?i)(?:(?<=[?&])code=|\"code\"\s*:\s*\")[^\s\"'&,}]{8,}")

# An HTTP credential: 20+ characters of the RFC 6750 token68 alphabet.
_CREDENTIAL = r"[A-Za-z0-9._~+/=-]{20,}"

#: ``Bearer <credential>`` (any case). "Use bearer tokens for auth" is prose: the
#: word after "bearer" is far shorter than a credential.
BEARER_TOKEN_RE = re.compile(r"(?i)\bbearer\s+" + _CREDENTIAL)

#: ``Authorization: [scheme] <credential>`` (any case, ``:`` or ``=``). A bare
#: "Authorization: Basic" has no credential and is accepted.
AUTHORIZATION_HEADER_RE = re.compile(
    r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?" + _CREDENTIAL
)

#: A password told in words: "my password is hunter2", "our passphrase was
#: Tr0ub4dor&3". The value must look like one (6+ characters with a digit or a
#: symbol): "the password is rotated monthly" is prose.
PASSWORD_PHRASE_RE = re.compile(
    r"(?i)\b(?:my|our|his|her|their|your|the)\s+(?:[a-z]+\s+){0,2}?"
    r"(?:password|passphrase|passcode|passwd)\s+(?:is|was)\s*[:=]?\s*[\"']?"
    r"(?=[^\s\"']{0,63}[0-9!@#$%^&*_+=~|\\/<>{}\[\]])[^\s\"']{6,}"
)

#: Credential assignments, case-insensitive: a credential name, ``=``/``:``/``:=``
#: with optional whitespace (a line break too: ``password=`` then the value on the
#: next line), and a value of 8+ non-space characters that is not a placeholder; a
#: quoted value needs 8+ characters inside its quotes. Names: ``password``,
#: ``passwd``, ``passphrase``, ``pwd``, ``secret``, ``token``, ``api_key``/``api-key``/
#: ``apikey``, ``secret_key``, ``access_key``, ``code_verifier``, ``private_key_id``
#: (``_``, ``-`` or nothing between the words).
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
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|secret[_-]?key|access[_-]?key"
    r"|code[_-]?verifier|private[_-]?key[_-]?id)"
    r"[\"']?\s*(?::=|[:=])\s*" + _PLACEHOLDER + r"(?:[\"'][^\s\"']{8,}|[^\s\"']\S{7,})"
)

#: The default secret families, in the order they are tried: ``(name, pattern)``.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private_key", PRIVATE_KEY_RE),
    ("pem_key_block", PEM_KEY_BLOCK_RE),
    ("anthropic_api_key", ANTHROPIC_KEY_RE),
    ("openai_api_key", OPENAI_KEY_RE),
    ("google_api_key", GOOGLE_API_KEY_RE),
    ("google_oauth_secret", GOOGLE_OAUTH_SECRET_RE),
    ("aws_access_key_id", AWS_ACCESS_KEY_RE),
    ("aws_secret_access_key", AWS_SECRET_KEY_RE),
    ("github_token", GITHUB_TOKEN_RE),
    ("gitlab_token", GITLAB_TOKEN_RE),
    ("slack_token", SLACK_TOKEN_RE),
    ("slack_webhook", SLACK_WEBHOOK_RE),
    ("stripe_key", STRIPE_KEY_RE),
    ("twilio_key", TWILIO_KEY_RE),
    ("sendgrid_key", SENDGRID_KEY_RE),
    ("npm_token", NPM_TOKEN_RE),
    ("pypi_token", PYPI_TOKEN_RE),
    ("vault_token", VAULT_TOKEN_RE),
    ("digitalocean_token", DIGITALOCEAN_TOKEN_RE),
    ("shopify_token", SHOPIFY_TOKEN_RE),
    ("mailgun_key", MAILGUN_KEY_RE),
    ("azure_key", AZURE_KEY_RE),
    ("jwt", JWT_RE),
    ("url_password", URL_PASSWORD_RE),
    ("oauth_code", OAUTH_CODE_RE),
    ("bearer_token", BEARER_TOKEN_RE),
    ("authorization_header", AUTHORIZATION_HEADER_RE),
    ("password_phrase", PASSWORD_PHRASE_RE),
    ("credential_assignment", CREDENTIAL_ASSIGNMENT_RE),
)


# --- The prefilter: a cheap necessary condition per pattern -------------------------
# Running every pattern costs ~40 µs on a 220-character memory: their leading
# look-behinds keep ``re`` from skipping ahead to a literal, so each one tries every
# position. Plain substring tests (``in`` on ``str``, a C scan) are ~20× cheaper, and
# almost every memory fails all of them. ``_prefilter_mask`` names the patterns whose
# literal necessary condition holds; only those are run. Each condition below is
# *implied by* a match of its pattern (argued next to it), so skipping a pattern whose
# condition fails never changes the result: ``find_secret_family`` names the same
# family as running every pattern in order (tests/rules/test_guard_prefilter.py checks it
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
# "accesskey"/"access_key"/"access-key"; code[_-]?verifier contains "verifier";
# private[_-]?key[_-]?id contains "private".
_CREDENTIAL_NAME_PARTS = (
    "pass", "pwd", "secret", "token",
    "apikey", "api_key", "api-key", "accesskey", "access_key", "access-key",
    "verifier", "private",
)  # fmt: skip


def _fold_for_prefilter(text: str) -> str:
    """Lower-case ``text`` so that every ``(?i)`` match of an ASCII word shows as that word."""
    if not text.isascii():
        text = text.translate(_PREFILTER_FOLD)
    return text.lower()


# One bit per default pattern.
_BITS = {name: 1 << i for i, (name, _) in enumerate(SECRET_PATTERNS)}

# The case-sensitive families: a literal each match contains, tested on the text.
# Each needle is a literal of its pattern (or, for alternations, one needle per
# branch), so a match implies that a needle is present.
_RAW_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("-----BEGIN ",),
    "pem_key_block": ("-----BEGIN ",),
    "anthropic_api_key": ("sk-ant-",),
    "openai_api_key": ("sk-",),
    "google_api_key": ("AIza",),
    "google_oauth_secret": ("GOCSPX-",),
    "aws_access_key_id": ("AKIA", "ASIA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_token": ("xox", "xapp-"),
    "stripe_key": ("_live_", "_test_", "whsec_"),
    "twilio_key": ("SK", "AC"),
    "sendgrid_key": ("SG.",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "vault_token": ("hvs.", "hvb."),
    "digitalocean_token": ("_v1_",),
    "shopify_token": ("shp",),
    "mailgun_key": ("key-",),
    "jwt": (".eyJ",),  # the second segment starts with the literal ".eyJ"
    "url_password": ("://",),
}

# The ``(?i)`` families: an ASCII word each match contains in some case, tested on the
# fold (see above). Scoped ``(?i:aws)`` counts: its letters fold the same way.
_FOLDED_NEEDLES: dict[str, tuple[str, ...]] = {
    "aws_secret_access_key": ("aws",),
    "slack_webhook": ("hooks.slack.com/",),
    "azure_key": ("accountkey", "sharedaccesskey"),
    "oauth_code": ("code",),
    "bearer_token": ("bearer",),
    "password_phrase": ("pass",),  # password/passphrase/passcode/passwd
}

# Families that also need ":" or "=" in the text (their separators), with their words.
_ASSIGNMENT_NEEDLES: dict[str, tuple[str, ...]] = {
    "authorization_header": ("authorization",),
    "credential_assignment": _CREDENTIAL_NAME_PARTS,
}

_RAW_TABLE = tuple((_BITS[name], needles) for name, needles in _RAW_NEEDLES.items())
_FOLDED_TABLE = tuple((_BITS[name], needles) for name, needles in _FOLDED_NEEDLES.items())
_ASSIGNMENT_TABLE = tuple((_BITS[name], needles) for name, needles in _ASSIGNMENT_NEEDLES.items())


def _prefilter_mask(text: str) -> int:
    """The bits of the default patterns whose necessary literal condition holds in ``text``."""
    mask = 0
    for bit, needles in _RAW_TABLE:
        for needle in needles:
            if needle in text:
                mask |= bit
                break
    folded = _fold_for_prefilter(text)
    for bit, needles in _FOLDED_TABLE:
        for needle in needles:
            if needle in folded:
                mask |= bit
                break
    if ":" in text or "=" in text:
        for bit, needles in _ASSIGNMENT_TABLE:
            for needle in needles:
                if needle in folded:
                    mask |= bit
                    break
    return mask


#: SECRET_PATTERNS as defined here, with each pattern's prefilter bit.
_DEFAULT_SECRET_PATTERNS = SECRET_PATTERNS
_DEFAULT_ENTRIES: tuple[tuple[int, str, re.Pattern[str]], ...] = tuple(
    (1 << i, name, pattern) for i, (name, pattern) in enumerate(SECRET_PATTERNS)
)
# By identity (a compiled pattern's own hash digests its whole program on every call).
_PREFILTER_BITS: dict[int, int] = {id(pattern): bit for bit, _, pattern in _DEFAULT_ENTRIES}


# Invisible format characters (Unicode category Cf: zero-width space and joiners, the
# word joiner, the BOM, the soft hyphen, bidirectional controls). Pasted into a key
# they hide it from every pattern ("AKIA\u200bIOSF…") while a reader — or a model —
# still sees the key, so they are removed before the scan.
_INVISIBLE = dict.fromkeys(
    [0x00AD, 0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F)]
    + [*range(0x2060, 0x2065), *range(0x2066, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC)]
)


def visible(text: str) -> str:
    """``text`` without invisible format characters (what the patterns are run on)."""
    if text.isascii():
        return text
    return text.translate(_INVISIBLE)


def find_secret_family(text: str) -> str | None:
    """Name the first default secret family found in ``text``.

    The same answer as searching every pattern of :data:`SECRET_PATTERNS` in order,
    over ``text`` and then, when it holds invisible format characters, over
    ``visible(text)`` (a character can hide a key, or be the boundary that shows
    one, so both are scanned). A default pattern is skipped only when a literal it
    needs is absent (``_prefilter_mask``). Patterns that other code put into
    :data:`SECRET_PATTERNS` are always searched.

    Args:
        text: Any text.

    Returns:
        The family name from :data:`SECRET_PATTERNS`, or ``None`` when nothing matches.
        The matched text itself is never returned, so callers cannot leak it.
    """
    found = _first_family(text)
    if found is None and not text.isascii():
        shown = visible(text)
        if shown != text:
            found = _first_family(shown)
    return found


def _first_family(text: str) -> str | None:
    mask = _prefilter_mask(text)
    if SECRET_PATTERNS is _DEFAULT_SECRET_PATTERNS:
        if mask:
            for bit, name, pattern in _DEFAULT_ENTRIES:
                if mask & bit and pattern.search(text):
                    return name
        return None
    for name, pattern in SECRET_PATTERNS:
        prefilter_bit = _PREFILTER_BITS.get(id(pattern))
        if (prefilter_bit is None or mask & prefilter_bit) and pattern.search(text):
            return name
    return None
