"""Prometheus metrics: counts and durations only, never a memory's text, key or namespace.

The instruments are module-level ``prometheus_client`` objects, updated by the
code that does the work (recall, the index cache, the guard, the purge, the API
middleware) through the small functions below, so callers never touch the
client library. Labels are closed sets (an outcome, a secret family, a vendor,
an HTTP status), never a tenant: thousands of namespaces must not become
thousands of series. Under gunicorn set ``PROMETHEUS_MULTIPROC_DIR`` (an empty
directory per deployment) so ``/metrics`` adds up every worker
(:func:`exposition`).
"""

from __future__ import annotations

import os
import threading

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

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


class ReceiptStates:
    """Erasure receipts per state, read from the database at each scrape.

    A gauge over the table, not a counter in one process: every worker (and
    every machine) reports the same truth.
    """

    def describe(self):
        return []

    def collect(self):
        from django.db.models import Count

        from .models import ErasureReceipt, ReceiptState

        gauge = GaugeMetricFamily(
            "memoryapp_erasure_receipts",
            "Erasure receipts by state (requested, deleted, complete) and verification.",
            labels=["state", "verified"],
        )
        counts = {(s.value, v): 0 for s in ReceiptState for v in ("yes", "no")}
        try:
            # One GROUP BY: a scrape costs the same with ten receipts or a million.
            rows = ErasureReceipt.objects.order_by().values_list("state", "verified")
            for state, verified, n in rows.annotate(n=Count("pk")):
                counts[(state, "yes" if verified else "no")] = n
        except Exception:  # a scrape must answer even when the database does not
            return
        for (state, verified), n in sorted(counts.items()):
            gauge.add_metric([state, verified], n)
        yield gauge


class IndexCache:
    """This process's recall index cache: entries and bytes held (per worker)."""

    def describe(self):
        return []

    def collect(self):
        from .indexes import INDEXES

        entries, nbytes = INDEXES.usage()
        yield GaugeMetricFamily(
            "memoryapp_recall_index_cache_entries", "Recall indexes held by this process.", entries
        )
        yield GaugeMetricFamily(
            "memoryapp_recall_index_cache_bytes", "Bytes of recall indexes held.", nbytes
        )


_DATABASE_COLLECTORS = (ReceiptStates(), IndexCache())
_registered = False
_register_lock = threading.Lock()


def exposition() -> tuple[bytes, str]:
    """The text exposition of every metric, and its content type.

    With ``PROMETHEUS_MULTIPROC_DIR`` set, the counters and histograms of every
    process that wrote there are added up.
    """
    global _registered
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in _DATABASE_COLLECTORS:
            registry.register(collector)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    with _register_lock:
        if not _registered:
            for collector in _DATABASE_COLLECTORS:
                REGISTRY.register(collector)
            _registered = True
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
