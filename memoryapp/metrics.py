"""Prometheus metrics: counts and durations only, never a memory's text, key or namespace.

The instruments are module-level ``prometheus_client`` objects, updated by the
code that does the work (recall, the index cache, the guard, the purge, the API
middleware) through the small functions below, so callers never touch the
client library. Labels are closed sets (an outcome, a secret family, a vendor,
an HTTP status), never a tenant: thousands of namespaces must not become
thousands of series. What ``/metrics`` serves, and the gauges read at each
scrape, are in :mod:`memoryapp.ops.collectors`: this module imports nothing of
memoryapp, so the low layers (the guard, the index cache) can count without
an import cycle.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RECALL_SECONDS = Histogram(
    "memoryapp_recall_seconds",
    "Time of one recall (MemoryManager.recall), by outcome.",
    ["outcome"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
INDEX_EVENTS = Counter(
    "memoryapp_recall_index_events",
    "Recall index cache events: build (tokenised every row), load (from a stored "
    "snapshot), delta (caught up with changed rows), persist (snapshot written), evict.",
    ["event"],
)
GUARD_REFUSALS = Counter(
    "memoryapp_guard_refusals",
    "Writes refused because they held a credential, by secret family (never the value).",
    ["family"],
)
PURGE_SECONDS = Histogram(
    "memoryapp_erasure_purge_seconds",
    "Duration of one vendor purge after an erasure, by vendor and outcome.",
    ["vendor", "outcome"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
)
API_RESPONSES = Counter(
    "memoryapp_api_responses",
    "HTTP responses of the API (/api/…), by method and status code.",
    ["method", "status"],
)


def observe_recall(seconds: float, *, ok: bool) -> None:
    """One recall took ``seconds`` (``ok`` False: it failed and returned nothing)."""
    RECALL_SECONDS.labels("ok" if ok else "error").observe(seconds)


def index_event(event: str) -> None:
    """The recall index cache did ``event`` (build, load, delta, persist, evict)."""
    INDEX_EVENTS.labels(event).inc()


def guard_refusal(family: str) -> None:
    """The guard refused a write holding a credential of ``family``."""
    GUARD_REFUSALS.labels(family).inc()


def purge_done(vendor: str, seconds: float, *, ok: bool) -> None:
    """A vendor purge ended after ``seconds``."""
    PURGE_SECONDS.labels(vendor, "purged" if ok else "not_purged").observe(seconds)


def api_response(method: str, status: int) -> None:
    """The API answered ``status`` to a ``method`` request."""
    API_RESPONSES.labels(method, str(status)).inc()
