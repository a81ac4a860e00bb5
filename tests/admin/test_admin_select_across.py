"""“Select all N” then an action, for thousands of rows (issue 14, item 4).

The confirmation page must carry the changelist's filter, not one hidden
field per id: Django refuses a POST of more than DATA_UPLOAD_MAX_NUMBER_FIELDS
(1,000) fields with HTTP 400 (TooManyFieldsSent). The tests post what a
browser posts: the changelist form with ``select_across=1`` and the rows of
its page, then the confirmation page's own form, field for field, as
``application/x-www-form-urlencoded``. The limit is left at Django's default.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest
from django.conf import global_settings, settings
from django.contrib.admin.models import LogEntry

from memoryapp.fields import now
from memoryapp.models import ErasureReceipt, Memory, MemoryEvent, ReviewItem, SessionSummary
from tests._admin_support import (
    MEMORIES,
    OPERATOR_PERMS,
    PROJECT,
    REVIEW,
    SUMMARIES,
    client_for,
    make_staff,
    messages_of,
)

pytestmark = pytest.mark.django_db

BIG, SMALL = "bulk/big", "bulk/small"
N_BIG, N_SMALL = 1_500, 600  # 2,100 live memories: both sides of the 1,000-field limit
N_DELETED = 1_200
N_ITEMS = 1_100
FORM = "application/x-www-form-urlencoded"


# ------------------------------------------------------------------ rows
def _memories(namespace: str, n: int, word: str, *, deleted: bool = False) -> list[str]:
    """``n`` memories (with their "create" event) written in two statements; returns their ids."""
    stamp = now()
    rows = [
        Memory(
            namespace=namespace,
            scope="project",
            key_normalized=f"{word}_{i}",
            title=f"{word} {i}",
            content=f"{word} note number {i}",
            created_at=stamp,
            updated_at=stamp,
            deleted_at=stamp if deleted else None,
        )
        for i in range(n)
    ]
    Memory.objects.bulk_create(rows, batch_size=500)
    MemoryEvent.objects.bulk_create(
        [MemoryEvent(memory_id=m.id, event_type="create", namespace=namespace) for m in rows],
        batch_size=500,
    )
    return [m.id for m in rows]


@pytest.fixture
def live():
    """1,500 live memories about "alpha" in one namespace, 600 about "beta" in another."""
    return {BIG: _memories(BIG, N_BIG, "alpha"), SMALL: _memories(SMALL, N_SMALL, "beta")}


@pytest.fixture
def deleted():
    """Soft-deleted memories: 1,200 in one namespace, 600 in another."""
    return {
        BIG: _memories(BIG, N_DELETED, "gamma", deleted=True),
        SMALL: _memories(SMALL, N_SMALL, "delta", deleted=True),
    }


@pytest.fixture
def pending():
    """1,100 pending review items of one project."""
    stamp = now()
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                namespace=PROJECT,
                scope="project",
                type="preference",
                key_normalized=f"candidate_{i}",
                title=f"candidate {i}",
                content=f"The team prefers option {i}",
                created_at=stamp,
                updated_at=stamp,
            )
            for i in range(N_ITEMS)
        ],
        batch_size=500,
    )


@pytest.fixture
def summaries():
    """1,100 session summaries of one project, 100 of another."""
    SessionSummary.objects.bulk_create(
        [
            SessionSummary(namespace=PROJECT if i < N_ITEMS else SMALL, session_id=f"s-{i}",
                           summary_text=f"session {i} went well")
            for i in range(N_ITEMS + 100)
        ],
        batch_size=500,
    )  # fmt: skip


@pytest.fixture
def admin():
    return client_for(make_staff("root", superuser=True))


# ------------------------------------------------------- posting as a browser
class _FormFields(HTMLParser):
    """The ``action`` and the fields of the confirmation page's form (the one with post=yes)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, list[tuple[str, str]]]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append((attrs.get("action") or "", []))
        elif tag == "input" and self.forms and attrs.get("name"):
            self.forms[-1][1].append((attrs["name"], attrs.get("value") or ""))


def confirmation_form(page) -> tuple[str, list[tuple[str, str]]]:
    """The confirmation form of ``page``: where it posts, and every field it posts."""
    parser = _FormFields()
    parser.feed(page.content.decode())
    (form,) = [f for f in parser.forms if ("post", "yes") in f[1]]
    return form


def select_all(client, url: str, action: str, params: dict | None = None):
    """Tick "Select all N" on the changelist at ``url?params`` and run ``action``.

    Django's changelist form posts the rows of its page (all ticked), the
    action, the button's ``index`` and ``select_across=1``, to its own URL.
    """
    path = f"{url}?{urlencode(params)}" if params else url
    listing = client.get(path)
    assert listing.status_code == 200
    page_ids = [obj.pk for obj in listing.context["cl"].result_list]
    fields = [("action", action), ("index", "0"), ("select_across", "1")]
    fields += [("_selected_action", pk) for pk in page_ids]
    return client.post(path, urlencode(fields), content_type=FORM)


