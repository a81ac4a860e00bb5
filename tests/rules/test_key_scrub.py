"""A subject key is found in free text however it was typed (rules/key_scrub.py), and a
request's notes, reasons and outcome keep none of its forms (issue #39)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryapp.compliance.receipts import SUBJECT_PLACEHOLDER
from memoryapp.compliance.request_input import clean_text
from memoryapp.rules.key_scrub import normal_form, scrub_key

KEY = "acme/alice"
ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
SPACES = (" ", "\u00a0", "\u2009", "\u3000", "  ")


def full_width(ch: str) -> str:
    """The full-width form of a printable ASCII character (NFKC maps it back)."""
    return chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch


@pytest.mark.parametrize(
    "typed",
    [
        "ACME/Alice",
        "acme%2Falice",
        "acme%2falice",
        "%61%63%6d%65%2f%61%6c%69%63%65",
        "ａｃｍｅ／ａｌｉｃｅ",
        "acme/\u00a0alice",
        "ac\u200bme/al\u200dice",
        "acme / alice",
        "acme\u00a0/\u00a0alice",
        "ACME%2FALICE",
    ],
)
def test_each_form_of_the_key_is_replaced(typed):
    out = clean_text(f"Mail from {typed}, ticket 42.", KEY, "Notes")
    assert out == f"Mail from {SUBJECT_PLACEHOLDER}, ticket 42."


def test_text_without_the_key_is_untouched():
    text = "Alice from acme asked; acme/alicia is another person. 100% sure."
    assert clean_text(text, KEY, "Notes") == text


def test_an_invalid_escape_run_is_kept_as_typed():
    assert scrub_key("a %ff%fe b", KEY, "X") == "a %ff%fe b"
    assert normal_form("A%2") == "a%2"


def test_every_occurrence_goes():
    out = scrub_key("acme/alice, ACME%2FALICE and ａｃｍｅ/alice", KEY, "X")
    assert out == "X, X and X"


keys = st.builds(
    lambda tenant, user: f"{tenant}/{user}",
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=8).filter(
        lambda s: s not in (".", "..")
    ),
    st.text("abcdefghijklmnopqrstuvwxyzäöéß0123456789-_@.", min_size=1, max_size=12).filter(
        lambda s: s not in (".", "..")
    ),
)


@st.composite
def typed_forms(draw, key: str) -> str:
    """``key`` as a person might type or paste it: each character in another case, full
    width or URL-encoded, zero-width characters inside, spaces around the ``/``."""
    out = []
    for ch in key:
        form = draw(st.sampled_from(("same", "upper", "full", "quote", "zw")))
        if form == "upper":
            ch = ch.upper() if len(ch.upper()) == 1 else ch
        elif form == "full":
            ch = full_width(ch)
        elif form == "quote":
            ch = quote(ch, safe="")
            ch = ch if ch.startswith("%") else f"%{ord(ch):02X}"
        elif form == "zw":
            ch = draw(st.sampled_from(ZERO_WIDTH)) + ch
        if ch in ("/", "／") and draw(st.booleans()):
            ch = draw(st.sampled_from(SPACES)) + ch + draw(st.sampled_from(SPACES))
        out.append(ch)
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), key=keys)
def test_no_form_of_the_key_survives(data, key):
    typed = data.draw(typed_forms(key))
    before = data.draw(st.sampled_from(("Mail from", "Ticket 7:", "Letter by")))
    after = data.draw(st.sampled_from(("asked.", "— done", "(phone)")))
    out = clean_text(f"{before} {typed} {after}", key, "Notes")
    assert normal_form(key) not in normal_form(out)
    assert out == f"{before} {SUBJECT_PLACEHOLDER} {after}"
