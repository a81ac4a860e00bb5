"""The admin index shows each account only what it may open (issue #39).

Every link of the front page, followed as the signed-in user would, answers 200:
a tile, a bar of the chart or a compliance link the account may not open is not a
link at all. A page opened without its permission anyway (a bookmark) is the
admin's own styled 403, naming the permission, with a way back. User keys with
their memory counts are shown only to those who may see holdings.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from tests._admin_support import (
    ALICE,
    BOB,
    MEMORIES,
    OPERATOR_PERMS,
    REVIEW,
    SUMMARIES,
    client_for,
    make_staff,
    seed_tenant,
)
from tests.factories import make_officer

pytestmark = pytest.mark.django_db


class _Links(HTMLParser):
    """Every ``href`` of a page (SVG links of the chart included)."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href and not href.startswith(("#", "mailto:", "javascript:")):
                self.hrefs.append(href)


def links_of(html: str, base: str = "/admin/") -> list[str]:
    parser = _Links()
    parser.feed(html)
    return list(dict.fromkeys(urljoin(base, h) for h in parser.hrefs))


def compliance_user():
    return make_officer("officer")


ACCOUNTS = {
    "compliance group": compliance_user,
    "view-only request handler": lambda: make_staff("viewer", ["view_subjectrequest"]),
    "operator": lambda: make_staff("operator", OPERATOR_PERMS),
}


@pytest.mark.parametrize("account", sorted(ACCOUNTS))
def test_every_link_on_the_index_opens(account):
    seed_tenant()
    client = client_for(ACCOUNTS[account]())
    page = client.get("/admin/")
    assert page.status_code == 200
    links = [u for u in links_of(page.content.decode()) if urlsplit(u).path.startswith("/admin/")]
    assert links, "the index has links"
    broken = {}
    for url in links:
        status = client.get(url).status_code
        if status != 200:
            broken[url] = status
    assert broken == {}


def test_a_compliance_user_sees_the_tiles_as_figures_not_as_links():
    seed_tenant()
    html = client_for(compliance_user()).get("/admin/").content.decode()
    assert f'href="{MEMORIES}"' not in html and f'href="{SUMMARIES}"' not in html
    assert f'href="{REVIEW}?status=pending"' not in html
    assert "live memories" in html and "session summaries" in html  # the figures stay


def test_an_operator_keeps_the_tiles_and_the_chart_links():
    seed_tenant()
    html = client_for(make_staff("operator", OPERATOR_PERMS)).get("/admin/").content.decode()
    assert f'href="{MEMORIES}"' in html and f'href="{SUMMARIES}"' in html
    assert f"{MEMORIES}?namespace=acme%2Fweb" in html
    assert "Add a request" not in html  # no add permission on requests


@pytest.mark.parametrize("url", [MEMORIES, REVIEW, SUMMARIES, MEMORIES + "add/"])
def test_a_page_opened_without_permission_is_the_styled_403(url):
    client = client_for(compliance_user())
    response = client.get(url)
    assert response.status_code == 403
    html = response.content.decode()
    assert 'id="forbidden-reason"' in html and "memoryapp." in html
    assert 'href="/admin/"' in html  # the way back
    assert "Django administration" in html or 'id="header"' in html  # the admin's frame


def test_per_user_figures_only_for_those_who_may_see_holdings():
    seed_tenant()
    viewer = client_for(make_staff("viewer", ["view_subjectrequest"]))
    html = viewer.get("/admin/").content.decode()
    assert ALICE not in html and BOB not in html
    assert "user namespaces (2 users)" in html and 'id="overview-users-folded"' in html
    receipts = client_for(make_staff("reader", ["view_erasurereceipt"]))
    assert ALICE not in receipts.get("/admin/").content.decode()
    officer = client_for(compliance_user())  # export and erase: holdings are theirs to see
    html = officer.get("/admin/").content.decode()
    assert ALICE in html and "overview-users-folded" not in html


def test_the_add_request_link_is_for_those_who_may_add():
    client = client_for(compliance_user())
    html = client.get("/admin/").content.decode()
    assert 'id="add-request"' in html
    assert client.get("/admin/memoryapp/subjectrequest/add/").status_code == 200
    viewer = client_for(make_staff("viewer", ["view_subjectrequest"]))
    assert 'id="add-request"' not in viewer.get("/admin/").content.decode()
