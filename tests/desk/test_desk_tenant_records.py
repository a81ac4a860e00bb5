"""Tenant-scoped officers beyond the requests (issue #39): erasure receipts and export
records carry their tenant, and an officer whose desk grants name one tenant sees and
acts within it only — the receipt and export lists and pages, the Erase / Export / Wipe
pages (another tenant's key or namespace refused on the form, not a 500), the look-up,
the namespace suggestions, the front page's banner and tiles, and the API (another
tenant's receipt id or target: 404). Officers without a grant keep every tenant's."""

from __future__ import annotations

import pytest
from django.db import connection

from memoryapp import MemoryManager, compliance
from memoryapp.compliance import desk
from memoryapp.models import ErasureReceipt, ExportRecord, Memory, ReceiptState
from tests._admin_support import ERASE_SUBJECT, EXPORT, RECEIPTS, WIPE, client_for
from tests.factories import make_officer, make_staff_api

pytestmark = pytest.mark.django_db

ACME_KEY, GLOBEX_KEY = "acme/alice", "globex/gina"
ACME_NS, GLOBEX_NS = "acme/web", "globex/support"
REFUSED = b"tenant is not one your desk handles"
EXPORTS = "/admin/memoryapp/exportrecord/"


def wipe_officer(name: str, *grants: str):
    """A compliance officer (with the wipe right too) handling ``grants``' tenants."""
    return make_officer(name, *grants, perms=("wipe_memory",))


@pytest.fixture
def tenants():
    """Two tenants' data, one receipt and one export record each (purges left to later)."""
    MemoryManager(project=ACME_NS, user=ACME_KEY).upsert("editor", "vim", ["preference"])
    MemoryManager(project=GLOBEX_NS, user=GLOBEX_KEY).upsert("editor", "emacs", ["preference"])
    MemoryManager(project=ACME_NS, user=ACME_KEY).upsert("ci", "make test")
    MemoryManager(project=GLOBEX_NS, user=GLOBEX_KEY).upsert("ci", "tox")
    MemoryManager(project=ACME_NS, user="acme/ann").upsert("tabs", "spaces", ["preference"])
    MemoryManager(project=GLOBEX_NS, user="globex/gus").upsert("tabs", "tabs", ["preference"])
    acme = compliance.erase(subject="acme/ann", actor="t", purge=False)
    globex = compliance.erase(subject="globex/gus", actor="t", purge=False)
    compliance.export(subject=ACME_KEY, actor="t")
    compliance.export(subject=GLOBEX_KEY, actor="t")
    return acme, globex


def test_receipts_and_records_carry_their_tenant(tenants):
    acme, globex = tenants
    assert (acme.tenant, globex.tenant) == ("acme/", "globex/")
    assert set(ExportRecord.objects.values_list("tenant", flat=True)) == {"acme/", "globex/"}
    by_ns = compliance.erase(namespace="globex/other", actor="t", purge=False)
    assert by_ns.tenant == "globex/"
    a = Memory.objects.get(namespace=ACME_KEY).pk
    g = Memory.objects.get(namespace=GLOBEX_KEY).pk
    across = compliance.erase(ids=[a, g], actor="t", purge=False)
    assert across.tenant is None  # two tenants' rows: no single tenant, unscoped officers only
    assert compliance.erase(everything=True, actor="t", purge=False).tenant is None
    compliance.export(namespace=GLOBEX_NS, actor="t")
    assert ExportRecord.objects.order_by("-created_at").first().tenant == "globex/"


def test_each_officer_lists_and_opens_only_their_receipts(tenants):
    acme, globex = tenants
    for mine, theirs, grant in ((acme, globex, "acme/"), (globex, acme, "globex/")):
        client = client_for(wipe_officer(f"dpo-{grant[:-1]}", grant))
        page = client.get(RECEIPTS).content.decode()
        assert mine.pk[:8] in page and theirs.pk[:8] not in page
        assert client.get(f"{RECEIPTS}{mine.pk}/change/").status_code == 200
        # The admin's own answer to an object outside the list: back to the index.
        other = client.get(f"{RECEIPTS}{theirs.pk}/change/", follow=True)
        assert theirs.pk[:8] not in other.content.decode().split("messagelist")[0]
        assert b"doesn" in other.content  # "... with ID ... doesn't exist"
        assert client.get(f"{RECEIPTS}{theirs.pk}/print/").status_code == 404
        assert client.get(f"{RECEIPTS}{theirs.pk}/retry/").status_code == 404
        assert client.get(f"{RECEIPTS}{mine.pk}/print/").status_code == 200
    chief = client_for(wipe_officer("chief")).get(RECEIPTS).content.decode()
    assert acme.pk[:8] in chief and globex.pk[:8] in chief


