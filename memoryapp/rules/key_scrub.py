"""Finding a subject key in free text however it was typed, and replacing it.

Pure Python. An officer's note, a reason or an outcome may name the person in a form
other than the key as stored: in another case (``ACME/Alice``), URL-encoded
(``acme%2Falice``, pasted from an address), in full-width characters
(``ａｃｍｅ／ａｌｉｃｅ``), with a no-break space, a zero-width space or a soft hyphen
inside, or spaced around its ``/``. A closed request must hold no key, so the text is
compared in a normalised form and every stretch of the *original* text whose
normalised form is the key's is replaced.

The normalised form: percent-escapes decoded (UTF-8), NFKC per character (full-width
and compatibility forms, no-break spaces), format characters dropped (zero-width
spaces and joiners, soft hyphens, bidi marks: Unicode category Cf), whitespace runs
collapsed to one space and dropped beside ``/``, then case-folded. Each normalised
character remembers the stretch of the original it came from, so the replacement
covers exactly what was typed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ["normal_form", "scrub_key"]

_HEX = frozenset("0123456789abcdefABCDEF")

Unit = tuple[str, int, int]
"""One character of a normalised form and the span ``[start, end)`` of the original
text it comes from."""


def _per_char(units: list[Unit], convert: Callable[[str], str]) -> list[Unit]:
    return [(c, start, end) for ch, start, end in units for c in convert(ch)]


def _drop_format(units: list[Unit]) -> list[Unit]:
    return [u for u in units if unicodedata.category(u[0]) != "Cf"]


def _escapes(units: list[Unit], i: int) -> Iterator[tuple[int, int]]:
    """The bytes of the run of ``%XX`` escapes starting at ``units[i]``, with their index."""
    while (
        i + 2 < len(units)
        and units[i][0] == "%"
        and units[i + 1][0] in _HEX
        and units[i + 2][0] in _HEX
    ):
        yield int(units[i + 1][0] + units[i + 2][0], 16), i
        i += 3


def _url_decode(units: list[Unit]) -> list[Unit]:
    """``%XX`` runs decoded as UTF-8, one unit per decoded character spanning its escapes.

    A run that is not valid UTF-8 is kept as typed (it cannot spell a key)."""
    out: list[Unit] = []
    i = 0
    while i < len(units):
        run = list(_escapes(units, i))
        if not run:
            out.append(units[i])
            i += 1
            continue
        end = i + 3 * len(run)
        try:
            decoded = bytes(b for b, _ in run).decode("utf-8")
        except UnicodeDecodeError:
            out.extend(units[i:end])
        else:
            # Characters of a multi-byte run share its span (one key character or none).
            out.extend((c, units[i][1], units[end - 1][2]) for c in decoded)
        i = end
    return out


def _collapse_spaces(units: list[Unit]) -> list[Unit]:
    """Whitespace runs as one space; no space beside a ``/`` (``acme / alice``)."""
    out: list[Unit] = []
    for ch, start, end in units:
        if ch.isspace():
            if out and out[-1][0] in " /":
                continue
            out.append((" ", start, end))
        elif ch == "/" and out and out[-1][0] == " ":
            out[-1] = (ch, start, end)
        else:
            out.append((ch, start, end))
    return out


def _normal_units(text: str) -> list[Unit]:
    units: list[Unit] = [(ch, i, i + 1) for i, ch in enumerate(text)]
    nfkc = lambda ch: unicodedata.normalize("NFKC", ch)  # noqa: E731
    units = _drop_format(_per_char(units, nfkc))
    units = _drop_format(_per_char(_url_decode(units), nfkc))  # an escaped full-width form
    return _per_char(_collapse_spaces(units), str.casefold)


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` with the invisible format characters on either side, which the
    normal form dropped: they were typed with the key (a zero-width space before it)."""
    while start > 0 and unicodedata.category(text[start - 1]) == "Cf":
        start -= 1
    while end < len(text) and unicodedata.category(text[end]) == "Cf":
        end += 1
    return start, end


def normal_form(text: str) -> str:
    """``text`` as the key is searched in it (see the module's docstring)."""
    return "".join(ch for ch, _, _ in _normal_units(text))


def scrub_key(text: str, key: str, placeholder: str) -> str:
    """``text`` with every stretch whose normal form is ``key``'s replaced by ``placeholder``.

    An empty key (or one that normalises to nothing) changes nothing.
    """
    needle = normal_form(key).strip()
    if not needle or not text:
        return text
    units = _normal_units(text)
    haystack = "".join(ch for ch, _, _ in units)
    spans: list[list[int]] = []
    for match in re.finditer(re.escape(needle), haystack):
        start, end = _widen(text, units[match.start()][1], units[match.end() - 1][2])
        if spans and start <= spans[-1][1]:  # overlaps the previous one: merge
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    for start, end in reversed(spans):
        text = text[:start] + placeholder + text[end:]
    return text
