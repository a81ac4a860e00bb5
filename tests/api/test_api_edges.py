"""Small edges of the API an attacker found: each a 4xx, never a 500 (issue #26, Low)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

NS = "acme/web"
RECORD = {
    "namespace": NS,
    "scope": "project",
    "type": "note",
    "key_normalized": "stamp_probe",
    "title": "stamp probe",
    "content": "a probe of created_at",
}
RECORD_PATHS = ["/api/memories/records/", "/api/review-items/records/"]


@pytest.mark.parametrize("path", RECORD_PATHS)
@pytest.mark.parametrize(
    "stamp",
    [
        "0001-01-01T00:00:00",
        "0001-01-01T00:00:00+01:00",
        "0001-01-01",
        "9999-12-31T23:59:59",
        "9999-12-31T23:59:59-01:00",
    ],
)
def test_a_created_at_out_of_range_is_a_400(acme, path, stamp):
    acme.raise_request_exception = False
    r = acme.post(path, {**RECORD, "created_at": stamp}, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()) == ["created_at"]
    assert "between the years 2 and 9998" in r.json()["created_at"][0]


@pytest.mark.parametrize("path", RECORD_PATHS)
def test_a_created_at_in_range_passes_and_blank_means_now(acme, path):
    r = acme.post(path, {**RECORD, "created_at": "0002-01-02T00:00:00"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["created_at"].startswith("0002-01-02")
    r = acme.post(path, {**RECORD, "key_normalized": "other", "created_at": ""}, format="json")
    assert r.status_code == 200, r.content
    assert not r.json()["created_at"].startswith("0002")


@pytest.mark.parametrize("path", RECORD_PATHS)
@pytest.mark.parametrize("stamp", ["2024-13-01", "10000-01-01T00:00:00", "soon", "2024-02-30"])
def test_an_unreadable_created_at_is_a_400_not_now(acme, path, stamp):
    from memoryapp.models import Memory, ReviewItem

    r = acme.post(path, {**RECORD, "created_at": stamp}, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()) == ["created_at"]
    assert "Not a readable ISO 8601 timestamp" in r.json()["created_at"][0]
    assert stamp not in r.content.decode()  # the value is not echoed
    assert not Memory.objects.exists() and not ReviewItem.objects.exists()


@pytest.mark.parametrize("path", RECORD_PATHS)
@pytest.mark.parametrize("offset", ["+23:59", "-20:00", "+16:00"])
def test_a_created_at_with_an_offset_postgresql_cannot_store_is_kept_as_its_instant(
    acme, path, offset
):
    """Python reads offsets up to 24 h, PostgreSQL stores only up to 15:59 (found by the
    fuzzer on PostgreSQL as a 500): the stamp is stored as the same instant in UTC."""
    import datetime as dt

    stamp = f"2024-06-01T12:00:00{offset}"
    r = acme.post(path, {**RECORD, "created_at": stamp}, format="json")
    assert r.status_code == 200, r.content
    stored = dt.datetime.fromisoformat(r.json()["created_at"]).replace(tzinfo=dt.UTC)
    assert stored == dt.datetime.fromisoformat(stamp)
