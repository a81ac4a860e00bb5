"""Two officers at once on one request: a copy read before a colleague acted changes
nothing it should not (a closed request is never reopened, an extension or a note is
never lost), and an export or erasure that was running when the request was closed is
recorded without reopening it."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memoryapp.compliance import desk
from memoryapp.compliance.holdings import holdings
from memoryapp.models import (
    ErasureReceipt,
    ExportRecord,
    RequestStatus,
    SubjectRequest,
    SubjectRequestEvent,
)
from tests._admin_support import ALICE, make_staff, seed_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def made():
    return desk.open_request(subject=ALICE, right="erasure", actor="intake")


def actions(req: SubjectRequest) -> list[str]:
    return list(SubjectRequestEvent.objects.filter(request=req).values_list("action", flat=True))


def _each_action(stale: SubjectRequest, handler):
    return {
        "start": lambda: desk.start(stale, actor="late"),
        "assign": lambda: desk.assign(stale, handler, actor="late"),
        "extend": lambda: desk.extend(stale, 1, "more time", actor="late"),
        "note": lambda: desk.add_note(stale, "called back", actor="late"),
        "export": lambda: desk.export_for(stale, actor="late"),
        "erase": lambda: desk.erase_for(stale, actor="late", purge=False),
        "close": lambda: desk.close(stale, refused=True, outcome="late", actor="late"),
    }


@pytest.mark.parametrize("name", ["start", "assign", "extend", "note", "export", "erase", "close"])
def test_a_copy_read_before_a_colleague_closed_changes_nothing(made, name):
    seed_tenant()
    handler = make_staff("handler", ("change_subjectrequest",))
    stale = SubjectRequest.objects.get(pk=made.pk)  # a page, a CLI call or an API call in flight
    desk.close(made, refused=False, outcome="answered", actor="colleague")
    with pytest.raises(desk.RequestError, match="closed meanwhile"):
        _each_action(stale, handler)[name]()
    row = SubjectRequest.objects.get(pk=made.pk)
    # Before: start() saved the copy's status and reopened the request, key gone.
    assert row.status == RequestStatus.ANSWERED and row.sealed is None
    assert (row.outcome, row.notes, row.extension_months, row.assignee) == ("answered", "", 0, None)
    assert actions(row) == ["created", "answered"]
    assert not ExportRecord.objects.exists() and not ErasureReceipt.objects.exists()


def test_two_officers_extending_by_a_month_each_count_two_months_then_stop(made):
    first = SubjectRequest.objects.get(pk=made.pk)
    second = SubjectRequest.objects.get(pk=made.pk)  # both pages show "not extended"
    desk.extend(first, 1, "waiting on the processor", actor="a")
    desk.extend(second, 1, "complex request", actor="b")
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.extension_months == 2
    assert row.due_on == desk.due_date(row.received_on, 2)
    with pytest.raises(desk.RequestError, match="2 months at most"):
        desk.extend(first, 1, "again", actor="a")


def test_a_note_added_from_an_old_copy_keeps_the_colleagues_note(made):
    stale = SubjectRequest.objects.get(pk=made.pk)
    desk.add_note(made, "first call", actor="a")
    desk.add_note(stale, "second call", actor="b")
    assert SubjectRequest.objects.get(pk=made.pk).notes == "first call\nsecond call"


def test_an_erasure_running_when_the_request_is_closed_is_recorded_without_reopening(
    made, monkeypatch
):
    """The erasure was asked for while the request was open: its receipt is linked and
    in the history, and the request stays closed (it was reopened before)."""
    seed_tenant()
    real_erase = desk.erase

    def erase_while_a_colleague_closes(**kwargs):
        receipt = real_erase(**kwargs)
        desk.close(SubjectRequest.objects.get(pk=made.pk), refused=False, outcome="done", actor="b")
        return receipt

    monkeypatch.setattr(desk, "erase", erase_while_a_colleague_closes)
    (receipt,) = desk.erase_for(made, actor="a", purge=False)
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.status == RequestStatus.ANSWERED and row.sealed is None
    assert list(row.receipts.all()) == [receipt]
    assert actions(row) == ["created", "answered", "erased"]  # no "started" after closing


def test_an_export_running_when_the_request_is_closed_is_recorded_without_reopening(
    made, monkeypatch
):
    seed_tenant()
    real_export = desk.export

    def export_while_a_colleague_closes(**kwargs):
        document = real_export(**kwargs)
        desk.close(SubjectRequest.objects.get(pk=made.pk), refused=False, outcome="done", actor="b")
        return document

    monkeypatch.setattr(desk, "export", export_while_a_colleague_closes)
    desk.export_for(made, actor="a")
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.status == RequestStatus.ANSWERED and row.sealed is None
    assert row.exports.count() == 1
    assert actions(row) == ["created", "answered", "exported"]


# ------------------------------------------------------------------ real threads (PostgreSQL)
def _in_threads(*jobs):
    """Run each job in its own thread and connection; return what each returned or raised."""
    results: list = [None] * len(jobs)

    def run(i, job):
        try:
            results[i] = job()
        except Exception as exc:  # noqa: BLE001 - the test inspects what each thread met
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_extensions_at_once_never_count_as_one(monkeypatch):
    made = desk.open_request(subject=ALICE, right="access", actor="intake")
    both_read = threading.Barrier(2, timeout=20)
    real_due = desk.due_date

    def due_after_both_read(received, months=0):
        both_read.wait()  # each has read "0 months so far" before either writes
        return real_due(received, months)

    monkeypatch.setattr(desk, "due_date", due_after_both_read)
    results = _in_threads(
        lambda: desk.extend(SubjectRequest.objects.get(pk=made.pk), 1, "a", actor="a"),
        lambda: desk.extend(SubjectRequest.objects.get(pk=made.pk), 1, "b", actor="b"),
    )
    refused = [r for r in results if isinstance(r, desk.RequestError)]
    assert len(refused) == 1 and "changed meanwhile" in str(refused[0]), results
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.extension_months == 1 and actions(row).count("extended") == 1


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_double_submitted_erasure_starts_the_request_once_and_links_both_receipts():
    seed_tenant()
    made = desk.open_request(subject=ALICE, right="erasure", actor="intake")
    both_loaded = threading.Barrier(2, timeout=20)

    def submit(actor: str):
        copy = SubjectRequest.objects.get(pk=made.pk)
        both_loaded.wait()
        return desk.erase_for(copy, actor=actor, purge=False)

    results = _in_threads(lambda: submit("a"), lambda: submit("b"))
    assert all(isinstance(r, list) for r in results), results
    row = SubjectRequest.objects.get(pk=made.pk)
    assert row.status == RequestStatus.IN_PROGRESS
    assert actions(row).count("started") == 1 and actions(row).count("erased") == 2
    counts = sorted(sum(r.counts.values()) for [r] in results)
    assert counts[0] == 0 < counts[1]  # the second found nothing left; both are proof
    assert row.receipts.count() == 2


# ------------------------------------------------------------------ what we hold
def test_what_we_hold_totals_what_the_receipt_then_reports(made):
    """The erase page said "Total 6" and the receipt "All 9 records": events were not counted."""
    from memoryapp.compliance.selection import EVENTS, rows_removed

    seed_tenant()
    held = holdings(ALICE)
    assert held[EVENTS] and sum(held[EVENTS].values()) > 0
    before = sum(n for per in held.values() for n in per.values())
    (receipt,) = desk.erase_for(made, actor="dpo", purge=False)
    assert rows_removed(receipt.counts) == before
    assert holdings(ALICE) == {}


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_closes_submitted_at_once_one_wins_the_other_is_told():
    made = desk.open_request(subject=ALICE, right="access", actor="intake")
    both_loaded = threading.Barrier(2, timeout=20)

    def close(refused: bool, outcome: str):
        copy = SubjectRequest.objects.get(pk=made.pk)
        both_loaded.wait()
        return desk.close(copy, refused=refused, outcome=outcome, actor=outcome)

    results = _in_threads(lambda: close(False, "sent"), lambda: close(True, "unfounded"))
    refused = [r for r in results if isinstance(r, desk.RequestError)]
    assert len(refused) == 1 and "closed meanwhile" in str(refused[0]), results
    row = SubjectRequest.objects.get(pk=made.pk)
    closing = [a for a in actions(row) if a in ("answered", "refused")]
    assert len(closing) == 1 and row.status == closing[0] and row.sealed is None
    assert row.outcome == ("sent" if closing[0] == "answered" else "unfounded")


def test_what_we_hold_lists_the_tables_in_one_order_whatever_the_namespaces_order():
    from memoryapp.compliance.selection import EVENTS, MEMORIES, REVIEW, SUMMARIES

    seed_tenant()
    held = holdings(ALICE, ["acme/web", ALICE])  # summaries come first in acme/web
    assert list(held) == [MEMORIES, SUMMARIES, REVIEW, EVENTS]
