"""Per-scope throttling (``write``, ``recall``, ``erase``, ``list``), rates read live from settings.

Rates live in ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]`` under the scope names;
a scope without a rate (or a rate of ``None``) is not throttled. Unlike DRF's
``ScopedRateThrottle``, which copies the rates once at import time, the rates are
read per request, so a settings override (tests, a live reconfiguration) applies.
"""

from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle

WRITE = "write"
RECALL = "recall"
ERASE = "erase"
LIST = "list"  # the paginated lists (a search over a tenant's rows is a list)
SCOPES = (WRITE, RECALL, ERASE, LIST)


def scope_of(view) -> str | None:
    """The throttle scope of the view's current action (``throttle_scopes`` by action, else
    ``throttle_scope``); ``None`` when the action is not throttled."""
    by_action = getattr(view, "throttle_scopes", None)
    if by_action is not None:
        return by_action.get(getattr(view, "action", None))
    return getattr(view, "throttle_scope", None)


class MemoryScopedThrottle(ScopedRateThrottle):
    """A ``ScopedRateThrottle`` keyed per user (or client IP) and per scope."""

    def allow_request(self, request, view) -> bool:
        self.scope = scope_of(view)
        if not self.scope:
            return True
        # The stub types the rates as numbers; DRF's are strings ("60/min").
        self.rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # type: ignore[assignment]
        if not self.rate:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        # SimpleRateThrottle's check, skipping ScopedRateThrottle's import-time rates.
        return super(ScopedRateThrottle, self).allow_request(request, view)
