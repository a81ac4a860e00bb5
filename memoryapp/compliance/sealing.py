"""Text kept encrypted under a key derived from ``MEMORYAPP_ERASURE_KEY``, one key per purpose.

What the compliance code must hold for a while and must not hold in clear (an
unfinished erasure's request, :mod:`memoryapp.compliance.sealed`; an open
subject request's key, :mod:`memoryapp.compliance.desk`) is a Fernet token
(AES-128-CBC + HMAC-SHA256). The purpose is data, as Django's ``key_salt`` is:
it is the HKDF ``info``, so each use has its own derived key and a token sealed
for one purpose never opens for another. The key of every token stored derives
from its purpose's bytes: changing them makes those tokens unreadable.

The current key encrypts; the fallbacks (``MEMORYAPP_ERASURE_KEY_FALLBACKS``,
or those derived from ``SECRET_KEY_FALLBACKS``) still decrypt older tokens.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryapp import conf


def fernet_key(secret: bytes, purpose: bytes) -> bytes:
    """The Fernet key of ``purpose`` under ``secret``: HKDF-SHA256, no salt, ``info=purpose``."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret)
    return base64.urlsafe_b64encode(derived)


def sealer(purpose: bytes) -> MultiFernet:
    """The current key first (encrypts), then the fallbacks (decrypt older tokens)."""
    secrets = dict.fromkeys([conf.erasure_key(), *conf.erasure_key_fallbacks()])
    return MultiFernet([Fernet(fernet_key(secret, purpose)) for secret in secrets])


def seal(purpose: bytes, text: str) -> str:
    """``text`` encrypted for ``purpose``, as ASCII."""
    return sealer(purpose).encrypt(text.encode("utf-8")).decode("ascii")


def unseal(purpose: bytes, token: str) -> str | None:
    """The text :func:`seal` sealed for ``purpose``; None when no known key opens the token."""
    try:
        return sealer(purpose).decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):  # ValueError: not ASCII, or not UTF-8 once opened
        return None


def unseal_json(purpose: bytes, token: str | None) -> Any | None:
    """The JSON value sealed in ``token`` for ``purpose``; None when there is no token,
    no known key opens it, or what it holds is not JSON."""
    if not token:
        return None
    text = unseal(purpose, token)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