def test_each_officer_lists_only_their_export_records(tenants):
    acme_rec = ExportRecord.objects.get(tenant="acme/")
    globex_rec = ExportRecord.objects.get(tenant="globex/")
    page = client_for(wipe_officer("dpo", "acme/")).get(EXPORTS).content.decode()
    assert acme_rec.pk[:12] in page and globex_rec.pk[:12] not in page
    other = client_for(wipe_officer("gx", "globex/")).get(EXPORTS).content.decode()
    assert globex_rec.pk[:12] in other and acme_rec.pk[:12] not in other
    assert (
        client_for(wipe_officer("dpo2", "acme/"))
        .get(f"{EXPORTS}{globex_rec.pk}/change/")
        .status_code
        == 302
    )


def test_erase_page_refuses_another_tenants_key(tenants):
    client = client_for(wipe_officer("dpo", "acme/"))
    r = client.post(ERASE_SUBJECT, {"subject": GLOBEX_KEY})
    assert r.status_code == 200 and REFUSED in r.content
    r = client.post(ERASE_SUBJECT, {"subject": GLOBEX_KEY, "post": "yes"})
    assert r.status_code == 200 and REFUSED in r.content
    assert Memory.objects.filter(namespace=GLOBEX_KEY).exists()  # nothing erased
    own = client.post(ERASE_SUBJECT, {"subject": ACME_KEY})
    assert own.status_code == 200 and REFUSED not in own.content and b"vim" not in own.content
    assert b'name="post" value="yes"' in own.content  # the confirmation step


def test_export_page_refuses_another_tenants_key_or_namespace(tenants):
    client = client_for(wipe_officer("dpo", "acme/"))
    before = ExportRecord.objects.count()
    for body in (
        {"subject": GLOBEX_KEY},
        {"namespace": GLOBEX_NS},
        {"subject": ACME_KEY, "namespace": GLOBEX_NS},
    ):
        r = client.post(EXPORT, body)
        assert r.status_code == 200 and REFUSED in r.content, body
    assert ExportRecord.objects.count() == before
    ok = client.post(EXPORT, {"subject": ACME_KEY})
    assert ok.status_code == 200 and ok["Content-Type"].startswith("application/json")
    assert ExportRecord.objects.order_by("-created_at").first().tenant == "acme/"
    # The suggestions (the namespace datalist) name the officer's tenants only.
    form = client.get(EXPORT).content.decode()
    assert ACME_NS in form and GLOBEX_NS not in form


def test_wipe_page_refuses_another_tenants_namespace(tenants):
    client = client_for(wipe_officer("dpo", "acme/"))
    for body in ({"project": GLOBEX_NS}, {"project": ACME_NS, "user": GLOBEX_KEY}, {"project": ""}):
        r = client.post(WIPE, body)
        assert r.status_code == 200 and REFUSED in r.content, body
    assert (
        Memory.objects.live().filter(namespace=GLOBEX_NS).count()
        + Memory.objects.live().filter(namespace=GLOBEX_KEY).count()
        >= 1
    )
    ok = client.post(WIPE, {"project": ACME_NS})
    assert ok.status_code == 200 and REFUSED not in ok.content
    form = client.get(WIPE).content.decode()
    assert ACME_NS in form and GLOBEX_NS not in form


def test_lookup_leaves_other_tenants_records_out(tenants):
    _, globex = tenants
    client = client_for(wipe_officer("dpo", "acme/"))
    found = client.post(f"{RECEIPTS}lookup/", {"subject": "globex/gus"}).content.decode()
    assert globex.pk[:12] not in found
    chief = client_for(wipe_officer("chief")).post(f"{RECEIPTS}lookup/", {"subject": "globex/gus"})
    assert globex.pk[:12] in chief.content.decode()
    rec = ExportRecord.objects.get(tenant="globex/")
    assert (
        rec.pk[:12]
        not in client.post(f"{RECEIPTS}lookup/", {"subject": GLOBEX_KEY}).content.decode()
    )


def test_front_page_banner_and_tiles_are_the_officers_tenants(tenants):
    acme, globex = tenants
    ErasureReceipt.objects.filter(pk=globex.pk).update(state=ReceiptState.NEEDS_ATTENTION)
    acme_page = client_for(wipe_officer("dpo", "acme/")).get("/admin/").content.decode()
    globex_page = client_for(wipe_officer("gx", "globex/")).get("/admin/").content.decode()
    assert globex.pk[:8] not in acme_page and "needs attention" not in acme_page.lower()
    assert globex.pk[:8] in globex_page
    assert GLOBEX_NS not in acme_page and ACME_NS in acme_page
    assert ACME_NS not in globex_page
    from memoryapp.admin.overview import _counts

    links = {"can_memories": True, "can_review": True}
    scoped = _counts(links, per_user=True, user=wipe_officer("x", "acme/"))["totals"]
    everyone = _counts(links, per_user=True, user=wipe_officer("y"))["totals"]
    assert (scoped["receipts"], everyone["receipts"]) == (1, 2)
    assert scoped["live"] < everyone["live"]


