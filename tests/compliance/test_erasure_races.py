"""An erasure racing an approval, a write or an edit of what it erases: one of them wins cleanly.

Issue #26: ``POST /api/erasures/ {"subject": S}`` and the approval of S's review
item sent at the same instant both succeeded on PostgreSQL, and the approved memory
kept the erased text. Each round below starts the two requests together behind a
barrier (each thread its own database connection), then checks the outcome: the
other request lost (a clean 404, the row gone) or happened before the erasure and
was erased with it; a write that outlives the erasure committed after it; and once
purged, every receipt verifies (no residue of the erased text anywhere).

On SQLite the race cannot happen (IMMEDIATE transactions serialise the two
transactions wholly); the same rounds run there to show it.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import connections
from django.test import Client

from memoryapp import MemoryManager, compliance
from memoryapp.api.testing import token_client
from memoryapp.compliance import engine
from memoryapp.models import (
    ErasureReceipt,
    Memory,
    ReceiptState,
    ReviewItem,
    Scope,
    SessionSummary,
)
from tests._admin_support import make_staff

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

LAGS = 8  # the head starts one sweep tries (_lag)
SWEEPS = {"postgresql": 3, "sqlite": 1}
"""Sweeps of every head start per test: PostgreSQL, where the race is real, runs three
(24 rounds); SQLite, whose IMMEDIATE transactions serialise the two wholly, one (8 rounds,
every head start still tried once) — the test time of issue #39, nothing asserted less."""


def _rounds() -> range:
    return range(LAGS * SWEEPS.get(connections["default"].vendor, 3))


PROJECT = "acme/web"


def _together(*calls, lag: float = 0.0):
    """Run ``calls`` at the same instant, one thread each; their results (or exceptions).

    The calls after the first start ``lag`` seconds after it: the rounds sweep it, so
    that the write lands at every point of the erasure's transaction in some round.
    """
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait(30)
            if i and lag:
                time.sleep(lag)
            results[i] = calls[i]()
        except BaseException as exc:  # reported by the test, not lost in the thread
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a racing request hung"
    return results


def _clients():
    """Two clients of the same API credentials (a client object is not shared by threads)."""
    first = token_client("acme-racer", ["acme/"], write=True, erase=True)
    second = Client(HTTP_AUTHORIZATION=f"Token {first.token}")
    third = Client(HTTP_AUTHORIZATION=f"Token {first.token}")
    return second, third


def _erase_subject(client, subject: str):
    return lambda: client.post(
        "/api/erasures/", {"subject": subject}, content_type="application/json"
    )


def _receipt_of(response) -> ErasureReceipt:
    assert response.status_code in (201, 202), response.content
    return ErasureReceipt.objects.get(pk=response.json()["id"])


def _deleted_at(receipt: ErasureReceipt) -> dt.datetime:
    return dt.datetime.fromisoformat(receipt.details["phases"]["deleted"])


def _all_receipts_verify(receipts: list[ErasureReceipt]) -> None:
    """Purge and verify every receipt (one vendor purge): none may find erased text."""
    engine.retry()
    for r in receipts:
        r.refresh_from_db()
        assert r.state == ReceiptState.COMPLETE and r.verified, (r.state, r.purge_status)


def _lag(n: int) -> float:
    """Round ``n``'s head start of the erasure: 0 to 42 ms."""
    return (n % LAGS) * 0.006


def _text(kind: str, n: int) -> str:
    return f"racemarker {kind} {n} qzv{n:03d}{kind[:2]}x"


@pytest.fixture(autouse=True)
def _worker_purges(settings):
    # The requests only delete; one purge at the end verifies every round's receipt.
    settings.MEMORYAPP_ERASURE_WORKER = True


