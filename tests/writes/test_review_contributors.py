"""Fold per subject and the contributors of a project key (issue 29, item 1).

alice's and dave's identical message are two review items, one per subject; a project
key's items are decided together; the memory belongs to the sole contributor, else to
nobody; export and erasure follow each contributor's own items.
"""

from __future__ import annotations

import pytest

from memoryapp import MemoryManager
from memoryapp.compliance import erase, export
from memoryapp.models import Memory, MemoryEvent, ReviewItem
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services import review, review_edit

pytestmark = pytest.mark.django_db

NS = "acme/support"
ALICE, DAVE, ERIN = "acme/alice", "acme/dave", "acme/erin"
PREFERENCE = {"role": "user", "content": "I prefer phone calls in the morning."}
DECISION = {"role": "user", "content": "We decided to use Postgres for the ledger."}


def _say(subject: str | None, *messages) -> list[ReviewItem]:
    return MemoryManager(project=NS, user=subject).crystallize_user_messages(list(messages))


def _pending(scope: str) -> list[ReviewItem]:
    return list(ReviewItem.objects.pending().filter(scope=scope).order_by("subject"))


def test_two_subjects_same_words_are_two_items_and_each_folds_its_own():
    _say(ALICE, PREFERENCE, DECISION)
    _say(DAVE, PREFERENCE, DECISION)
    _say(ALICE, PREFERENCE)
    user_items = _pending("user")
    assert [(i.subject, i.occurrences) for i in user_items] == [(ALICE, 2), (DAVE, 1)]
    assert len({i.key_normalized for i in user_items}) == 1
    assert [i.subject for i in _pending("project")] == [ALICE, DAVE]
    # Subject-less proposals fold together, apart from every subject's.
    _say(None, DECISION)
    _say(None, DECISION)
    anonymous = ReviewItem.objects.pending().filter(scope="project", subject__isnull=True)
    assert [i.occurrences for i in anonymous] == [2]


def test_user_scope_approval_gives_each_subject_its_own_memory():
    _say(ALICE, PREFERENCE)
    _say(DAVE, PREFERENCE)
    mm = MemoryManager(project=NS)
    memories = [mm.approve_review_item(i.pk) for i in _pending("user")]
    assert [(m.namespace, m.subject) for m in memories] == [(ALICE, ALICE), (DAVE, DAVE)]


def test_approving_one_contributor_approves_its_siblings_and_nobody_owns_the_memory():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    (erin_other,) = _say(ERIN, {"role": "user", "content": "We decided to use Redis for caching."})
    memory = MemoryManager(project=NS).approve_review_item(alice_item.pk, actor="root")
    assert memory is not None and memory.subject is None  # two contributors: no single owner
    rows = ReviewItem.objects.filter(pk__in=[alice_item.pk, dave_item.pk])
    assert set(rows.values_list("status", flat=True)) == {"approved"}
    assert ReviewItem.objects.get(pk=erin_other.pk).status == "pending"  # another key
    events = MemoryEvent.objects.filter(event_type="review_approve", actor="root")
    assert sorted(events.values_list("memory_id", flat=True)) == sorted(
        [alice_item.pk, dave_item.pk]
    )
    assert all(f'"memory": "{memory.pk}"' in e.detail for e in events)
    assert Memory.objects.filter(scope="project", namespace=NS).count() == 1
    # A second approval of the sibling finds nothing pending.
    assert MemoryManager(project=NS).approve_review_item(dave_item.pk) is None


def test_a_sole_contributor_owns_the_project_memory_and_a_later_one_unowns_it():
    (alice_item,) = _say(ALICE, DECISION)
    mm = MemoryManager(project=NS)
    memory = mm.approve_review_item(alice_item.pk)
    assert memory.subject == ALICE
    (dave_item,) = _say(DAVE, DECISION)
    again = mm.approve_review_item(dave_item.pk)
    assert again.pk == memory.pk and Memory.objects.get(pk=memory.pk).subject is None


def test_rejecting_one_contributor_rejects_its_siblings():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    (alice_pref,) = [i for i in _say(ALICE, PREFERENCE) if i.scope == "user"]
    assert MemoryManager(project=NS).reject_review_item(dave_item.pk, actor="root")
    statuses = dict(ReviewItem.objects.values_list("pk", "status"))
    assert statuses == {
        alice_item.pk: "rejected",
        dave_item.pk: "rejected",
        alice_pref.pk: "pending",
    }
    assert MemoryEvent.objects.filter(event_type="review_reject").count() == 2


def test_bulk_approval_and_rejection_decide_siblings_too():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    mm = MemoryManager(project=NS)
    approved, refused = mm.approve_review_items([alice_item.pk])
    assert (approved, refused) == (2, [])
    memory = Memory.objects.get(namespace=NS, scope="project")
    assert memory.subject is None
    (alice_again,) = _say(ALICE, {"role": "user", "content": "We decided to use Kafka for events."})
    (erin,) = _say(ERIN, {"role": "user", "content": "We decided to use Kafka for events."})
    assert mm.reject_review_items([erin.pk]) == 2
    assert ReviewItem.objects.get(pk=alice_again.pk).status == "rejected"
    assert ReviewItem.objects.get(pk=dave_item.pk).status == "approved"