def confirm(client, page):
    """Press the confirmation page's submit button: post its form as a browser does.

    (A form without an ``action`` posts to the page's own URL.)
    """
    action, fields = confirmation_form(page)
    target = action or page.wsgi_request.get_full_path()
    return client.post(target, urlencode(fields), content_type=FORM)


def assert_carries_the_filter(page, total: int, *in_url: str) -> None:
    """The page names ``total`` rows, posts back the filter and ``select_across``, not the ids."""
    assert page.status_code == 200, page.status_code
    assert page.context["total"] == total
    action, fields = confirmation_form(page)
    names = [name for name, _ in fields]
    assert names.count("_selected_action") <= 50  # the changelist's one page, never the set
    assert ("select_across", "1") in fields
    assert dict(fields)["_selection"].startswith(f"{total}:")
    for part in in_url:
        assert part in action, (part, action)
    assert len(fields) < 100


# ------------------------------------------------------------- the limit
def test_the_field_limit_is_djangos_and_a_post_of_every_id_would_hit_it(admin, live):
    assert settings.DATA_UPLOAD_MAX_NUMBER_FIELDS == global_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    assert settings.DATA_UPLOAD_MAX_NUMBER_FIELDS == 1_000
    # What the old confirmation page posted: one field per id. The test client
    # does not hide the refusal, so the tests below would see it too.
    fields = [("action", "soft_delete_selected"), ("post", "yes")]
    fields += [("_selected_action", pk) for pk in live[BIG]]
    r = admin.post(MEMORIES, urlencode(fields), content_type=FORM)
    assert r.status_code == 400
    assert Memory.objects.live().count() == N_BIG + N_SMALL


# ------------------------------------------------------------- soft delete
def test_soft_delete_across_the_whole_list(admin, live):
    page = select_all(admin, MEMORIES, "soft_delete_selected")
    assert_carries_the_filter(page, N_BIG + N_SMALL)
    assert "You chose “Select all”" in page.content.decode()
    assert Memory.objects.live().count() == N_BIG + N_SMALL  # nothing happened yet

    r = confirm(admin, page)
    assert r.status_code == 302
    assert Memory.objects.live().count() == 0
    events = MemoryEvent.objects.filter(event_type="soft_delete")
    assert events.count() == N_BIG + N_SMALL
    assert set(events.values_list("actor", flat=True)) == {"root"}
    assert "Soft-deleted 2,100 memories" in messages_of(admin.get(MEMORIES))[0]
    # one History entry per memory, written in batches
    history = LogEntry.objects.filter(change_message="Soft-deleted.")
    assert history.count() == N_BIG + N_SMALL
    assert set(history.values_list("object_id", flat=True)) == set(live[BIG] + live[SMALL])


def test_soft_delete_across_a_search_touches_only_what_it_finds(admin, live):
    page = select_all(admin, MEMORIES, "soft_delete_selected", {"q": "alpha"})
    assert_carries_the_filter(page, N_BIG, "q=alpha")
    assert "search “alpha”" in page.content.decode()
    confirm(admin, page)
    assert not Memory.objects.live().filter(namespace=BIG).exists()
    assert Memory.objects.live().filter(namespace=SMALL).count() == N_SMALL


# ----------------------------------------------------------------- restore
def test_restore_across_the_deleted_view_of_one_namespace(admin, live, deleted):
    params = {"state": "deleted", "namespace": BIG}
    page = select_all(admin, MEMORIES, "restore_selected", params)
    assert_carries_the_filter(page, N_DELETED, "state=deleted", "namespace=bulk%2Fbig")

    r = confirm(admin, page)
    assert r.status_code == 302
    assert not Memory.objects.deleted().filter(namespace=BIG).exists()
    assert Memory.objects.deleted().filter(namespace=SMALL).count() == N_SMALL
    assert MemoryEvent.objects.filter(event_type="restore", actor="root").count() == N_DELETED
    assert f"Restored {N_DELETED:,} memories" in " ".join(messages_of(admin.get(MEMORIES)))
    assert LogEntry.objects.filter(change_message="Restored.").count() == N_DELETED


