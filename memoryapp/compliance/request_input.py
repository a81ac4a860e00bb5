"""What a data-subject request accepts: the subject key, its namespaces, and free text.

Pure Python over plain values, used by the service
(:mod:`memoryapp.compliance.desk`) before anything is stored, so the admin,
the API and the command line refuse the same input with the same words. Checked
at intake rather than later: a key or a namespace that export or erasure would
refuse (too long, a NUL character) would otherwise leave an open request that
no action can serve, and text holding a NUL fails on PostgreSQL only, as a 500.
"""

from __future__ import annotations

from collections.abc import Iterable

from memoryapp.compliance.receipts import SUBJECT_PLACEHOLDER
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.key_scrub import scrub_key
from memoryapp.rules.secret_scan import find_secret_family
from memoryapp.rules.validation import check_namespace, check_text

MAX_TEXT_CHARS = 10_000  # a note, a reason, an outcome (the API's serializers say the same)
MAX_NAMESPACES = 50


class RequestError(ValueError):
    """A request or an action on it that cannot be accepted (the message says why)."""


def check_subject(subject: object) -> str:
    """The subject key as given (never stripped: keys are exact), when a writer could
    have stored it: the shared key rules of every write
    (:func:`~memoryapp.rules.validation.check_namespace`: at most 255 characters, no
    surrounding blanks, no control characters, no empty, ``.`` or ``..`` segment).

    A key no write accepts (`` acme/bob``, ``acme//bob``) holds nothing: recorded, the
    request would be served by empty exports and erasures.
    """
    text = str(subject or "")
    if not text.strip():
        raise RequestError("A subject key is needed.")
    try:
        return check_namespace(text, "The subject key")
    except MemoryValidationError as e:
        raise RequestError(f"{e}.") from None


def check_namespaces(namespaces: Iterable[object]) -> tuple[str, ...]:
    """The namespaces a request covers, each once, in order (at most
    :data:`MAX_NAMESPACES`, each one the shared key rules let a write name)."""
    spaces: dict[str, None] = {}
    for value in namespaces:
        try:
            spaces[check_namespace(str(value), "A namespace")] = None
        except MemoryValidationError as e:
            raise RequestError(f"{e}.") from None
    if len(spaces) > MAX_NAMESPACES:
        raise RequestError(f"A request covers at most {MAX_NAMESPACES} namespaces.")
    return tuple(spaces)


def clean_text(
    text: object, subject: str | None, what: str, limit: int | None = MAX_TEXT_CHARS
) -> str:
    """``text`` as stored: stripped, refused when longer than ``limit``, unstorable or
    holding a secret, and the subject key (without surrounding blanks, in any form
    :func:`~memoryapp.rules.key_scrub.scrub_key` recognises) replaced by a placeholder.

    Raises:
        RequestError: the reason, naming ``what`` ("Notes", "The reason" …) and
            never repeating the text.
    """
    text = str(text or "").strip()
    if limit is not None and len(text) > limit:
        raise RequestError(f"{what}: at most {limit:,} characters ({len(text):,} given).")
    try:
        check_text(text, what)
    except MemoryValidationError as e:
        raise RequestError(f"{e}.") from None
    family = find_secret_family(text) if text else None
    if family is not None:
        raise RequestError(f"{what} look like they hold a secret ({family}); not saved.")
    # However typed (another case, URL-encoded, full-width, a zero-width or no-break
    # space inside, spaced around its "/"): a note names the person as it came.
    return scrub_key(text, (subject or "").strip(), SUBJECT_PLACEHOLDER)
