"""What ``/metrics`` serves: :mod:`memoryapp.metrics`' instruments plus gauges read at scrape.

Apart from :mod:`memoryapp.metrics` because the gauges read the models and the
index cache, which themselves count through the instruments: one module would
import in a circle. Under gunicorn set ``PROMETHEUS_MULTIPROC_DIR`` (an empty
directory per deployment) so ``/metrics`` adds up every worker
(:func:`exposition`).
"""

from __future__ import annotations

import os
import threading

from django.db.models import Count
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from memoryapp.models import ErasureReceipt, ReceiptState
from memoryapp.recall.cache import INDEXES


class ReceiptStates:
    """Erasure receipts per state, read from the database at each scrape.

    A gauge over the table, not a counter in one process: every worker (and
    every machine) reports the same truth.
    """

    def describe(self):
        return []

    def collect(self):
        gauge = GaugeMetricFamily(
            "memoryapp_erasure_receipts",
            "Erasure receipts by state (requested, deleted, complete, needs_attention) "
            "and verification.",
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


class ReceiptOutcomes:
    """Erasure receipts by what their verification proved, read at each scrape.

    One label per named outcome (:data:`memoryapp.rules.outcomes.RECEIPT_OUTCOMES`):
    ``verified_by_byte_scan``, ``rewritten_not_scanned`` (no byte scan was possible:
    the database is on another machine, its files unreadable here …),
    ``not_verified``, ``not_checked``, ``nothing_erased``, ``unknown``.
    """

    def describe(self):
        return []

    def collect(self):
        from memoryapp.compliance import outcome_counts

        try:
            found = outcome_counts.counts()
        except Exception:  # a scrape must answer even when the database does not
            return
        gauge = GaugeMetricFamily(
            "memoryapp_erasure_receipt_outcomes",
            "Erasure receipts by verification outcome: verified by byte scan, rewritten but "
            "not scanned (no byte scan possible here), not verified, not checked yet, "
            "nothing erased, unknown (an earlier receipt that does not record it).",
            labels=["outcome"],
        )
        for outcome, n in found.items():
            gauge.add_metric([outcome], n)
        yield gauge


class LateCopies:
    """Servers that have not reported their check of an erasure within
    ``MEMORYAPP_COPY_REPORT_AFTER`` (a replica no worker reaches, a verifier not running)."""

    def describe(self):
        return []

    def collect(self):
        from memoryapp.compliance import copies

        try:
            late = copies.late_by_server()
        except Exception:  # a scrape must answer even when the database does not
            return
        gauge = GaugeMetricFamily(
            "memoryapp_erasure_copies_late",
            "Erasures a server (a copy of the data) has not reported its check on in time.",
            labels=["server"],
        )
        for server, n in sorted(late.items()):
            gauge.add_metric([server], n)
        yield gauge


class UnfinishedErasures:
    """Erasures still to finish: pending, needing attention, and the oldest pending's age.

    Read from the database at each scrape (one aggregate query), so an alert on
    ``memoryapp_erasure_needing_attention > 0`` or on the age fires whatever worker
    is scraped.
    """

    def describe(self):
        return []

    def collect(self):
        from memoryapp.compliance import attention

        try:
            found = attention.status()
        except Exception:  # a scrape must answer even when the database does not
            return
        yield GaugeMetricFamily(
            "memoryapp_erasure_pending",
            "Erasures the worker still completes by itself (requested or deleted).",
            found.pending,
        )
        yield GaugeMetricFamily(
            "memoryapp_erasure_needing_attention",
            "Erasures whose automatic attempts are exhausted: a person must retry them.",
            found.needs_attention,
        )
        yield GaugeMetricFamily(
            "memoryapp_erasure_oldest_pending_age_seconds",
            "Seconds since the oldest pending erasure was asked for (0 when none is).",
            found.oldest_pending_age(),
        )


class IndexCache:
    """This process's recall index cache: entries and bytes held (per worker)."""

    def describe(self):
        return []

    def collect(self):
        entries, nbytes = INDEXES.usage()
        yield GaugeMetricFamily(
            "memoryapp_recall_index_cache_entries", "Recall indexes held by this process.", entries
        )
        yield GaugeMetricFamily(
            "memoryapp_recall_index_cache_bytes", "Bytes of recall indexes held.", nbytes
        )


_DATABASE_COLLECTORS = (
    ReceiptStates(),
    ReceiptOutcomes(),
    LateCopies(),
    UnfinishedErasures(),
    IndexCache(),
)
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
