"""``manage.py memory client NAME --grant PREFIX … [--write] [--erase]``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from memoryapp.api.models import ApiToken, NamespaceGrant, digest_of

pytestmark = pytest.mark.django_db


def run(*args) -> list[str]:
    out = StringIO()
    call_command("memory", "client", *args, stdout=out)
    return out.getvalue().splitlines()


def rights(name: str) -> dict[str, tuple[bool, bool, bool]]:
    grants = NamespaceGrant.objects.filter(user__username=name)
    return {g.namespace: (g.can_read, g.can_write, g.can_erase) for g in grants}


def test_creates_a_non_staff_client_and_prints_its_token_last():
    lines = run("crm-backend", "--grant", "acme/", "--grant", "initech/web", "--write")
    token = lines[-1]
    assert len(token) == 40 and " " not in token
    user = get_user_model().objects.get(username="crm-backend")
    assert not user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert rights("crm-backend") == {
        "acme/": (True, True, False),
        "initech/web": (True, True, False),
    }
    client = APIClient(HTTP_AUTHORIZATION=f"Token {token}")
    body = {"project": "acme/web", "key": "k", "value": "v"}
    assert client.post("/api/memories/", body, format="json").status_code == 201
    assert (
        client.post("/api/erasures/", {"namespace": "acme/web"}, format="json").status_code == 403
    )


def test_the_token_is_printed_once_and_only_its_hash_is_stored(raw_sql):
    token = run("crm-backend", "--grant", "acme/")[-1]
    rows = raw_sql(f"SELECT * FROM {ApiToken._meta.db_table}")
    assert len(rows) == 1 and not any(token in str(cell) for cell in rows[0])
    assert digest_of(token) in rows[0] and token[:8] in rows[0]
    again = run("crm-backend", "--grant", "acme/")
    assert not any(token in line for line in again)
    assert again[-1].startswith(f"Token unchanged ({token[:8]}…)")


def test_rerunning_updates_the_grants_and_keeps_the_token():
    token = run("gdpr-bot", "--grant", "acme/", "--write")[-1]
    lines = run("gdpr-bot", "--grant", "globex/", "--erase")
    assert "Token unchanged" in lines[-1]
    assert APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/memories/").status_code == 200
    assert lines[0].startswith("Updated")
    assert any("removed grant acme/" in line for line in lines)
    assert rights("gdpr-bot") == {"globex/": (True, False, True)}
    rotated = run("gdpr-bot", "--grant", "globex/", "--rotate")[-1]
    assert rotated != token and len(rotated) == 40
    assert APIClient(HTTP_AUTHORIZATION=f"Token {rotated}").get("/api/memories/").status_code == 200
    assert APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/memories/").status_code == 401


def test_refuses_staff_accounts_and_missing_grants():
    get_user_model().objects.create_user("ops", password="x", is_staff=True)
    with pytest.raises(CommandError, match="staff"):
        run("ops", "--grant", "acme/")
    with pytest.raises(CommandError):
        run("nobody")
    with pytest.raises(CommandError, match="empty"):
        run("  ", "--grant", "acme/")


# ------------------------------------------------- memory client --user (staff accounts)
def _officer(username: str = "dpo"):
    from tests.factories import make_officer

    return make_officer(username)


def _as(token: str) -> APIClient:
    return APIClient(HTTP_AUTHORIZATION=f"Token {token}")


def test_a_staff_account_gets_a_token_its_permissions_decide():
    from tests._admin_support import make_staff

    _officer()
    lines = run("--user", "dpo")
    token = lines[-1]
    assert len(token) == 40 and "staff account 'dpo'" in lines[-2]
    assert not NamespaceGrant.objects.filter(user__username="dpo").exists()
    officer = _as(token)
    made = officer.post(
        "/api/subject-requests/", {"subject": "acme/alice", "right": "access"}, format="json"
    )
    assert made.status_code == 201, made.content
    assert officer.get("/api/subject-requests/").json()["count"] == 1
    # The compliance role may not write memories, whatever its token.
    body = {"namespace": "acme/web", "key": "k", "value": "v"}
    assert officer.post("/api/memories/", body, format="json").status_code in (403, 404)
    # Another staff account without the desk's permissions is refused the desk.
    make_staff("operator", perms=["view_memory"])
    operator = _as(run("--user", "operator")[-1])
    assert operator.get("/api/subject-requests/").status_code == 403


def test_a_staff_token_is_kept_rotated_or_revoked():
    _officer()
    token = run("--user", "dpo")[-1]
    again = run("--user", "dpo")
    assert again[-1].startswith(f"Token unchanged ({token[:8]}…)")
    assert not any(token in line for line in again)
    rotated = run("--user", "dpo", "--rotate")
    assert "Revoked 1 token(s)" in rotated[0] and rotated[-1] != token
    assert _as(token).get("/api/subject-requests/").status_code == 401
    assert _as(rotated[-1]).get("/api/subject-requests/").status_code == 200
    revoked = run("--user", "dpo", "--revoke")
    assert revoked == ["Revoked 1 token(s) of staff account 'dpo'."]
    assert _as(rotated[-1]).get("/api/subject-requests/").status_code == 401
    assert not ApiToken.objects.filter(user__username="dpo").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--user", "nobody"), "No user 'nobody'"),
        (("--user", "bot"), "not a staff account"),
        (("--user", "gone"), "inactive"),
        (("--user", "dpo", "--grant", "acme/"), "--user takes no NAME, --grant"),
        (("--user", "dpo", "--write"), "--user takes no NAME, --grant"),
        (("dpo",), "give NAME --grant NAMESPACE"),
        (("bot", "--grant", "acme/", "--revoke"), "--revoke goes with --user"),
    ],
)
def test_staff_tokens_are_refused_when_asked_wrongly(args, said):
    _officer()
    run("bot", "--grant", "acme/")
    user = _officer("gone")
    user.is_active = False
    user.save()
    before = ApiToken.objects.count()
    with pytest.raises(CommandError, match=said):
        run(*args)
    assert ApiToken.objects.count() == before
