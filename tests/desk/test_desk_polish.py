"""The desk's smaller fixes of issue #39: titles, which actions are offered, warnings,
one date format per page and thousands separators."""

from __future__ import annotations

import pytest

from memoryapp.compliance import desk
from memoryapp.models import SubjectRequest
from memoryapp.templatetags.memoryapp_admin import facet_count
from tests._admin_support import (
    ERASE_SUBJECT,
    MEMORIES,
    client_for,
    make_staff,
    seed_tenant,
)

pytestmark = pytest.mark.django_db

URL = "/admin/memoryapp/subjectrequest/"


def test_a_request_page_is_titled_as_what_it_is(officer):
    made = desk.open_request(subject="acme/alice", right="access", actor="x")
    html = officer.get(f"{URL}{made.pk}/change/").content.decode()
    assert f"Subject request {made.pk[:8]}" in html
    assert "Change subject request" not in html
    listed = officer.get(URL).content.decode()
    assert "<h1>Subject requests</h1>" in listed and "to change" not in listed


@pytest.mark.parametrize("right", ["access", "portability", "rectification", "objection"])
def test_erase_is_offered_on_erasure_requests_only(officer, right):
    seed_tenant()
    made = desk.open_request(subject="acme/alice", right=right, actor="x")
    html = officer.get(f"{URL}{made.pk}/change/").content.decode()
    assert 'id="act-erase"' not in html and "/act/export/" in html
    r = officer.post(f"{URL}{made.pk}/act/erase/", {"confirm": "yes"}, follow=True)
    assert b"Erasure answers an erasure request" in r.content
    made.refresh_from_db()
    assert not made.receipts.exists() and made.history.count() == 1


def test_erase_is_offered_on_an_erasure_request(officer):
    made = desk.open_request(subject="acme/alice", right="erasure", actor="x")
    assert 'id="act-erase"' in officer.get(f"{URL}{made.pk}/change/").content.decode()


def test_the_erase_page_warns_loudly_when_nothing_is_held():
    client = client_for(make_staff("eraser", ["erase_memory", "view_erasurereceipt"]))
    r = client.post(ERASE_SUBJECT, {"subject": "acme/nobody"})
    html = r.content.decode()
    assert r.status_code == 200 and 'id="erase-empty"' in html
    assert "mem-callout mem-danger" in html[html.index("erase-empty") - 80 :]


def test_the_request_list_shows_one_date_format(officer):
    desk.open_request(subject="acme/alice", right="access", actor="x", reference="Ticket 1")
    html = officer.get(URL).content.decode()
    today = desk.today()
    assert today.isoformat() in html
    assert today.strftime("%b") not in html.split('id="result_list"')[1]
    assert "Ticket 1" in html


def test_the_reference_is_searchable_and_scrubbed(officer):
    desk.open_request(
        subject="acme/alice", right="access", actor="x", reference="ACME%2FAlice, ticket 77"
    )
    desk.open_request(subject="acme/bob", right="access", actor="x", reference="ticket 78")
    made = SubjectRequest.objects.get(reference__contains="77")
    assert made.reference == "(the subject), ticket 77"
    html = officer.get(URL, {"q": "ticket 77"}).content.decode()
    assert made.pk[:8] in html and "ticket 78" not in html


def test_form_help_and_facet_counts_have_thousands_separators():
    client = client_for(make_staff("root", superuser=True))
    assert b"At most 4,000 characters" in client.get(MEMORIES + "add/").content
    assert facet_count("erasure (12345)") == "erasure (12,345)"
    assert facet_count("open (12)") == "open (12)" and facet_count("") == ""
    seed_tenant()
    listed = client.get(MEMORIES, {"_facets": "True"})
    assert "memoryapp/admin/filter.html" in [t.name for t in listed.templates]
