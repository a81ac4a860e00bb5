"""Every stored text goes through secret detection: tags, summaries, review items.

Before, ``AKIA…`` as a tag was stored (and copied into keywords), the crystallizer
queued "I prefer using key AKIA…" as a pending review item, and a session summary
holding a key was stored and printed. Each path now refuses it without echoing it.
"""

from __future__ import annotations

import json

import pytest

from memoryapp import MemoryManager, SensitiveMemoryError
from memoryapp.api.testing import token_client
from memoryapp.models import Memory, ReviewItem, SessionSummary
from tests._admin_support import MEMORIES, client_for, make_staff

pytestmark = pytest.mark.django_db

KEY = "AKIA" + "IOSFODNN7EXAMPLE"


def _nowhere():
    """The key is in no stored row (memories, keywords, review items, summaries)."""
    for model, fields in (
        (Memory, ("title", "content", "tags_json", "keywords_json", "key_normalized")),
        (ReviewItem, ("title", "content", "evidence", "key_normalized")),
        (SessionSummary, ("summary_text",)),
    ):
        for row in model.objects.values_list(*fields):
            assert KEY.lower() not in json.dumps(row).lower(), (model, row)


@pytest.fixture
def acme():
    return token_client("acme-app", ["acme/"], write=True)


def test_a_credential_tag_is_refused_in_python():
    with pytest.raises(SensitiveMemoryError) as refused:
        MemoryManager(project="acme/web").upsert("aws", "the account we use", tags=["ops", KEY])
    assert KEY not in str(refused.value)
    assert not Memory.objects.exists()


def test_a_credential_tag_is_a_400_over_http(acme):
    body = {"project": "acme/web", "key": "aws", "value": "the account", "tags": [KEY]}
    r = acme.post("/api/memories/", body, format="json")
    assert r.status_code == 400
    assert list(r.json()) == ["tags"]
    assert KEY not in r.content.decode()
    _nowhere()


def test_a_credential_tag_is_a_form_error_in_the_admin():
    admin = client_for(make_staff("root", superuser=True))
    r = admin.post(
        f"{MEMORIES}add/",
        {"namespace": "acme/web", "key": "aws", "content": "fine", "tags": f"ops, {KEY}"},
    )
    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert "credential" in errors["tags"][0]
    assert KEY not in r.content.decode()
    _nowhere()


def test_the_crystallizer_never_queues_a_credential():
    mm = MemoryManager(project="acme/web")
    items = mm.crystallize_user_messages(
        [
            {"role": "user", "content": f"I prefer using key {KEY} for the deploys"},
            {"role": "user", "content": "I prefer dark mode in every editor"},
        ]
    )
    assert [i.content for i in items] and all(KEY not in i.content for i in items)
    _nowhere()


def test_a_summary_with_a_credential_is_not_stored():
    mm = MemoryManager(project="acme/web", session_id="s1")
    assert mm.save_session_summary(f"Bob's key is {KEY}; we rotated it") is None
    _nowhere()
    assert not SessionSummary.objects.exists()


def test_a_summary_with_a_credential_is_a_400_over_http(acme):
    body = {"project": "acme/web", "session_id": "s1", "summary": f"Bob's key is {KEY}"}
    r = acme.post("/api/session-summaries/", body, format="json")
    assert r.status_code == 400
    assert "credential" in r.json()["summary"][0]
    assert KEY not in r.content.decode()
    _nowhere()
