"""Request logs hold no value: query strings, referers and exception messages stay out.

gunicorn's access log (``project/gunicorn_logging.py``), runserver's request
lines (``django.server``) and the server-error log (``django.request``) keep a
query parameter's name and drop its value; a 500 is logged with its traceback
(classes and frames) and without its message (docs/compliance.md §10).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.test import Client

from memoryapp.api.grants import provision_client
from memoryapp.ops.logs import (
    WithoutValues,
    format_exception_without_values,
    redact_queries,
    redact_query_string,
    redact_uri,
)
from tests._processes import database_url

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"
MARKERS = ("erinmarker", "qmarker", "referermarker", "bareparammarker", "tokenmarker")


def _query() -> str:
    return (
        urllib.parse.urlencode(
            {"subject": "acme/erinmarker", "q": "qmarker said hello", "namespace": "acme/web"}
        )
        + "&acme%2Fbareparammarker"
    )


# ---------------------------------------------------------------- the pure rules
def test_query_values_are_redacted_names_kept():
    assert redact_query_string("subject=acme%2Ferin&q=x+y&page=2") == "subject=…&q=…&page=…"
    assert redact_query_string("acme/erin&q=") == "…&q=…"
    assert redact_query_string("erin%40acme.example=1") == "…=…"
    assert redact_uri("/api/memories/?q=secret#frag") == "/api/memories/?q=…#…"
    assert redact_uri("/api/memories/") == "/api/memories/"
    line = '"GET /api/memories/?subject=acme%2Ferin HTTP/1.1" 200 5'
    assert redact_queries(line) == '"GET /api/memories/?subject=… HTTP/1.1" 200 5'


def test_an_exception_is_written_as_classes_and_frames():
    inner, outer = "inner" + "marker", "outer" + "marker"  # source lines show no value

    def fail():
        secret = "local" + "marker"  # noqa: F841 (a local a traceback with locals would show)
        try:
            raise KeyError(inner)
        except KeyError as exc:
            raise ValueError(outer) from exc

    try:
        fail()
    except ValueError as exc:
        text = format_exception_without_values(exc)
    assert "builtins.KeyError" in text and "builtins.ValueError" in text
    assert "direct cause" in text and "in fail" in text
    assert not any(m in text for m in ("innermarker", "outermarker", "localmarker"))


# ---------------------------------------------------------------- gunicorn's logger
def _access_line(log_format: str, monkeypatch) -> str:
    from gunicorn.config import Config

    from project.gunicorn_logging import AccessLogger

    monkeypatch.setenv("LOG_FORMAT", log_format)
    cfg = Config()
    cfg.set("accesslog", "-")
    cfg.set(
        "access_log_format", cfg.settings["access_log_format"].default + " %({referer}i)s %(q)s"
    )
    logger = AccessLogger(cfg)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))  # gunicorn's own access format
    logger.access_log.handlers = [handler]
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/api/memories/?" + _query(),
        "PATH_INFO": "/api/memories/",
        "QUERY_STRING": _query(),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": "http://h/admin/memoryapp/memory/?q=referermarker",
        "HTTP_AUTHORIZATION": "Token tokenmarker",
        "HTTP_USER_AGENT": "test-agent",
    }
    headers = [("AUTHORIZATION", "Token tokenmarker"), ("REFERER", environ["HTTP_REFERER"])]
    request = SimpleNamespace(headers=headers)
    response = SimpleNamespace(status="200 OK", sent=12, headers=[])
    logger.access(response, request, environ, dt.timedelta(milliseconds=3))
    return out.getvalue()


def test_gunicorn_access_line_holds_no_value(monkeypatch):
    line = _access_line("text", monkeypatch)
    assert "GET /api/memories/?subject=…&q=…&namespace=…&… HTTP/1.1" in line
    assert not any(m in line for m in MARKERS), line


def test_gunicorn_access_line_is_json_without_values(monkeypatch):
    line = _access_line("json", monkeypatch)
    data = json.loads(line)
    assert data["path"] == "/api/memories/?subject=…&q=…&namespace=…&…"
    assert data["status"] == "200" and data["method"] == "GET"
    assert data["referer"] == "http://h/admin/memoryapp/memory/?q=…"
    assert not any(m in line for m in MARKERS), line


def test_gunicorn_error_log_holds_no_query_value_nor_exception_message():
    from gunicorn.config import Config

    from project.gunicorn_logging import AccessLogger

    logger = AccessLogger(Config())
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.error_log.handlers = [handler]
    message = "acme/erinmarker"
    try:
        raise ValueError(message)
    except ValueError:
        logger.exception("Error handling request %s", "/api/memories/?" + _query())
    text = out.getvalue()
    assert "Error handling request /api/memories/?subject=…&q=…" in text
    assert "builtins.ValueError (message withheld)" in text
    assert not any(m in text for m in MARKERS), text


def _serve(tmp_path, log_format: str):
    from django.conf import settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "false",
        "SECRET_KEY": settings.SECRET_KEY,
        "LOG_FORMAT": log_format,
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = tmp_path / f"gunicorn-{log_format}.out"
    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "project.wsgi:application",
            "--config",
            "project/gunicorn.conf.py",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=REPO,
        env=env,
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return proc, url, out
        except urllib.error.HTTPError:
            return proc, url, out
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError(out.read_text())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_gunicorn_server_logs_no_query_value(tmp_path, log_format):
    """`make serve`'s gunicorn configuration, a real server: no marker reaches its output."""
    token = provision_client("logs-app", ["acme/"]).token
    proc, url, out = _serve(tmp_path, log_format)
    try:
        for path in ("/api/memories/", "/api/session-summaries/", "/api/nosuchpath/"):
            request = urllib.request.Request(
                f"{url}{path}?{_query()}",
                headers={
                    "Authorization": f"Token {token}",
                    "Referer": f"{url}/admin/?q=referermarker",
                },
            )
            with contextlib.suppress(urllib.error.HTTPError):
                urllib.request.urlopen(request, timeout=10).read()
        time.sleep(0.3)  # the access line follows the response
    finally:
        proc.terminate()
        proc.wait(20)
    text = out.read_text()
    lines = [line for line in text.splitlines() if "/api/memories/" in line]
    assert lines, text
    assert not any(m in text for m in MARKERS), text
    assert token not in text
    if log_format == "json":
        data = json.loads(lines[0])
        assert data["path"].startswith("/api/memories/?subject=…&q=…")
    else:
        assert "/api/memories/?subject=…&q=…&namespace=…&…" in lines[0]


