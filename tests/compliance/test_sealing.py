"""One sealing helper for every purpose, deriving the keys the two former copies derived.

Tokens already stored (open subject requests, unfinished erasures' receipts) were
sealed by code that derived its own key inline; the old derivation is written out
here again, so a change to the helper's key, purpose or encoding fails these tests.
"""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.test import override_settings

from memoryapp import conf
from memoryapp.compliance import desk, sealed, sealing
from memoryapp.compliance.selection import Target
from memoryapp.models import SubjectRequest

# The HKDF ``info`` bytes the two copies used, as they were written before the helper.
OLD_SEALED_REQUEST = b"memoryapp.compliance.sealed-request"
OLD_SUBJECT_REQUEST = b"memoryapp.compliance.subject-request"


def old_fernet(info: bytes) -> MultiFernet:
    """The former derivation: HKDF-SHA256, 32 bytes, no salt, current key then fallbacks."""
    keys = []
    for secret in dict.fromkeys([conf.erasure_key(), *conf.erasure_key_fallbacks()]):
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)
        keys.append(Fernet(base64.urlsafe_b64encode(derived)))
    return MultiFernet(keys)


def test_the_purposes_keep_their_former_labels():
    assert sealed.PURPOSE == OLD_SEALED_REQUEST
    assert desk.PURPOSE == OLD_SUBJECT_REQUEST


@pytest.mark.parametrize("info", [OLD_SEALED_REQUEST, OLD_SUBJECT_REQUEST])
def test_a_token_sealed_the_old_way_opens_with_the_helper(info):
    token = old_fernet(info).encrypt("alice — ü".encode()).decode("ascii")
    assert sealing.unseal(info, token) == "alice — ü"


@pytest.mark.parametrize("info", [OLD_SEALED_REQUEST, OLD_SUBJECT_REQUEST])
def test_a_token_sealed_by_the_helper_opens_the_old_way(info):
    token = sealing.seal(info, "bob")
    assert old_fernet(info).decrypt(token.encode("ascii")) == b"bob"


def test_a_token_does_not_open_for_another_purpose():
    token = sealing.seal(OLD_SUBJECT_REQUEST, "alice")
    assert sealing.unseal(OLD_SEALED_REQUEST, token) is None
    assert sealing.unseal(OLD_SUBJECT_REQUEST, "not a token") is None
    assert sealing.unseal(OLD_SUBJECT_REQUEST, "é") is None  # not ASCII: no token


def test_a_token_sealed_under_a_retired_key_opens_through_the_fallbacks():
    with override_settings(MEMORYAPP_ERASURE_KEY="old-key", MEMORYAPP_ERASURE_KEY_FALLBACKS=[]):
        token = old_fernet(OLD_SUBJECT_REQUEST).encrypt(b"carol").decode("ascii")
    with override_settings(
        MEMORYAPP_ERASURE_KEY="new-key", MEMORYAPP_ERASURE_KEY_FALLBACKS=["old-key"]
    ):
        assert sealing.unseal(OLD_SUBJECT_REQUEST, token) == "carol"
    with override_settings(MEMORYAPP_ERASURE_KEY="new-key", MEMORYAPP_ERASURE_KEY_FALLBACKS=[]):
        assert sealing.unseal(OLD_SUBJECT_REQUEST, token) is None


def test_an_erasure_sealed_the_old_way_unseals():
    target = Target("subject", subject="alice", namespace="acme/web")
    body = {"targets": [sealed.target_to_dict(target)], "probes": {"default": ["YWxpY2U="]}}
    token = old_fernet(OLD_SEALED_REQUEST).encrypt(json.dumps(body).encode("utf-8")).decode()
    targets, probes = sealed.unseal(token)
    assert [(t.subject, t.namespace) for t in targets] == [("alice", "acme/web")]
    assert probes == {"default": [b"alice"]}


def test_a_subject_request_sealed_the_old_way_unseals():
    body = json.dumps({"subject": "alice", "namespaces": ["acme/web"]})
    token = old_fernet(OLD_SUBJECT_REQUEST).encrypt(body.encode("utf-8")).decode("ascii")
    opened = desk.unseal(SubjectRequest(sealed=token))
    assert opened == desk.Sealed("alice", ("acme/web",))
