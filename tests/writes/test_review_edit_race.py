"""A reviewer's edit racing an approval of the same item: the memory is always the
text the item held when it was approved, never an edit that landed afterwards."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from memoryapp import MemoryManager
from memoryapp.models import Memory, ReviewItem
from memoryapp.services import review_edit

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 12


def test_edit_racing_approval_never_changes_an_approved_item():
    mm = MemoryManager(project="race/web", user="race/alice")
    outcomes = set()
    for n in range(ROUNDS):
        (item,) = mm.crystallize_user_messages(
            [{"role": "user", "content": f"Never deploy on day {'x' * (n + 1)}"}]
        )
        barrier = threading.Barrier(2)
        result: dict[str, object] = {}

        def edit(item=item, result=result, barrier=barrier) -> None:
            try:
                barrier.wait()
                result["edit"] = review_edit.edit(
                    item_id=item.pk, namespace=item.namespace, changes={"content": "EDITED rule"}
                )
            finally:
                connections.close_all()

        def approve(item=item, result=result, barrier=barrier) -> None:
            try:
                barrier.wait()
                result["memory"] = MemoryManager(project="race/web").approve_review_item(item.pk)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=edit), threading.Thread(target=approve)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        memory = Memory.objects.get(pk=result["memory"].pk)  # approval always succeeds
        row = ReviewItem.objects.get(pk=item.pk)
        assert row.status == "approved"
        # The memory holds exactly what the item held when approved.
        assert memory.content == row.content
        if result["edit"] is None:  # approved first: the edit found nothing pending
            assert row.content == item.content
            outcomes.add("approved first")
        else:  # edited first: the approval promoted the edit
            assert memory.content == "EDITED rule"
            outcomes.add("edited first")
    assert outcomes  # both orders are legal; neither may leave the two apart