def wipe_officer_api(name: str, *grants: str):
    """``wipe_officer`` over the API."""
    # The API grants play no part for staff: the client's own name an unrelated tenant.
    return make_staff_api(
        name, ("wipe_memory",), grants=("unrelated/",), compliance=True, tenants=grants
    )


def test_the_api_keeps_each_officer_to_their_tenant(tenants):
    acme, globex = tenants
    client = wipe_officer_api("dpo", "acme/")
    listed = client.get("/api/erasures/").json()
    ids = {r["id"] for r in listed.get("results", listed)}
    assert acme.pk in ids and globex.pk not in ids
    assert client.get(f"/api/erasures/{globex.pk}/").status_code == 404
    assert client.get(f"/api/erasures/{acme.pk}/").status_code == 200
    for body in (
        {"subject": GLOBEX_KEY},
        {"namespace": GLOBEX_NS},
        {"ids": [Memory.objects.get(namespace=GLOBEX_KEY).pk]},
    ):
        r = client.post("/api/erasures/", body, format="json")
        assert r.status_code == 404, (body, r.content)
    assert client.post("/api/erasures/", {"everything": True}, format="json").status_code == 403
    wipe = client.post("/api/wipe-all/", {"namespace": GLOBEX_NS}, format="json")
    assert wipe.status_code == 404, wipe.content
    assert Memory.objects.live().filter(namespace=GLOBEX_NS).exists()
    own = client.post("/api/wipe-all/", {"namespace": ACME_NS}, format="json")
    assert own.status_code == 200, own.content
    assert Memory.objects.filter(namespace=GLOBEX_KEY).exists()
    dry = client.post("/api/erasures/", {"subject": ACME_KEY, "dry_run": True}, format="json")
    assert dry.status_code == 200, dry.content
    assert client.get("/api/exports/", {"subject": GLOBEX_KEY}).status_code == 404
    assert client.get("/api/exports/", {"subject": ACME_KEY}).status_code == 200
    found = client.post("/api/erasures/lookup/", {"subject": "globex/gus"}, format="json").json()
    assert found["receipts"] == [] and found["exports"] == []
    found = client.post("/api/erasures/lookup/", {"subject": GLOBEX_KEY}, format="json").json()
    assert found["exports"] == []
    chief = wipe_officer_api("chief").post(
        "/api/erasures/lookup/", {"subject": "globex/gus"}, format="json"
    )
    assert [r["id"] for r in chief.json()["receipts"]] == [globex.pk]


def test_the_backfill_traces_tenants_from_requests_and_sealed_requests(tenants):
    acme, globex = tenants
    from importlib import import_module

    from django.apps import apps

    made = desk.open_request(subject="globex/gus", right="erasure", actor="intake")
    linked = compliance.erase(subject="acme/zed", actor="t", purge=False)
    made_acme = desk.open_request(subject="acme/zed", right="erasure", actor="intake")
    made_acme.receipts.add(linked)
    untraceable = compliance.erase(everything=True, actor="t", purge=False)
    # As before the migration: no tenant recorded; the acme receipt's sealed part is gone.
    ErasureReceipt.objects.update(tenant=None)
    ErasureReceipt.objects.filter(pk__in=[acme.pk, linked.pk]).update(sealed=None)
    ExportRecord.objects.update(tenant=None)
    assert made.tenant == "globex/"

    class Editor:
        pass

    editor = Editor()
    editor.connection = connection
    import_module("memoryapp.migrations.0018_receipt_tenants").backfill(apps, editor)
    tenant = dict(ErasureReceipt.objects.values_list("pk", "tenant"))
    assert tenant[linked.pk] == "acme/"  # its linked request
    assert tenant[globex.pk] == "globex/"  # a request with the same keyed HMAC
    assert tenant[acme.pk] is None  # neither: unscoped officers only
    assert tenant[untraceable.pk] is None
    # The sealed request of an unfinished receipt names its subject.
    sealed_one = compliance.erase(subject="acme/sue", actor="t", purge=False)
    ErasureReceipt.objects.filter(pk=sealed_one.pk).update(tenant=None)
    import_module("memoryapp.migrations.0018_receipt_tenants").backfill(apps, editor)
    assert ErasureReceipt.objects.get(pk=sealed_one.pk).tenant == "acme/"