def test_restore_reports_a_few_refusals_and_counts_the_rest(admin, deleted):
    # Live rows hold the keys of 30 deleted ones: those 30 cannot be restored.
    others = Memory.objects.deleted().filter(namespace=SMALL).exclude(key_normalized="delta_0")
    taken = others.order_by("id")[:30]
    Memory.objects.bulk_create(
        [Memory(namespace=SMALL, scope="project", key_normalized=m.key_normalized,
                title=m.title, content="the new one") for m in taken]
    )  # fmt: skip
    # Two deleted versions of one key: the first restored takes it, the other stays.
    _memories(SMALL, 1, "delta", deleted=True)  # the key of "delta 0" again
    page = select_all(admin, MEMORIES, "restore_selected", {"state": "deleted", "namespace": SMALL})
    confirm(admin, page)
    assert Memory.objects.deleted().filter(namespace=SMALL).count() == 31
    delta_0 = Memory.objects.filter(namespace=SMALL, key_normalized="delta_0")
    assert delta_0.count() == 2 and delta_0.live().count() == 1
    texts = messages_of(admin.get(MEMORIES))
    assert f"Restored {N_SMALL - 30} memories." in texts
    assert sum("was not restored" in t and "already exists" in t for t in texts) == 20
    assert "… and 11 more memories were not restored." in texts


# ------------------------------------------------------------------- erase
def test_erase_across_a_namespace_is_one_receipt_with_the_counts_shown(admin, live):
    page = select_all(admin, MEMORIES, "erase_selected", {"namespace": BIG})
    assert_carries_the_filter(page, N_BIG, "namespace=bulk%2Fbig")
    counts = {row["table"]: row["count"] for row in page.context["counts"]}
    assert counts["memories"] == N_BIG and counts["memory_events"] == N_BIG
    assert "This cannot be undone." in page.content.decode()

    r = confirm(admin, page)
    receipt = ErasureReceipt.objects.get()
    assert r.status_code == 302
    assert r["Location"] == f"/admin/memoryapp/erasurereceipt/{receipt.pk}/change/"
    assert receipt.actor == "root"
    assert receipt.counts["memories"] == N_BIG and receipt.counts["memory_events"] == N_BIG
    assert not Memory.objects.filter(namespace=BIG).exists()
    assert not MemoryEvent.objects.filter(namespace=BIG).exists()
    assert Memory.objects.filter(namespace=SMALL).count() == N_SMALL
    assert f"Erased {N_BIG:,} memories permanently" in messages_of(admin.get(MEMORIES))[0]


# ------------------------------------------------------------------ export
def test_export_across_a_search_downloads_every_row_it_finds(admin, live):
    page = select_all(admin, MEMORIES, "export_selected", {"q": "alpha"})
    assert_carries_the_filter(page, N_BIG, "q=alpha")
    r = confirm(admin, page)
    assert r.status_code == 200 and r["Content-Type"].startswith("application/json")
    doc = json.loads(r.content)
    assert doc["counts"] == {"memories": N_BIG, "events": N_BIG}
    assert {m["namespace"] for m in doc["memories"]} == {BIG}
    assert set(doc["query"]["ids"]) == set(live[BIG])


# --------------------------------------------------- a selection that moved
def test_a_selection_that_grew_is_refused_and_can_be_reviewed_again(admin, live):
    page = select_all(admin, MEMORIES, "erase_selected", {"namespace": BIG})
    _memories(BIG, 1, "latecomer")  # written by an agent while the operator reads the page
    r = confirm(admin, page)
    assert r.status_code == 302 and r["Location"].endswith("?namespace=bulk%2Fbig")
    assert not ErasureReceipt.objects.exists()
    assert Memory.objects.filter(namespace=BIG).count() == N_BIG + 1
    text = messages_of(admin.get(MEMORIES))[0]
    assert text == (
        "Nothing was changed: the selection changed from 1,500 to 1,501 memories since the "
        "confirmation page. Review the selection again."
    )
    # reviewed again: the new page shows the new count, and confirming it erases them all
    page = select_all(admin, MEMORIES, "erase_selected", {"namespace": BIG})
    assert page.context["total"] == N_BIG + 1
    confirm(admin, page)
    assert not Memory.objects.filter(namespace=BIG).exists()


def test_a_selection_of_the_same_size_but_other_rows_is_refused(admin, live):
    page = select_all(admin, MEMORIES, "soft_delete_selected", {"namespace": SMALL})
    Memory.objects.filter(pk=live[SMALL][0]).update(deleted_at=now())  # one leaves the list
    _memories(SMALL, 1, "latecomer")  # and another enters it
    confirm(admin, page)
    assert Memory.objects.live().filter(namespace=SMALL).count() == N_SMALL
    assert "but not the same ones" in messages_of(admin.get(MEMORIES))[0]


def test_rows_ticked_one_by_one_still_post_their_ids(admin, live):
    ids = live[SMALL][:3]
    fields = [("action", "soft_delete_selected"), ("index", "0")]
    fields += [("_selected_action", pk) for pk in ids]
    page = admin.post(MEMORIES, urlencode(fields), content_type=FORM)
    _, posted = confirmation_form(page)
    assert sorted(v for n, v in posted if n == "_selected_action") == sorted(ids)
    assert "select_across" not in dict(posted) and "_selection" not in dict(posted)
    confirm(admin, page)
    assert Memory.objects.deleted().count() == 3


