"""Browser tests of the admin (Playwright + chromium)."""
