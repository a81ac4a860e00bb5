"""One shape rule for an erasure request: Python, the CLI and the API refuse the same
requests with the same words (memoryapp.compliance.targets.check_request_shape)."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.compliance import ErasureRequestError, build_target, erase, preview
from memoryapp.models import ErasureReceipt, Memory

pytestmark = pytest.mark.django_db

# (Python keywords, CLI arguments, the field the refusal is about, the API's message)
REFUSED = [
    (
        {"ids": ["m1"], "include_authored": True},
        ["--id", "m1", "--include-authored"],
        "include_authored",
        "`include_authored` applies to a subject erasure.",
    ),
    (
        {"namespace": "acme/web", "include_authored": True},
        ["--namespace", "acme/web", "--include-authored"],
        "include_authored",
        "`include_authored` applies to a subject erasure.",
    ),
    (
        {"everything": True, "include_authored": True},
        ["--everything", "--include-authored"],
        "include_authored",
        "`include_authored` applies to a subject erasure.",
    ),
    (
        {"everything": True, "namespace": "acme/web"},
        ["--everything", "--namespace", "acme/web"],
        "everything",
        "`everything` cannot be combined with another target.",
    ),
    (
        {"subject": "acme/alice", "ids": ["m1"]},
        ["--subject", "acme/alice", "--id", "m1"],
        "ids",
        "Give either `subject` or `ids`.",
    ),
    (
        {"subject": "   "},
        ["--subject", "   "],
        "subject",
        "A subject is a non-empty user key.",
    ),
    ({}, [], "non_field_errors", "Give a subject, a namespace, ids, or everything=true."),
]


@pytest.fixture
def rows():
    mm = MemoryManager(project="acme/web", user="acme/alice")
    kept = [mm.upsert("ci", "make test"), mm.upsert("editor", "vim", ["preference"])]
    return [m.id for m in kept]


@pytest.mark.parametrize(("kwargs", "args", "field", "message"), REFUSED)
def test_python_refuses_what_the_api_refuses(rows, kwargs, args, field, message):
    for call in (build_target, preview, erase):
        with pytest.raises(ErasureRequestError) as refused:
            call(**kwargs)
        assert str(refused.value) == message and refused.value.field == field
    assert sorted(Memory.objects.values_list("id", flat=True)) == sorted(rows)
    assert not ErasureReceipt.objects.exists()


@pytest.mark.parametrize(("kwargs", "args", "field", "message"), REFUSED)
def test_the_cli_refuses_what_the_api_refuses(rows, kwargs, args, field, message):
    out = io.StringIO()
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("memory", "erase", *args, "--yes", stdout=out, stderr=io.StringIO())
    with pytest.raises(CommandError):
        call_command("memory", "erase", *args, "--dry-run", stdout=out, stderr=io.StringIO())
    assert sorted(Memory.objects.values_list("id", flat=True)) == sorted(rows)
    assert not ErasureReceipt.objects.exists()


@pytest.mark.parametrize(("kwargs", "args", "field", "message"), REFUSED)
def test_the_api_answers_the_same_field_and_words(acme, rows, kwargs, args, field, message):
    r = acme.post("/api/erasures/", kwargs, format="json")
    assert r.status_code == 400, r.content
    assert r.json() == {field: [message]}
    assert not ErasureReceipt.objects.exists()


def test_a_subject_with_include_authored_is_still_accepted(rows):
    other = MemoryManager(project="acme/web", user="acme/bob").upsert("x", "bob's", ["preference"])
    target = build_target(subject="acme/alice", include_authored=True)
    assert target.include_authored and target.subject == "acme/alice"
    receipt = erase(subject="acme/alice", include_authored=True, actor="test")
    assert receipt.include_authored
    assert list(Memory.objects.values_list("id", flat=True)) == [other.id]


def test_rows_count_as_ids_for_the_shape():
    with pytest.raises(ErasureRequestError, match="either `subject` or `ids`"):
        build_target(subject="acme/alice", rows={"memories": [("acme/web", "m1")]})
    with pytest.raises(ErasureRequestError, match="cannot be combined") as refused:
        build_target(everything=True, rows={"memories": [("acme/web", "m1")]})
    assert refused.value.field == "everything"
    with pytest.raises(ErasureRequestError, match="cannot be combined"):
        build_target(everything=True, grants=[("acme/", True)])
