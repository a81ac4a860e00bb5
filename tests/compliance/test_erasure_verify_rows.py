"""The SQL check of an erasure counts the erased rows — namespace and id — and nothing else.

Issue #38: on PostgreSQL a table may hold one id in two namespaces (partitioned tables
key on both; a raw writer, an import, an old collision). The check counted every row
with an erased id, so another namespace's row — never erased, rightly kept — made a
correct erasure "not verified", needing attention forever.
"""

from __future__ import annotations

import pytest
from django.db import connection

from memoryapp import MemoryManager
from memoryapp.compliance import erase
from memoryapp.compliance.purging import _remaining
from memoryapp.compliance.selection import MEMORIES
from memoryapp.models import Memory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("purge_settings")]

ACME, GLOBEX = "acme/web", "globex/web"


def _plant(namespace: str, pk: str) -> None:
    """A row of ``namespace`` under id ``pk``, written as a raw writer would."""
    Memory.objects.create(
        id=pk,
        namespace=namespace,
        scope="project",
        type="note",
        key_normalized=f"planted {pk}",
        title="planted row",
        content=f"acme's planted content {pk}",
    )


@pytest.mark.postgres_only
def test_an_id_erasure_verifies_though_another_namespace_keeps_a_row_of_that_id(settings):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 60  # other runs on the server hold snapshots
    MemoryManager(project=GLOBEX).save_memory("victim row", "globex's own row, kept")
    shared = Memory.objects.get(namespace=GLOBEX).pk
    _plant(ACME, shared)
    receipt = erase(ids=[shared], namespace=ACME)
    assert receipt.counts[MEMORIES] == 1
    assert Memory.objects.filter(pk=shared, namespace=GLOBEX).exists()
    assert "SQL: 0 erased row(s) remain" in receipt.verification, receipt.verification
    assert receipt.verified, receipt.verification


def test_a_row_left_with_an_erased_id_is_counted(settings):
    """Both vendors: the check still finds what it must (a row the erasure selected)."""
    MemoryManager(project=ACME).save_memory("fact", "acme's fact to erase")
    pk = Memory.objects.get(namespace=ACME).pk
    receipt = erase(ids=[pk], namespace=ACME, purge=False)  # to verify, as the worker will
    assert receipt.counts[MEMORIES] == 1 and _remaining(connection.alias, receipt) == 0
    _plant(ACME, pk)
    assert _remaining(connection.alias, receipt) == 1