def test_another_namespace_s_item_of_the_same_key_is_no_sibling():
    (alice_item,) = _say(ALICE, DECISION)
    (other,) = MemoryManager(project="globex/app", user=DAVE).crystallize_user_messages([DECISION])
    MemoryManager(project=NS).approve_review_item(alice_item.pk)
    assert ReviewItem.objects.get(pk=other.pk).status == "pending"
    assert Memory.objects.get(namespace=NS, scope="project").subject == ALICE


def test_export_lists_the_shared_memory_and_erasure_keeps_it_while_supported():
    (alice_item,) = _say(ALICE, DECISION)
    _say(DAVE, DECISION)
    memory = MemoryManager(project=NS).approve_review_item(alice_item.pk)
    for subject in (ALICE, DAVE):
        document = export(subject=subject)
        assert [m["id"] for m in document["project_memories_contributed"]] == [memory.pk]
        assert [i["subject"] for i in document["review_items"]] == [subject]
    assert export(subject=ERIN)["project_memories_contributed"] == []
    # Erasing alice (even her authored memories) keeps the memory dave's item supports.
    erase(subject=ALICE, include_authored=True)
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert list(ReviewItem.objects.values_list("subject", flat=True)) == [DAVE]
    assert export(subject=ALICE)["project_memories_contributed"] == []
    # Without include_authored dave's erasure keeps the project's knowledge; with it,
    # nothing supports the memory any more and it goes.
    erase(subject=DAVE)
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert not ReviewItem.objects.exists()
    (dave_again,) = _say(DAVE, DECISION)
    MemoryManager(project=NS).approve_review_item(dave_again.pk)
    assert Memory.objects.get(pk=memory.pk).subject == DAVE
    erase(subject=DAVE, include_authored=True)
    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_shared_memory_goes_when_its_last_supporter_is_erased():
    (alice_item,) = _say(ALICE, DECISION)
    _say(DAVE, DECISION)
    memory = MemoryManager(project=NS).approve_review_item(alice_item.pk)
    erase(subject=ALICE)  # her items go; the memory stays, owned by nobody
    assert Memory.objects.get(pk=memory.pk).subject is None
    erase(subject=DAVE, include_authored=True)
    assert not Memory.objects.filter(pk=memory.pk).exists()


class _RefusesMarked(MemoryGuard):
    """The default guard, refusing any text holding a marker too."""

    def detect_sensitive(self, content):
        if "REFUSE-ME" in content:
            raise SensitiveMemoryError("marked")
        return super().detect_sensitive(content)


def test_a_bulk_approval_leaves_a_refused_sibling_pending_and_counts_it_once():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    ReviewItem.objects.filter(pk=dave_item.pk).update(content="REFUSE-ME ledger")
    approved, refused = review.approve_many(
        item_ids=[alice_item.pk, dave_item.pk], namespace=NS, guard=_RefusesMarked()
    )
    assert [item.pk for item, _ in refused] == [dave_item.pk]
    assert approved == 1
    statuses = dict(ReviewItem.objects.values_list("pk", "status"))
    assert statuses == {alice_item.pk: "approved", dave_item.pk: "pending"}
    assert not MemoryEvent.objects.filter(memory_id=dave_item.pk, event_type="review_approve")


def test_a_correction_of_one_contributor_s_words_is_approved_whichever_sibling_is():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    review_edit.edit(
        item_id=alice_item.pk,
        namespace=NS,
        changes={"content": "Ledger on Postgres 16."},
        actor="rv",
    )
    assert ReviewItem.objects.get(pk=dave_item.pk).content == "Ledger on Postgres 16."
    edits = MemoryEvent.objects.filter(event_type="review_edit").values_list("memory_id", "actor")
    assert sorted(edits) == sorted([(alice_item.pk, "rv"), (dave_item.pk, "rv")])
    memory = MemoryManager(project=NS).approve_review_item(dave_item.pk, actor="root")
    assert memory is not None and memory.content == "Ledger on Postgres 16."
    assert ReviewItem.objects.get(pk=alice_item.pk).status == "approved"


def test_a_new_scope_moves_only_the_edited_item_out_of_its_key():
    (alice_item,) = _say(ALICE, DECISION)
    (dave_item,) = _say(DAVE, DECISION)
    review_edit.edit(
        item_id=alice_item.pk, namespace=NS, changes={"scope": "user", "content": "mine"}
    )
    dave_after = ReviewItem.objects.get(pk=dave_item.pk)
    assert (dave_after.scope, dave_after.content) == ("project", dave_item.content)
    MemoryManager(project=NS).approve_review_item(dave_item.pk)
    assert ReviewItem.objects.get(pk=alice_item.pk).status == "pending"