# ---------------------------------------------------------------- Django's loggers
@pytest.fixture
def console():
    """What the project's console handler writes for django.request and django.server."""
    out = io.StringIO()
    handlers = {
        h for name in ("django.request", "django.server") for h in logging.getLogger(name).handlers
    }
    assert handlers, "django.request/django.server have no handler in LOGGING"
    streams = [(h, h.stream) for h in handlers if isinstance(h, logging.StreamHandler)]
    for h, _ in streams:
        h.stream = out  # not setStream: it flushes the old stream, which pytest may have closed
    yield out
    for h, old in streams:
        h.stream = old


def test_runserver_request_lines_hold_no_query_value(console):
    logging.getLogger("django.server").info(
        '"%s" %s %s', f"GET /api/memories/?{_query()} HTTP/1.1", "200", "12"
    )
    text = console.getvalue()
    assert '"GET /api/memories/?subject=…&q=…&namespace=…&… HTTP/1.1" 200 12' in text
    assert not any(m in text for m in MARKERS)


class Boom(RuntimeError):
    pass


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["api", "admin"])
def test_a_server_error_is_logged_with_its_traceback_and_no_value(where, console, monkeypatch):
    """A 500 leaves the exception's class and frames in the log, not its message."""
    from django.contrib.auth import get_user_model

    message = "acme/erinmarker: " + MARKERS[1]  # a variable: the source line shows no value

    def explode(*args, **kwargs):
        raise Boom(message)

    client = Client(raise_request_exception=False)
    if where == "api":
        from memoryapp.api.views.memories import MemoryViewSet

        monkeypatch.setattr(MemoryViewSet, "list", explode)
        client.defaults["HTTP_AUTHORIZATION"] = "Token " + provision_client("boom", ["acme/"]).token
        # Known parameters only: an unknown one is a 400 before the view runs.
        response = client.get("/api/memories/", {"subject": "acme/erinmarker", "q": MARKERS[1]})
    else:
        from memoryapp.admin.memories import MemoryAdmin

        monkeypatch.setattr(MemoryAdmin, "get_queryset", explode)
        user = get_user_model().objects.create_superuser("boss", "b@example.com", "pw-12345678")
        client.force_login(user)
        response = client.get(f"/admin/memoryapp/memory/?{_query()}")
    assert response.status_code == 500
    text = console.getvalue()
    assert "Internal Server Error" in text and "Traceback (most recent call last)" in text
    assert f"{__name__}.Boom (message withheld)" in text and "in explode" in text
    assert not any(m in text for m in MARKERS), text


def test_the_filter_sits_on_the_request_loggers():
    for name in ("django.request", "django.server"):
        assert any(isinstance(f, WithoutValues) for f in logging.getLogger(name).filters)
