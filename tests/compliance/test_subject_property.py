"""Property (issue 29, item 5): subjects never blur, whatever the interleaving.

Random interleavings of messages from several subjects (and from a session without a
user key) in shared namespaces, user- and project-scope, with approvals and
rejections among them. Checked against a model kept beside the database:

- the export of each subject lists exactly the review items of what it said, the
  user memories of its approved items, and the project memories one of its approved
  items supports (authored when it is the sole contributor, contributed otherwise);
- a project memory's owner is its sole contributor, else nobody;
- erasing one subject leaves every other subject's export unchanged, and leaves
  nothing of the erased one's items, memories or contributions in its own export.

Each example runs in a transaction rolled back at its end (the database is clean for
the next), the erasure without the vendor purge (not what is tested here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp import MemoryManager
from memoryapp.compliance import erase, export
from memoryapp.models import Memory, ReviewItem
from memoryapp.rules import crystallizer

pytestmark = pytest.mark.django_db

SUBJECTS = ("acme/alice", "acme/bob", "acme/carol")
SPEAKERS = (*SUBJECTS, None)  # None: a session without a user key
NAMESPACES = ("acme/one", "acme/two")
MESSAGES = (
    "I prefer phone calls in the morning.",
    "I prefer dark mode in every editor.",
    "We decided to use Postgres for the ledger.",
    "We decided to use Redis for caching.",
)
# What each message proposes, read from the crystallizer alone (no database).
PROPOSED = {
    text: [
        (p.scope, p.key_normalized)
        for p in crystallizer.propose([{"role": "user", "content": text}])
    ]
    for text in MESSAGES
}
UNCHANGED = ("generated_at", "erasure_receipts")  # what a later export may differ in

say = st.tuples(
    st.just("say"),
    st.sampled_from(SPEAKERS),
    st.sampled_from(NAMESPACES),
    st.sampled_from(MESSAGES),
)
decide = st.tuples(st.sampled_from(("approve", "reject")), st.integers(0, 30))
steps = st.lists(st.one_of(say, say, decide), min_size=1, max_size=14)


@dataclass
class Model:
    """What the database should hold, kept without reading it."""

    pending: set[tuple] = field(default_factory=set)  # (namespace, scope, speaker, key)
    said: dict[str | None, set[tuple]] = field(default_factory=dict)  # (ns, scope, key)
    user_memories: dict[str | None, set[str]] = field(default_factory=dict)  # keys
    project: dict[str | None, set[tuple]] = field(default_factory=dict)  # (ns, key)

    def say(self, speaker, namespace, text) -> None:
        for scope, key in PROPOSED[text]:
            self.pending.add((namespace, scope, speaker, key))
            self.said.setdefault(speaker, set()).add((namespace, scope, key))

    def decide(self, row: tuple, approve: bool) -> None:
        namespace, scope, speaker, key = row
        together = [row]
        if scope == "project":
            together = [p for p in self.pending if p[:2] == row[:2] and p[3] == key]
        for ns, sc, who, k in together:
            self.pending.discard((ns, sc, who, k))
            if not approve:
                continue
            if scope == "user":
                self.user_memories.setdefault(who, set()).add(k)
            else:
                self.project.setdefault(who, set()).add((ns, k))

    def owner(self, namespace: str, key: str) -> str | None:
        contributors = {who for who, rows in self.project.items() if (namespace, key) in rows}
        return next(iter(contributors)) if len(contributors) == 1 else None


def _pending_rows() -> list[ReviewItem]:
    rows = ReviewItem.objects.pending()
    return sorted(rows, key=lambda r: (r.namespace, r.scope, r.subject or "", r.key_normalized))


def _run(model: Model, actions) -> None:
    for action in actions:
        if action[0] == "say":
            _, speaker, namespace, text = action
            message = {"role": "user", "content": text}
            MemoryManager(project=namespace, user=speaker).crystallize_user_messages([message])
            model.say(speaker, namespace, text)
            continue
        pending = _pending_rows()
        if not pending:
            continue
        item = pending[action[1] % len(pending)]
        mm = MemoryManager(project=item.namespace)
        if action[0] == "approve":
            assert mm.approve_review_item(item.pk) is not None
        else:
            assert mm.reject_review_item(item.pk)
        row = (item.namespace, item.scope, item.subject, item.key_normalized)
        model.decide(row, approve=action[0] == "approve")


def _check_export(model: Model, subject: str) -> dict:
    document = export(subject=subject)
    items = {(i["namespace"], i["scope"], i["key_normalized"]) for i in document["review_items"]}
    assert items == model.said.get(subject, set())
    assert {i["subject"] for i in document["review_items"]} <= {subject}
    memories = {(m["namespace"], m["key_normalized"]) for m in document["memories"]}
    assert memories == {(subject, k) for k in model.user_memories.get(subject, set())}
    authored = {
        (m["namespace"], m["key_normalized"]) for m in document["project_memories_authored"]
    }
    contributed = {
        (m["namespace"], m["key_normalized"]) for m in document["project_memories_contributed"]
    }
    assert authored | contributed == model.project.get(subject, set())
    assert not authored & contributed
    assert all(model.owner(ns, key) == subject for ns, key in authored)
    return {k: v for k, v in document.items() if k not in UNCHANGED}


def _check_owners(model: Model) -> None:
    for m in Memory.objects.filter(scope="project"):
        assert m.subject == model.owner(m.namespace, m.key_normalized), m.key_normalized


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(actions=steps, erased=st.sampled_from(SUBJECTS), include_authored=st.booleans())
def test_exports_follow_each_subject_and_erasure_touches_no_other(
    actions, erased, include_authored
):
    with transaction.atomic():
        model = Model()
        _run(model, actions)
        _check_owners(model)
        before = {s: _check_export(model, s) for s in SUBJECTS}
        erase(subject=erased, include_authored=include_authored, purge=False)
        for subject in SUBJECTS:
            if subject != erased:
                after = export(subject=subject)
                assert {k: v for k, v in after.items() if k not in UNCHANGED} == before[subject]
        left = export(subject=erased)
        assert left["review_items"] == left["memories"] == []
        assert left["project_memories_contributed"] == []
        if include_authored:
            assert left["project_memories_authored"] == []
        transaction.set_rollback(True)
