"""The validation layer's text rules (memoryapp/rules/validation.py) as OpenAPI patterns.

Input fields and query parameters carry them in ``/api/schema/``, so that a
client generated from the schema never sends what the API refuses. Python's
ECMA-262 syntax, as JSON Schema has it (``$`` is the end of the text).
"""

from __future__ import annotations

import re
import sys
import unicodedata


def _class(chars: str) -> str:
    return "".join(
        f"\\u{ord(c):04x}" if ord(c) > 0x7E or ord(c) < 0x20 else re.escape(c) for c in chars
    )


_UNSTORABLE = "\\u0000"  # NUL (check_text; a lone surrogate cannot be written in a pattern)
_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f"  # category Cc (check_namespace)
_SPACES = _class(
    "".join(
        c
        for c in map(chr, range(sys.maxunicode + 1))
        if c.isspace() and unicodedata.category(c) != "Cc"
    )
)
_LINE_BREAKS = _class("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")

TEXT_PATTERN = f"^[^{_UNSTORABLE}]*$"
# Storable text with at least one character that is not whitespace (stripped, not empty).
NON_BLANK_PATTERN = f"^[^{_UNSTORABLE}]*[^\\s{_UNSTORABLE}][^{_UNSTORABLE}]*$"
# A memory key: one line, and a letter or digit to keep once normalised.
TITLE_PATTERN = (
    f"^[^{_LINE_BREAKS}{_UNSTORABLE}]*[^\\s{_LINE_BREAKS}{_UNSTORABLE}]"
    f"[^{_LINE_BREAKS}{_UNSTORABLE}]*$"
)
# A key normalize_key can keep (a letter or digit), of any number of lines.


def _alnum_class() -> str:
    """A letter or digit as ``str.isalnum`` says (what ``normalize_key`` keeps), in the BMP.

    Spelled out from this Python's Unicode tables: ``\\w`` or ``\\p{L}`` would follow
    the validator's tables, which also take marks and letters newer than Python's.
    """
    runs, start = [], None
    for code in range(0x10000):
        inside = chr(code).isalnum() and not 0xD800 <= code <= 0xDFFF
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            runs.append((start, code - 1))
            start = None
    return (
        "[" + "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in runs) + "]"
    )


_ALNUM = _alnum_class()
NORMALISABLE_PATTERN = f"^[^{_UNSTORABLE}]*{_ALNUM}[^{_UNSTORABLE}]*$"
KEY_PATTERN = f"^[^{_LINE_BREAKS}{_UNSTORABLE}]*{_ALNUM}[^{_LINE_BREAKS}{_UNSTORABLE}]*$"


def _namespace_pattern() -> str:
    """``check_namespace`` as a pattern: '' or '/'-separated segments, none empty, '.' or '..'.

    No control characters, and no whitespace at either end of the whole name.
    """
    seg = f"[^/{_CONTROL}]"  # a segment's character
    not_dot = f"[^./{_CONTROL}]"
    edge = f"[^/{_CONTROL}{_SPACES}]"  # first or last character
    edge_not_dot = f"[^./{_CONTROL}{_SPACES}]"
    middle = f"(?:{not_dot}{seg}*|\\.{not_dot}{seg}*|\\.\\.{seg}+)"
    first = f"(?:{edge_not_dot}{seg}*|\\.{not_dot}{seg}*|\\.\\.{seg}+)"
    last = f"(?:{edge_not_dot}|{not_dot}{seg}*{edge}|\\.{edge_not_dot}|\\.{seg}+{edge})"
    only = f"(?:{edge_not_dot}|{edge_not_dot}{seg}*{edge}|\\.{seg}*{edge_not_dot}|\\.{seg}+{edge})"
    return f"^(?:{only}|{first}(?:/{middle})*/{last})?$"


NAMESPACE_PATTERN = _namespace_pattern()
# Idempotency-Key: 1 to 255 printable characters of a header (Latin-1).
HEADER_KEY_PATTERN = "^[ -~\\u00a1-\\u00ac\\u00ae-\\u00ff]{1,255}$"


def field_pattern(field) -> str:
    """The pattern of an input string field: its own (``schema_pattern``) or storable text.

    A field that strips its input and refuses a blank one needs a non-blank text.
    """
    own = getattr(field, "schema_pattern", None)
    if own:
        return own
    if getattr(field, "trim_whitespace", False) and not getattr(field, "allow_blank", True):
        return NON_BLANK_PATTERN
    return TEXT_PATTERN
