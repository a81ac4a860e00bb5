"""The admin's API client page: grants, rights, tokens by prefix, revoke, a new token shown once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from memoryapp.api.models import ApiToken, NamespaceGrant, digest_of
from memoryapp.api.testing import token_client
from tests._admin_support import act, client_for, make_staff

pytestmark = pytest.mark.django_db

CLIENTS = "/admin/memoryapp_api/apiclient/"
KEY = re.compile(r"\b[0-9a-f]{40}\b")


def _page(pk) -> str:
    return f"{CLIENTS}{pk}/change/"


def _api(token: str) -> int:
    return APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/memories/").status_code


def _form_data(response) -> dict:
    """The change form's current values, as the browser would post them back."""
    data: dict = {}
    form = response.context["adminform"].form
    formsets = [inline.formset for inline in response.context["inline_admin_formsets"]]
    for f in [form, *(f for fs in formsets for f in fs.forms)]:
        for name in f.fields:
            value = f[name].value()
            if value is None or value is False:
                continue
            data[f.add_prefix(name)] = "on" if value is True else value
    for fs in formsets:
        for name, value in fs.management_form.initial.items():
            data[f"{fs.prefix}-{name}"] = value
    return data


@pytest.fixture
def admin_client():
    return client_for(make_staff("root", superuser=True))


def test_a_client_page_shows_its_grants_rights_and_tokens_by_prefix_only(admin_client):
    app = token_client("acme-app", ["acme/", "globex/web"], write=True)
    NamespaceGrant.objects.filter(user=app.user, namespace="globex/web").update(can_erase=True)
    assert _api(app.token) == 200  # records the last use
    r = admin_client.get(_page(app.user.pk))
    assert r.status_code == 200
    page = r.content.decode()
    assert app.token not in page and not KEY.search(page)
    assert app.token[:8] in page and "acme/" in page and "globex/web" in page
    token = ApiToken.objects.get(user=app.user)
    (tokens,) = [i for i in r.context["inline_admin_formsets"] if i.formset.model is ApiToken]
    assert [f.instance for f in tokens.formset.forms] == [token]
    assert token.last_used_at is not None
    listing = admin_client.get(CLIENTS).content.decode()
    assert "acme-app" in listing and "globex/web (read, write, erase)" in listing


def test_staff_accounts_are_not_api_clients(admin_client):
    staff = make_staff("ops")
    assert "ops" not in admin_client.get(CLIENTS).content.decode()
    assert admin_client.post(f"{CLIENTS}{staff.pk}/new-token/").status_code == 404
    assert not ApiToken.objects.exists()


def test_a_new_token_is_shown_once_and_only_its_hash_is_stored(admin_client, raw_sql):
    app = token_client("acme-app", ["acme/"])
    r = admin_client.post(f"{CLIENTS}{app.user.pk}/new-token/")
    assert r.status_code == 200
    assert "no-store" in r["Cache-Control"] or "no-cache" in r["Cache-Control"]
    keys = set(KEY.findall(r.content.decode()))
    assert len(keys) == 1
    (key,) = keys
    assert key != app.token
    assert ApiToken.objects.filter(user=app.user).count() == 2
    rows = raw_sql(f"SELECT * FROM {ApiToken._meta.db_table}")
    assert not any(key in str(cell) for row in rows for cell in row)
    assert any(digest_of(key) in row for row in rows)
    assert _api(key) == 200 and _api(app.token) == 200
    again = admin_client.get(_page(app.user.pk)).content.decode()
    assert key not in again and key[:8] in again
    assert admin_client.get(f"{CLIENTS}{app.user.pk}/new-token/").status_code == 405


def test_revoking_a_token_on_the_page_refuses_its_next_request(admin_client):
    app = token_client("acme-app", ["acme/"])
    other = token_client("acme-app", ["acme/"])
    r = admin_client.get(_page(app.user.pk))
    data = _form_data(r)
    (tokens,) = [
        i.formset for i in r.context["inline_admin_formsets"] if i.formset.model is ApiToken
    ]
    revoked = digest_of(app.token)
    for form in tokens.forms:
        if form.instance.digest == revoked:
            data[form.add_prefix("DELETE")] = "on"
    r = admin_client.post(_page(app.user.pk), data)
    assert r.status_code == 302, r.context["errors"] if r.context else r
    assert _api(app.token) == 401
    assert _api(other.token) == 200


def test_the_revoke_action_refuses_every_token_of_the_clients(admin_client):
    app = token_client("acme-app", ["acme/"])
    second = token_client("acme-app", ["acme/"])
    bystander = token_client("globex-app", ["globex/"])
    r = act(admin_client, CLIENTS, "revoke_tokens", [app.user.pk])
    assert r.status_code == 302
    assert _api(app.token) == 401 and _api(second.token) == 401
    assert _api(bystander.token) == 200


def test_staff_who_may_only_view_clients_cannot_issue_or_revoke():
    app = token_client("acme-app", ["acme/"])
    viewer = make_staff("auditor")
    viewer.user_permissions.set(Permission.objects.filter(codename="view_apiclient"))
    client = client_for(viewer)
    page = client.get(_page(app.user.pk))
    assert page.status_code == 200 and "Issue a new token" not in page.content.decode()
    assert client.post(f"{CLIENTS}{app.user.pk}/new-token/").status_code == 403
    assert ApiToken.objects.filter(user=app.user).count() == 1
    act(client, CLIENTS, "revoke_tokens", [app.user.pk])
    assert _api(app.token) == 200


def test_a_client_added_in_the_admin_is_non_staff_and_has_no_password(admin_client):
    data = _form_data(admin_client.get(f"{CLIENTS}add/"))
    data.update({"username": "new-app", "namespace_grants-TOTAL_FORMS": "1"})
    data.update({"namespace_grants-0-namespace": "newco/", "namespace_grants-0-can_read": "on"})
    r = admin_client.post(f"{CLIENTS}add/", data)
    assert r.status_code == 302
    user = get_user_model().objects.get(username="new-app")
    assert not user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert [g.namespace for g in NamespaceGrant.objects.filter(user=user)] == ["newco/"]
    r = admin_client.post(f"{CLIENTS}{user.pk}/new-token/")
    (key,) = set(KEY.findall(r.content.decode()))
    assert ApiToken.objects.get(user=user).digest == digest_of(key)
    assert _api(key) == 200
