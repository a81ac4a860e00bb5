"""Helpers for tests that start other processes on the test database."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection


def database_url() -> str:
    """The test database as a DATABASE_URL a child process can open."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = quote(s["USER"] or "", safe="")
    if s["PASSWORD"]:
        auth += ":" + quote(s["PASSWORD"], safe="")
    host = s["HOST"] or "localhost"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{quote(s['NAME'], safe='')}"
