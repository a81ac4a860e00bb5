"""Tenant-scoped officers (issue #39): a staff user with desk tenant grants sees and acts
on the requests of those tenants only; another tenant's request is a 404 at every
interface (admin list, page, actions, look-up, front-page counts, the API and its
look-ups). Officers without a grant row, and superusers, keep every tenant's."""

from __future__ import annotations

import pytest

from memoryapp.api.testing import token_client
from memoryapp.compliance import desk
from memoryapp.compliance.desk_scope import tenant_of, visible_requests
from memoryapp.models import DeskGrant, SubjectRequest
from tests._admin_support import client_for, make_staff
from tests.factories import grant_desk, make_officer, make_staff_api, memory_row

pytestmark = pytest.mark.django_db

ADMIN = "/admin/memoryapp/subjectrequest/"
API = "/api/subject-requests/"
ACME_KEY, GLOBEX_KEY = "acme/alice", "globex/gina"


@pytest.fixture
def two_tenants():
    acme = desk.open_request(subject=ACME_KEY, right="erasure", actor="intake", reference="T-1")
    globex = desk.open_request(subject=GLOBEX_KEY, right="access", actor="intake", reference="T-2")
    return acme, globex


def test_a_request_carries_its_keys_tenant(two_tenants):
    acme, globex = two_tenants
    assert (acme.tenant, globex.tenant) == ("acme/", "globex/")
    assert tenant_of("acme/eu/bob") == "acme/eu/" and tenant_of("solo") == ""


def test_grants_are_exact_or_prefix_and_case_sensitive(two_tenants):
    eu = desk.open_request(subject="acme/eu/bob", right="access", actor="intake")
    upper = desk.open_request(subject="ACME/zed", right="access", actor="intake")
    assert set(visible_requests(make_officer("p", "acme/"))) == {two_tenants[0], eu}
    assert set(visible_requests(make_officer("e", "acme/eu/"))) == {eu}
    assert upper not in set(visible_requests(make_officer("q", "acme/")))
    assert set(visible_requests(make_officer("all"))) == {*two_tenants, eu, upper}
    boss = make_staff("boss", superuser=True)
    grant_desk(boss, "acme/")
    assert visible_requests(boss).count() == 4  # a superuser is never narrowed


def test_the_admin_list_shows_only_the_officers_tenants(two_tenants):
    acme, globex = two_tenants
    page = client_for(make_officer("dpo", "acme/")).get(ADMIN).content.decode()
    assert acme.pk[:8] in page and globex.pk[:8] not in page
    assert "T-1" in page and "T-2" not in page
    everyone = client_for(make_officer("chief")).get(ADMIN).content.decode()
    assert acme.pk[:8] in everyone and globex.pk[:8] in everyone


def test_another_tenants_request_is_a_404_in_the_admin(two_tenants):
    _, globex = two_tenants
    client = client_for(make_officer("dpo", "acme/"))
    assert client.get(f"{ADMIN}{globex.pk}/change/").status_code == 404
    assert client.get(f"{ADMIN}{globex.pk}/history/").status_code == 404
    assert client.get(f"{ADMIN}{two_tenants[0].pk}/history/").status_code == 200
    for action in ("start", "note", "export", "erase", "answer"):
        r = client.post(f"{ADMIN}{globex.pk}/act/{action}/", {"text": "x", "confirm": "yes"})
        assert r.status_code == 404, action
    globex.refresh_from_db()
    assert globex.status == "open" and globex.history.count() == 1  # nothing happened


def test_the_lookup_page_and_the_counts_leave_other_tenants_out(two_tenants):
    client = client_for(make_officer("dpo", "acme/"))
    found = client.post("/admin/memoryapp/erasurereceipt/lookup/", {"subject": GLOBEX_KEY})
    assert found.status_code == 200 and two_tenants[1].pk[:12] not in found.content.decode()
    assert desk.deadlines(user=make_officer("x", "acme/"))["open"] == 1
    assert desk.deadlines()["open"] == 2


def test_intake_of_another_tenants_key_is_refused(two_tenants):
    client = client_for(make_officer("dpo", "acme/"))
    r = client.post(
        ADMIN + "add/",
        {"subject": GLOBEX_KEY, "right": "access", "received_on": desk.today().isoformat()},
    )
    assert r.status_code == 200 and b"not one your desk handles" in r.content
    assert SubjectRequest.objects.count() == 2


def test_assigning_to_someone_outside_the_tenant_is_refused(two_tenants):
    acme, _ = two_tenants
    outsider = make_officer("gx", "globex/")
    with pytest.raises(desk.RequestError, match="may not handle"):
        desk.assign(acme, outsider, actor="dpo")
    desk.assign(acme, make_officer("ac", "acme/"), actor="dpo")


def _api(name: str, *grants: str):
    """An officer (the Compliance group) over the API, handling ``grants``' tenants."""
    return make_staff_api(name, compliance=True, tenants=grants)


def test_another_tenants_request_is_a_404_in_the_api(two_tenants):
    acme, globex = two_tenants
    client = _api("dpo", "acme/")
    listed = client.get(API).json()
    ids = [r["id"] for r in listed.get("results", listed)]
    assert ids == [acme.pk]
    assert client.get(f"{API}{globex.pk}/").status_code == 404
    for verb in ("export", "erase"):
        assert client.post(f"{API}{globex.pk}/{verb}/", format="json").status_code == 404
    act = client.post(f"{API}{globex.pk}/act/", {"action": "start"}, format="json")
    assert act.status_code == 404
    memory_row(GLOBEX_KEY)
    found = client.post(API + "lookup/", {"subject": GLOBEX_KEY}, format="json")
    assert found.status_code == 200 and found.json()["requests"] == []
    assert found.json()["holdings"] == {}  # where another tenant's person's data lies
    assert (
        _api("chief")
        .post(API + "lookup/", {"subject": GLOBEX_KEY}, format="json")
        .json()["holdings"]
    )
    erasures = client.post("/api/erasures/lookup/", {"subject": GLOBEX_KEY}, format="json")
    assert erasures.status_code == 200 and erasures.json()["requests"] == []
    opened = client.post(API, {"subject": GLOBEX_KEY, "right": "access"}, format="json")
    assert opened.status_code == 400
    globex.refresh_from_db()
    assert globex.status == "open"


def test_an_officer_without_grants_sees_every_tenant_in_the_api(two_tenants):
    client = _api("chief")
    listed = client.get(API).json()
    assert {r["id"] for r in listed.get("results", listed)} == {r.pk for r in two_tenants}
    assert client.get(f"{API}{two_tenants[1].pk}/").json()["tenant"] == "globex/"


def test_the_grant_admin_takes_tenants_and_staff_only():
    root = client_for(make_staff("root", superuser=True))
    dpo = make_officer("dpo")
    url = "/admin/memoryapp/deskgrant/add/"
    for bad in ("acme//", "/acme/", "acme/../x/"):
        r = root.post(url, {"user": dpo.pk, "namespace": bad})
        assert r.status_code == 200 and b"The tenant must not" in r.content, bad
    assert root.post(url, {"user": dpo.pk, "namespace": "acme/"}).status_code == 302
    assert list(DeskGrant.objects.values_list("namespace", flat=True)) == ["acme/"]
    client_user = token_client("bot", ["acme/"]).user  # an API client: not staff
    r = root.post(url, {"user": client_user.pk, "namespace": "acme/"})
    assert r.status_code == 200 and DeskGrant.objects.count() == 1
    # An officer cannot widen their own desk.
    assert client_for(dpo).get(url).status_code == 403