def test_erase_racing_approve_leaves_no_approved_memory_of_the_subject():
    """The reported race: the approval either loses (404, its item erased) or wins and its
    memory is erased with the subject."""
    eraser, approver = _clients()
    receipts, outcomes = [], set()
    for n in _rounds():
        subject = f"acme/ann{n}"
        item = ReviewItem.objects.create(
            namespace=PROJECT,
            subject=subject,
            scope=Scope.USER,
            type="preference",
            key_normalized=f"pref_{n}",
            title=f"pref {n}",
            content=_text("approve", n),
        )
        erased, approved = _together(
            _erase_subject(eraser, subject),
            lambda item=item: approver.post(f"/api/review-items/{item.pk}/approve/"),
            lag=_lag(n),
        )
        receipt = _receipt_of(erased)
        receipts.append(receipt)
        assert not isinstance(approved, BaseException), approved
        assert approved.status_code in (200, 404), approved.content  # never a 500
        outcomes.add(approved.status_code)
        # Whatever the order, nothing of the subject outlives its erasure.
        assert not Memory.objects.filter(subject=subject).exists(), n
        assert not Memory.objects.filter(namespace=subject).exists(), n
        assert not Memory.objects.filter(content__contains=_text("approve", n)).exists(), n
        assert not ReviewItem.objects.filter(pk=item.pk).exists()
        if approved.status_code == 200:  # it happened before: the erasure took its memory
            assert approved.json()["memory"]["id"] in receipt.erased_ids["memories"]
    _all_receipts_verify(receipts)


def test_erase_racing_a_write_for_the_subject():
    """A memory written for the subject while it is erased: erased with it, or written
    after the erasure committed (a new write, never one the erasure's selection missed)."""
    eraser, writer = _clients()
    receipts = []
    for n in _rounds():
        subject = f"acme/bea{n}"
        Memory.objects.upsert(
            namespace=subject, key=f"old {n}", value=_text("old", n), scope="user"
        )
        erased, wrote = _together(
            _erase_subject(eraser, subject),
            lambda n=n, subject=subject: writer.post(
                "/api/memories/",
                {
                    "project": PROJECT,
                    "user": subject,
                    "key": f"new {n}",
                    "value": _text("new", n),
                    "scope": "user",
                },
                content_type="application/json",
            ),
            lag=_lag(n),
        )
        receipt = _receipt_of(erased)
        receipts.append(receipt)
        assert not isinstance(wrote, BaseException), wrote
        assert wrote.status_code in (200, 201), wrote.content
        assert not Memory.objects.filter(content__contains=_text("old", n)).exists()
        survivor = Memory.objects.filter(pk=wrote.json()["id"]).first()
        if survivor is not None:  # the write committed after the erasure: a new write
            assert survivor.id not in receipt.erased_ids.get("memories", [])
            assert survivor.created_at >= _deleted_at(receipt), n
            survivor.delete()  # the next check is about the erased text only
    _all_receipts_verify(receipts)


def test_erase_of_a_namespace_racing_a_write_into_it():
    """A namespace erasure and a write into that namespace: the same rule."""
    eraser, writer = _clients()
    receipts = []
    for n in _rounds():
        namespace = f"acme/proj{n}"
        Memory.objects.upsert(namespace=namespace, key=f"old {n}", value=_text("nsold", n))
        erased, wrote = _together(
            lambda namespace=namespace: eraser.post(
                "/api/erasures/", {"namespace": namespace}, content_type="application/json"
            ),
            lambda n=n, namespace=namespace: writer.post(
                "/api/memories/",
                {"project": namespace, "key": f"new {n}", "value": _text("nsnew", n)},
                content_type="application/json",
            ),
            lag=_lag(n),
        )
        receipt = _receipt_of(erased)
        receipts.append(receipt)
        assert wrote.status_code in (200, 201), wrote.content
        assert not Memory.objects.filter(content__contains=_text("nsold", n)).exists()
        survivor = Memory.objects.filter(pk=wrote.json()["id"]).first()
        if survivor is not None:
            assert survivor.created_at >= _deleted_at(receipt), n
            survivor.delete()
    _all_receipts_verify(receipts)


