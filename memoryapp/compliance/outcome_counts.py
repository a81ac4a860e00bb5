"""How many erasure receipts have each named outcome (``/metrics``, ``/healthz``).

The outcome a receipt records (``details["outcome"]``, :mod:`memoryapp.rules.outcomes`)
is counted in one ``GROUP BY``; a receipt no verification has reached yet counts as
``not_checked`` in the same query. Only receipts from before outcomes were recorded,
whose verification ran, are read one by one to derive theirs (never "verified by byte
scan" without a scan's recorded counts): their number stops growing with the upgrade.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS
from django.db.models import BooleanField, Case, Count, Q, Value, When
from django.db.models.fields.json import KT

from memoryapp.models import ErasureReceipt
from memoryapp.rules.outcomes import RECEIPT_OUTCOMES, UNKNOWN, Outcome, of_receipt

__all__ = ["counts"]

_RECORDED = [o for o in RECEIPT_OUTCOMES if o != UNKNOWN]


def counts(using: str | None = None) -> dict[str, int]:
    """Receipts per outcome: every value of ``RECEIPT_OUTCOMES``, zeros included."""
    qs = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS).order_by()
    qs = qs.annotate(
        recorded=KT("details__outcome"),
        unchecked=Case(
            When(verification="", then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        ),
    )
    out = dict.fromkeys(RECEIPT_OUTCOMES, 0)
    legacy = 0
    for row in qs.values("recorded", "unchecked").annotate(n=Count("pk")):
        if row["recorded"] in _RECORDED:
            out[row["recorded"]] += row["n"]
        elif row["unchecked"]:
            out[Outcome.NOT_CHECKED.value] += row["n"]
        else:
            legacy += row["n"]
    if legacy:
        # A missing key is NULL, which NOT IN alone would leave out.
        unrecorded = Q(details__outcome__isnull=True) | ~Q(details__outcome__in=_RECORDED)
        earlier = qs.filter(unrecorded).exclude(verification="")
        fields = ("details", "verification", "verified", "databases")
        for values in earlier.values(*fields).iterator():
            out[of_receipt(values)[0]] += 1
    return out
