"""Admin login throttling (django-axes): per account and per address, visible to staff."""

from __future__ import annotations

import datetime as dt

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client, override_settings

from memoryapp.api.testing import token_client
from project.login import client_address
from tests._admin_support import PASSWORD, client_for, make_staff

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"
ATTEMPTS = "/admin/axes/accessattempt/"
LIMIT = settings.AXES_FAILURE_LIMIT


def _login(username: str, password: str, address: str = "10.0.0.1", **meta) -> tuple[int, bool]:
    """POST the admin's login form; the status and whether the session is logged in."""
    client = Client(REMOTE_ADDR=address, **meta)
    r = client.post(LOGIN, {"username": username, "password": password})
    return r.status_code, "_auth_user_id" in client.session


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    # Each login hashes a password: a fast hasher keeps the file quick.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ops():
    return make_staff("ops", password=PASSWORD)


def test_the_limit_is_small():
    assert 1 <= LIMIT <= 10


def test_wrong_passwords_lock_the_account_even_for_the_right_one(ops):
    assert _login("ops", PASSWORD) == (302, True)
    for i in range(10):
        status, logged_in = _login("ops", f"wrong-{i}")
        assert not logged_in and status in (200, 429)
    assert _login("ops", PASSWORD) == (429, False)
    # Per account: a fresh address does not help.
    assert _login("ops", PASSWORD, address="10.9.9.9") == (429, False)


def test_wrong_passwords_from_one_address_lock_that_address(ops):
    make_staff("other", password=PASSWORD)
    for i in range(10):  # a different (unknown) account each time: no account reaches the limit
        assert _login(f"guess-{i}", "wrong", address="10.0.0.66")[1] is False
    assert _login("other", PASSWORD, address="10.0.0.66") == (429, False)
    # The accounts themselves are not locked: from elsewhere they log in.
    assert _login("other", PASSWORD, address="10.0.0.2") == (302, True)


def test_the_api_token_is_not_locked_out_with_the_address(ops):
    api = token_client("acme-app", ["acme/"])
    for i in range(LIMIT + 1):
        _login("ops", f"wrong-{i}", address="10.0.0.66")
    assert _login("ops", PASSWORD, address="10.0.0.66")[0] == 429
    api.defaults["REMOTE_ADDR"] = "10.0.0.66"
    assert api.get("/api/memories/").status_code == 200


def test_staff_see_the_lock_and_clear_it(ops):
    for i in range(LIMIT + 1):
        _login("ops", f"wrong-{i}")
    assert _login("ops", PASSWORD)[0] == 429
    admin = client_for(make_staff("root", superuser=True))
    page = admin.get(f"{ATTEMPTS}?locked_out=yes").content.decode()
    assert "ops" in page and "10.0.0.1" in page
    for attempt in AccessAttempt.objects.filter(username="ops"):
        r = admin.post(f"{ATTEMPTS}{attempt.pk}/delete/", {"post": "yes"})
        assert r.status_code == 302
    assert _login("ops", PASSWORD) == (302, True)


def test_the_lock_ends_after_the_cool_off(ops):
    for i in range(LIMIT + 1):
        _login("ops", f"wrong-{i}")
    assert _login("ops", PASSWORD)[0] == 429
    # The clock moves on: the failures are now older than the cool-off.
    past = dt.datetime.now(dt.UTC) - settings.AXES_COOLOFF_TIME - dt.timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=past)
    assert _login("ops", PASSWORD) == (302, True)


def test_a_short_cool_off_setting_is_honoured(ops):
    with override_settings(AXES_COOLOFF_TIME=dt.timedelta(seconds=30)):
        for i in range(LIMIT + 1):
            _login("ops", f"wrong-{i}")
        assert _login("ops", PASSWORD)[0] == 429
        AccessAttempt.objects.update(
            attempt_time=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=31)
        )
        assert _login("ops", PASSWORD) == (302, True)


@override_settings(BEHIND_PROXY=True)
def test_behind_a_proxy_a_forged_forwarded_for_does_not_dodge_the_address_lock(ops):
    make_staff("other", password=PASSWORD)
    proxy = {"address": "10.0.0.254"}
    for i in range(10):  # the attacker sends a new X-Forwarded-For each time; the proxy appends
        forged = f"198.51.100.{i}, 203.0.113.7"
        assert _login(f"guess-{i}", "wrong", HTTP_X_FORWARDED_FOR=forged, **proxy)[1] is False
    forged = "198.51.100.200, 203.0.113.7"
    assert _login("other", PASSWORD, HTTP_X_FORWARDED_FOR=forged, **proxy) == (429, False)
    other = "203.0.113.8"
    assert _login("other", PASSWORD, HTTP_X_FORWARDED_FOR=other, **proxy) == (302, True)


def test_client_address_trusts_forwarded_for_only_behind_a_proxy(rf):
    request = rf.get("/", REMOTE_ADDR="10.0.0.254", HTTP_X_FORWARDED_FOR="1.1.1.1, 2.2.2.2")
    assert client_address(request) == "10.0.0.254"
    with override_settings(BEHIND_PROXY=True):
        assert client_address(request) == "2.2.2.2"
        assert client_address(rf.get("/", REMOTE_ADDR="10.0.0.254")) == "10.0.0.254"


def test_the_test_client_login_still_works_without_a_request(ops):
    assert Client().login(username="ops", password=PASSWORD)
    assert not Client().login(username="ops", password="wrong")


def test_axes_log_lines_hold_no_user_name_or_address(caplog):
    make_staff("zelda-admin", password=PASSWORD)
    with caplog.at_level("DEBUG"):
        for i in range(LIMIT + 1):
            _login("zelda-admin", f"wrong-{i}", address="10.77.77.77", HTTP_USER_AGENT="UA-zz9")
        assert _login("zelda-admin", PASSWORD, address="10.77.77.77")[0] == 429
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "AXES" in text  # the lockout was logged …
    for value in ("zelda-admin", "10.77.77.77", "UA-zz9", "wrong-"):
        assert value not in text  # … without the values
