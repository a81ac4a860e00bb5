"""``/healthz`` and ``/metrics``: what a load balancer and a Prometheus scraper see."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client

from memoryapp import MemoryManager
from memoryapp.api.testing import token_client
from memoryapp.compliance import erase
from memoryapp.rules.errors import SensitiveMemoryError

pytestmark = pytest.mark.django_db

SECRET_TEXT = "the launch plan is codenamed bluefinch"
TOKEN = "scrape-token-for-tests"


def test_healthz_is_ok_without_authentication_and_shows_no_data():
    MemoryManager(project="ops/a").save_memory("plan", SECRET_TEXT)
    r = Client().get("/healthz")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["status"] == "ok"
    assert body["checks"]["database:default"] == "ok"
    assert body["checks"]["migrations:default"] == "ok"
    assert body["checks"]["store:default"] == "ok"
    assert "bluefinch" not in r.content.decode() and "ops/a" not in r.content.decode()
    assert r["Cache-Control"].startswith("max-age=0")


def test_healthz_says_503_and_why_when_a_table_is_unreadable():
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("ALTER TABLE memory_review_queue RENAME TO memory_review_queue_gone")
    r = Client().get("/healthz")
    assert r.status_code == 503
    body = r.json()
    assert body["status"] == "fail"
    assert "memory_review_queue unreadable" in body["checks"]["store:default"]


def test_healthz_says_503_when_migrations_are_missing(monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("x", False)])
    r = Client().get("/healthz")
    assert r.status_code == 503
    assert "1 migration(s) not applied" in r.json()["checks"]["migrations:default"]


def test_metrics_are_off_without_a_token_and_refuse_a_wrong_one(settings):
    settings.MEMORYAPP_METRICS_TOKEN = None
    assert Client().get("/metrics").status_code == 404
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 401
    r = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-it")
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Bearer")


def _scrape() -> str:
    r = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200, r.content
    assert r["Content-Type"].startswith("text/plain")
    return r.content.decode()


def _value(text: str, name: str, **labels) -> float:
    """The sample ``name{labels}`` in an exposition (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return 0.0


@pytest.mark.django_db(transaction=True)
def test_metrics_count_recalls_refusals_erasures_and_api_responses(settings):
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    before = _scrape()
    mm = MemoryManager(project="ops/b")
    mm.save_memory("plan", SECRET_TEXT)
    mm.recall("launch plan")
    with pytest.raises(SensitiveMemoryError):
        mm.upsert("aws", "AKIAIOSFODNN7EXAMPLE wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    erase(namespace="ops/b")
    client = token_client("ops-app", ["ops/"], write=True)
    assert client.get("/api/memories/", {"namespace": "ops/b"}).status_code == 200
    after = _scrape()

    def grew(name, **labels):
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert grew("memoryapp_recall_seconds_count", outcome="ok") >= 1
    assert grew("memoryapp_recall_index_events_total", event="build") >= 1
    refusals = [ln for ln in after.splitlines() if ln.startswith("memoryapp_guard_refusals_total")]
    assert refusals and sum(float(ln.rsplit(" ", 1)[1]) for ln in refusals) >= 1
    assert grew("memoryapp_erasure_purge_seconds_count", outcome="purged") >= 1
    assert _value(after, "memoryapp_erasure_receipts", state="complete", verified="yes") >= 1
    assert grew("memoryapp_api_responses_total", method="GET", status="200") >= 1
    assert "bluefinch" not in after and "ops/b" not in after  # counts only


class _Unreachable:
    """``connections`` for the health checks: every database refuses the connection."""

    MESSAGE = (
        'connection to server at "10.9.8.7", port 6543 failed: '
        'FATAL:  password authentication failed for user "memapp_owner"'
    )

    def __getitem__(self, alias):
        from django.db import OperationalError

        class Conn:
            def cursor(self):
                raise OperationalError(_Unreachable.MESSAGE)

        return Conn()


@pytest.fixture
def unreachable(monkeypatch):
    from memoryapp.ops import views as ops

    monkeypatch.setattr(ops, "connections", _Unreachable())


def _leaks(text: str) -> bool:
    return any(s in text for s in ("10.9.8.7", "6543", "memapp_owner", "password"))


def test_healthz_hides_a_database_failures_detail_from_anonymous_callers(unreachable, caplog):
    r = Client().get("/healthz")
    assert r.status_code == 503
    assert r.json()["checks"]["database:default"] == "unreachable"
    assert not _leaks(r.content.decode())
    # The operator finds the detail in the server log.
    assert "10.9.8.7" in caplog.text and "database:default" in caplog.text


def test_healthz_hides_the_detail_from_a_non_staff_session_and_a_wrong_token(
    unreachable, settings, django_user_model
):
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    client = Client()
    client.force_login(django_user_model.objects.create_user("plain", password="pw-12345678"))
    r = client.get("/healthz", HTTP_AUTHORIZATION="Bearer not-it")
    assert r.status_code == 503 and not _leaks(r.content.decode())


def test_healthz_shows_the_detail_to_staff_and_to_the_metrics_token(
    unreachable, settings, django_user_model
):
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    r = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 503 and "10.9.8.7" in r.json()["checks"]["database:default"]
    staff = Client()
    staff.force_login(
        django_user_model.objects.create_user("ops", password="pw-12345678", is_staff=True)
    )
    r = staff.get("/healthz")
    assert r.status_code == 503 and "10.9.8.7" in r.json()["checks"]["database:default"]


@pytest.fixture
def attention_needed(settings):
    """One erasure receipt needing a person (its automatic attempts spent)."""
    from memoryapp.models import ReceiptState

    MemoryManager(project="ops/gone").save_memory("plan", SECRET_TEXT)
    receipt = erase(namespace="ops/gone", purge=False)
    receipt.state = ReceiptState.NEEDS_ATTENTION
    receipt.save(update_fields=["state"])
    settings.MEMORYAPP_METRICS_TOKEN = TOKEN
    return receipt


def test_healthz_says_degraded_without_the_erasure_counts_to_anyone(
    attention_needed, django_user_model
):
    for client, auth in (
        (Client(), {}),
        (Client(), {"HTTP_AUTHORIZATION": "Bearer not-it"}),
    ):
        r = client.get("/healthz", **auth)
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "degraded" and "erasures" not in body, body
        assert "needs_attention" not in r.content.decode()
    plain = Client()
    plain.force_login(django_user_model.objects.create_user("plain", password="pw-12345678"))
    body = plain.get("/healthz").json()
    assert body["status"] == "degraded" and "erasures" not in body


def test_healthz_gives_the_erasure_counts_to_staff_and_the_metrics_token(
    attention_needed, django_user_model
):
    r = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "degraded"
    assert body["erasures"]["needs_attention"] == 1 and body["erasures"]["pending"] == 0
    staff = Client()
    staff.force_login(
        django_user_model.objects.create_user("ops", password="pw-12345678", is_staff=True)
    )
    body = staff.get("/healthz").json()
    assert body["status"] == "degraded" and body["erasures"]["needs_attention"] == 1
    assert "ops/gone" not in str(body) and "bluefinch" not in str(body)