def test_erase_racing_an_admin_edit_of_the_row():
    """An operator saves a memory of the subject while it is erased: the edit lands before
    (and is erased) or finds the row gone (404) — never a 500, never the edited row kept."""
    eraser, _ = _clients()
    operator = Client()
    operator.force_login(make_staff("root", superuser=True))
    receipts = []
    for n in _rounds():
        subject = f"acme/cid{n}"
        row = Memory.objects.upsert(
            namespace=subject, key=f"editor {n}", value=_text("before", n), scope="user"
        )
        erased, edited = _together(
            _erase_subject(eraser, subject),
            lambda row=row, n=n: operator.post(
                f"/admin/memoryapp/memory/{row.pk}/change/",
                {"key": f"editor {n}", "content": _text("edited", n), "tags": "", "type": ""},
            ),
            lag=_lag(n),
        )
        receipts.append(_receipt_of(erased))
        assert not isinstance(edited, BaseException), edited
        assert edited.status_code in (302, 404), edited.status_code
        assert not Memory.objects.filter(pk=row.pk).exists()
        for kind in ("before", "edited"):
            assert not Memory.objects.filter(content__contains=_text(kind, n)).exists()
    _all_receipts_verify(receipts)


def test_approve_or_reject_of_an_erased_item_is_404_not_500():
    """Issue #26 (Low): the item erased after the view read it, before the decision."""
    from unittest import mock

    from memoryapp.services import review

    client = token_client("acme-racer", ["acme/"], write=True, erase=True)
    for action, service in (("approve", "approve"), ("reject", "reject")):
        item = ReviewItem.objects.create(
            namespace=PROJECT,
            subject="acme/dan",
            scope=Scope.USER,
            type="preference",
            key_normalized=f"gone_{action}",
            title="gone",
            content="gone",
        )
        real = getattr(review, service)

        def erased_first(*, item_id, real=real, **kwargs):
            compliance.erase(ids=[item_id], purge=False)
            return real(item_id=item_id, **kwargs)

        with mock.patch.object(review, service, erased_first):
            r = client.post(f"/api/review-items/{item.pk}/{action}/")
        assert r.status_code == 404, r.content
        assert "no longer exists" in r.json()["detail"]


def test_erase_racing_a_crystallize_and_a_summary_of_the_subject():
    """Review items and session summaries written for the subject while it is erased: the
    same rule as memories (erased with it, or written after it committed)."""
    eraser, writer = _clients()
    summarizer = Client(HTTP_AUTHORIZATION=writer.defaults["HTTP_AUTHORIZATION"])
    receipts = []
    for n in _rounds():
        subject = f"acme/dee{n}"
        Memory.objects.upsert(
            namespace=subject, key=f"old {n}", value=_text("dold", n), scope="user"
        )
        # A client's subject erasure acts in the namespaces holding the subject's rows
        # when it is authorised (and the subject's own): give it one in the project.
        MemoryManager(project=PROJECT, user=subject).save_session_summary(f"earlier {n}")
        erased, queued, summed = _together(
            _erase_subject(eraser, subject),
            lambda n=n, subject=subject: writer.post(
                "/api/crystallize/",
                {
                    "project": PROJECT,
                    "user": subject,
                    "messages": [{"role": "user", "content": f"I prefer qzv{n} tabs"}],
                },
                content_type="application/json",
            ),
            lambda n=n, subject=subject: summarizer.post(
                "/api/session-summaries/",
                {"project": PROJECT, "user": subject, "summary": f"summary {n}", "session_id": "s"},
                content_type="application/json",
            ),
            lag=_lag(n),
        )
        receipt = _receipt_of(erased)
        receipts.append(receipt)
        assert queued.status_code == 200, queued.content
        assert summed.status_code in (200, 201), summed.content
        deleted_at = _deleted_at(receipt)
        for model in (ReviewItem, SessionSummary):
            for row in model.objects.filter(subject=subject):
                assert row.created_at >= deleted_at, (model.__name__, n)
                row.delete()
    _all_receipts_verify(receipts)
