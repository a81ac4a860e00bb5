"""Browser tests: Playwright (sync API) drives Debian's chromium against the live server.

Playwright's sync API runs an event loop in the test thread, so Django's
"async unsafe" guard has to be told that the ORM calls made by the tests
themselves are fine. Screenshots land in ``tests/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "screenshots"
README_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "img"
README_SWITCH = "UPDATE_README_SCREENSHOTS"  # =1 also refreshes the README's images
VIEWPORT = {"width": 1440, "height": 900}


def pytest_collection_modifyitems(config, items):
    """Without chromium the browser tests are skipped — except in CI, where that is an error."""
    if os.path.exists(CHROMIUM) or os.environ.get("CI") == "true":
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing (apt-get install chromium)")
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield instance
        instance.close()


@pytest.fixture(autouse=True)
def _browser_settings(settings, tmp_path):
    # Logging in hashes a password per test: a fast hasher keeps the suite quick.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # PostgreSQL's VACUUM FULL waits for transactions older than the erasure in
    # *any* database of the cluster (other test runs included): give it time.
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 30
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


@pytest.fixture
def page(browser, live_server):
    from playwright.sync_api import expect

    expect.set_options(timeout=10_000)  # a loaded CI machine is slower than a laptop
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    context.set_default_timeout(45_000)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def shot(page, request):
    """``shot("name")`` saves a full-page screenshot as ``tests/screenshots/<test>-<name>.png``.

    ``readme="file"`` with ``element="css"``: with ``UPDATE_README_SCREENSHOTS=1``
    that element is also saved as ``docs/img/<file>.png`` (small, committed).
    """
    SCREENSHOTS.mkdir(exist_ok=True)
    test = re.sub(r"[^\w]+", "_", request.node.name.removeprefix("test_")).strip("_")

    def take(name: str, *, readme: str | None = None, element: str = "#content") -> Path:
        path = SCREENSHOTS / f"{test}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if readme and os.environ.get(README_SWITCH) == "1":
            README_IMAGES.mkdir(parents=True, exist_ok=True)
            page.locator(element).first.screenshot(path=str(README_IMAGES / f"{readme}.png"))
        return path

    return take


@pytest.fixture
def log_in(page):
    """``log_in(username, password)`` through the admin's login form, landing on the index."""

    def submit(username: str, password: str) -> None:
        page.goto("/admin/")
        page.wait_for_url("**/admin/login/**")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")

    return submit
