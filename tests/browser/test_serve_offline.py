"""What ``make serve`` serves: gunicorn with DEBUG off, static files from WhiteNoise,
Swagger UI from the app itself — checked in chromium with every non-local request refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from .._processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """The project as ``scripts/serve.sh`` runs it (collectstatic, gunicorn, DEBUG off)."""
    from django.conf import settings

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DEBUG": "false",
        "STATIC_HASHED": "true",
        "SECRET_KEY": settings.SECRET_KEY,
        "STATIC_ROOT": str(tmp_path / "static"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom"),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    (tmp_path / "prom").mkdir()
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )
    port = _free_port()
    log = (tmp_path / "gunicorn.log").open("w")
    proc = subprocess.Popen(
        [
            str(GUNICORN),
            "project.wsgi:application",
            "--config",
            "project/gunicorn.conf.py",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        raise AssertionError((tmp_path / "gunicorn.log").read_text())
    yield url
    proc.terminate()
    proc.wait(20)
    log.close()


def _offline_page(browser, base_url):
    """A tab where every request to another host fails; returns it and the list of those."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    outside: list[str] = []
    statuses: dict[str, int] = {}

    def route(r):
        if urlparse(r.request.url).hostname in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    tab.route("**/*", route)
    tab.on("response", lambda resp: statuses.__setitem__(resp.url, resp.status))
    return context, tab, outside, statuses


def test_api_docs_and_admin_render_with_debug_off_and_no_network(browser, served):
    context, tab, outside, statuses = _offline_page(browser, served)
    try:
        tab.goto("/api/docs/")
        tab.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        assert "memoryapp API" in tab.inner_text(".swagger-ui .info .title")
        assert tab.locator(".opblock").count() > 10  # the operations rendered from the schema

        tab.goto("/admin/login/")
        tab.wait_for_selector("#id_username")
        sheets = {u: s for u, s in statuses.items() if u.endswith(".css")}
        assert any("/static/admin/css/base." in u for u in sheets), sheets
        assert all(s == 200 for s in sheets.values()), sheets
        # Styled: the admin's stylesheet gives the header its colour.
        background = tab.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")
        assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
        assert outside == [], f"pages asked for outside resources: {outside}"
    finally:
        context.close()


def test_api_redoc_and_root_render_with_debug_off_and_no_network(browser, served):
    context, tab, outside, statuses = _offline_page(browser, served)
    try:
        tab.goto("/api/redoc/")
        # ReDoc rendered the schema's operations: its script came from this server.
        tab.wait_for_selector("[data-section-id^='tag/']", timeout=60_000)
        assert "memoryapp API" in tab.inner_text("h1")
        scripts = {u: s for u, s in statuses.items() if u.endswith(".js")}
        assert any("/static/drf_spectacular_sidecar/redoc/" in u for u in scripts), scripts
        assert all(s == 200 for s in scripts.values()), scripts
        assert outside == [], f"ReDoc asked for outside resources: {outside}"
        # ReDoc draws its "by Redocly" logo from cdn.redoc.ly; the page's Content-Security-
        # Policy stops that request before it leaves the browser, so none is seen above.

        root = tab.goto("/api/")
        assert root is not None and root.status == 200
        links = root.json()
        assert links["redoc"].endswith("/api/redoc/") and links["docs"].endswith("/api/docs/")
        assert links["resources"]["memories"].endswith("/api/memories/")
    finally:
        context.close()
