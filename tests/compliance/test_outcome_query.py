"""Receipts are counted by outcome in one aggregate query (issue #39), whatever the number
of outcomes or receipts; only receipts from before outcomes were recorded are read."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryapp.compliance import outcome_counts
from memoryapp.rules.outcomes import RECEIPT_OUTCOMES, UNKNOWN
from tests.factories import receipt_row

pytestmark = pytest.mark.django_db


def test_every_recorded_outcome_is_counted_in_one_query():
    recorded = [o for o in RECEIPT_OUTCOMES if o != UNKNOWN]
    for i, outcome in enumerate(recorded):
        for _ in range(i + 1):
            receipt_row(verification="SQL: 0", details={"outcome": outcome})
    receipt_row()  # not verified yet
    with CaptureQueriesContext(connection) as queries:
        found = outcome_counts.counts()
    assert len(queries) == 1, [q["sql"] for q in queries]
    expected = {o: i + 1 for i, o in enumerate(recorded)}
    expected["not_checked"] += 1
    assert found == {**expected, UNKNOWN: 0}


def test_earlier_receipts_alone_cost_a_second_query():
    receipt_row(verification="SQL: 1 erased row(s) remain")
    with CaptureQueriesContext(connection) as queries:
        found = outcome_counts.counts()
    assert len(queries) == 2 and found["not_verified"] == 1