# ------------------------------------------------------------- permissions
def test_staff_without_the_permission_is_refused_across_the_list(admin, live):
    operator = client_for(make_staff("ops", OPERATOR_PERMS))  # may soft-delete, not erase
    page = select_all(admin, MEMORIES, "erase_selected", {"namespace": BIG})
    r = select_all(operator, MEMORIES, "erase_selected", {"namespace": BIG})
    assert r.status_code == 302  # not offered: Django says "No action selected."
    r = confirm(operator, page)  # the confirmation's fields, posted anyway
    assert r.status_code == 302
    assert "No action selected." in messages_of(operator.get(MEMORIES))
    assert not ErasureReceipt.objects.exists()
    assert Memory.objects.filter(namespace=BIG).count() == N_BIG

    viewer = client_for(make_staff("viewer", ("view_memory",)))
    page = select_all(admin, MEMORIES, "soft_delete_selected")
    r = confirm(viewer, page)  # no action at all for a viewer: the list is shown again
    assert r.status_code == 200 and r.context["action_form"] is None
    r = confirm(client_for(make_staff("dpo", ("view_memory", "erase_memory"))), page)
    assert r.status_code == 302  # erasure, yes; soft delete, no
    assert Memory.objects.live().count() == N_BIG + N_SMALL
    assert not MemoryEvent.objects.filter(event_type="soft_delete").exists()


# ------------------------------------------------------------ review queue
def test_reject_across_the_pending_queue(admin, pending):
    page = select_all(admin, REVIEW, "reject_selected")
    assert_carries_the_filter(page, N_ITEMS)
    confirm(admin, page)
    assert ReviewItem.objects.filter(status="rejected").count() == N_ITEMS
    assert f"Rejected {N_ITEMS:,} review items." in messages_of(admin.get(REVIEW))


def test_purge_across_the_queue_is_one_receipt_with_the_counts_shown(admin, pending):
    ReviewItem.objects.filter(key_normalized="candidate_0").update(status="rejected")
    page = select_all(admin, REVIEW, "purge_selected", {"status": "pending"})
    assert_carries_the_filter(page, N_ITEMS - 1, "status=pending")
    counts = {row["table"]: row["count"] for row in page.context["counts"]}
    assert counts["memory_review_queue"] == N_ITEMS - 1
    confirm(admin, page)
    (receipt,) = ErasureReceipt.objects.all()
    assert receipt.counts["memory_review_queue"] == N_ITEMS - 1
    assert list(ReviewItem.objects.values_list("status", flat=True)) == ["rejected"]


def test_approve_across_the_queue(admin, pending):
    page = select_all(admin, REVIEW, "approve_selected", {"namespace": PROJECT})
    assert_carries_the_filter(page, N_ITEMS, "namespace=acme%2Fweb")
    confirm(admin, page)
    assert ReviewItem.objects.filter(status="approved").count() == N_ITEMS
    assert Memory.objects.filter(namespace=PROJECT, source="crystallized").count() == N_ITEMS


def test_a_review_operator_without_purge_permission_is_refused(admin, pending):
    operator = client_for(make_staff("ops", OPERATOR_PERMS))
    page = select_all(admin, REVIEW, "purge_selected")
    assert select_all(operator, REVIEW, "purge_selected").status_code == 302
    confirm(operator, page)
    assert ReviewItem.objects.count() == N_ITEMS and not ErasureReceipt.objects.exists()


# ------------------------------------------------------- session summaries
def test_delete_summaries_across_a_namespace(admin, summaries):
    from django.contrib.admin.models import DELETION, LogEntry

    page = select_all(admin, SUMMARIES, "delete_selected", {"namespace": PROJECT})
    assert_carries_the_filter(page, N_ITEMS, "namespace=acme%2Fweb")
    text = page.content.decode()
    assert "hard delete" in text and "Erase a subject" in text
    r = confirm(admin, page)
    assert r.status_code == 302
    assert set(SessionSummary.objects.values_list("namespace", flat=True)) == {SMALL}
    events = MemoryEvent.objects.filter(event_type="summary_delete", actor="root")
    assert events.count() == N_ITEMS
    assert LogEntry.objects.filter(action_flag=DELETION).count() == N_ITEMS
    assert f"Successfully deleted {N_ITEMS} session summaries." in messages_of(admin.get(SUMMARIES))


def test_deleting_summaries_across_needs_the_delete_permission(admin, summaries):
    viewer = client_for(make_staff("viewer", ("view_sessionsummary",)))
    page = select_all(admin, SUMMARIES, "delete_selected")
    assert confirm(viewer, page).context["action_form"] is None  # the list again, no action
    assert SessionSummary.objects.count() == N_ITEMS + 100
