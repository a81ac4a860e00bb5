"""Export (GDPR access and portability): one JSON document per subject or namespace."""

from __future__ import annotations

import json

import pytest

from memoryapp.compliance import ErasureRequestError, erase, export
from memoryapp.models import Memory
from tests._erasure_support import ALICE, BOB, PROJECT, seed, subject_markers

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_subjects():
    return seed(ALICE), seed(BOB)


def _text(document: dict) -> str:
    return json.dumps(document, ensure_ascii=False)


def test_subject_export_has_every_marker_and_no_other_subjects(two_subjects):
    alice, bob = two_subjects
    document = export(subject=ALICE)
    text = _text(document)
    # Every stored value: the overwritten old version of a memory is no longer a row.
    stored = [m for m in subject_markers(alice, authored=True) if "oldversion" not in m]
    assert [m for m in stored if m not in text] == []
    assert alice["oldversion"][0] not in text
    assert [m for m in subject_markers(bob, authored=True) if m in text] == []
    assert document["format"] == "memoryapp-export/1"
    assert document["query"] == {"subject": ALICE}


def test_subject_export_sections(two_subjects):
    document = export(subject=ALICE)
    assert document["counts"] == {
        "memories": 3,
        "project_memories_authored": 1,
        "project_memories_contributed": 0,
        "session_summaries": 1,
        "review_items": 2,
        "events": len(document["events"]),
        "erasure_receipts": 0,
    }
    states = sorted(m["state"] for m in document["memories"])
    assert states == ["live", "live", "soft-deleted"]  # soft-deleted rows are still stored
    assert {m["scope"] for m in document["memories"]} == {"user"}
    assert document["project_memories_authored"][0]["scope"] == "project"
    types = {e["event_type"] for e in document["events"]}
    assert {"create", "update", "soft_delete"} <= types
    assert all(isinstance(e["detail"], dict | None) for e in document["events"])
    assert document["review_items"][0]["evidence"]
    assert "memory" in document["purposes"].lower()
    assert document["retention"]["soft_deleted_memories_days"] == 30
    assert document["retention"]["decided_review_items_days"] == 30


def test_namespace_export(two_subjects):
    alice, bob = two_subjects
    document = export(namespace=PROJECT)
    text = _text(document)
    # The project namespace holds both subjects' summaries, review items and
    # project memories; the user namespaces are not part of it.
    for m in alice["summary"] + bob["summary"] + alice["authored"] + bob["review"]:
        assert m in text
    assert [m for m in alice["long"] + bob["long"] if m in text] == []
    assert document["counts"]["memories"] == 2
    assert "project_memories_authored" in document and not document["project_memories_authored"]


def test_user_namespace_export(two_subjects):
    alice, bob = two_subjects
    document = export(namespace=ALICE)
    text = _text(document)
    assert all(m in text for m in alice["long"] + alice["softdeleted"])
    assert not any(m in text for m in bob["long"])


def test_export_is_plain_json_and_reports_progress(two_subjects):
    calls = []
    document = export(subject=ALICE, progress=lambda done, total: calls.append((done, total)))
    assert json.loads(json.dumps(document)) == document
    assert calls and calls[-1][0] == calls[-1][1]


def test_export_needs_a_target():
    with pytest.raises(ErasureRequestError):
        export()


def test_export_after_erasure_lists_the_receipt_only(two_subjects):
    alice, _ = two_subjects
    receipt = erase(subject=ALICE)  # (its purge waits for this test's transaction)
    document = export(subject=ALICE)
    assert document["counts"]["memories"] == 0
    assert document["counts"]["project_memories_authored"] == 1  # kept by the erasure
    (listed,) = document["erasure_receipts"]
    assert listed["id"] == receipt.pk and listed["target_kind"] == "subject"
    assert not any(m in _text(document) for m in subject_markers(alice))
    # Kept, but pseudonymised: the subject key is personal data too (issue 12.5).
    assert not Memory.objects.filter(subject=ALICE).exists()
    assert Memory.objects.filter(subject__startswith="erased:", scope="project").count() == 1
