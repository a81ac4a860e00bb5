"""Writers against erasures: transaction-scoped locks per namespace and per subject.

An erasure selects its rows, then deletes them. On PostgreSQL (READ COMMITTED)
a write that commits between the selection and the commit — an approval writing
the erased subject's memory, a memory saved into the namespace being erased —
would survive the erasure with the very text it was asked to remove. So every
write takes a *shared* advisory lock on its namespace and its subject (writers
never wait for each other), and an erasure an *exclusive* one on what it erases,
before it selects: one of the two then runs wholly before the other.

The locks are ``pg_advisory_xact_lock*``: released by the commit or rollback,
never left behind by a crashed process. Their keys are a stable 64-bit hash of
``(kind, value)``; a collision only makes two unrelated names wait for each other.
Every acquisition takes its keys in ascending order, so two transactions never
hold them crosswise.

SQLite needs nothing (``Vendor.advisory_locks`` is false): its IMMEDIATE
transactions take the database's one write lock at ``BEGIN``, so an erasure's
transaction, selection included, already runs wholly before or after any write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.db import connections

from memoryapp.db.vendor import for_connection

NAMESPACE = "namespace"
SUBJECT = "subject"
EVERYTHING = "everything"

_SHARED = "SELECT pg_advisory_xact_lock_shared(k) FROM unnest(%s::bigint[]) AS k"
_EXCLUSIVE = "SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k"


def key(kind: str, value: str) -> int:
    """The advisory-lock key of ``(kind, value)``: a signed 64-bit integer, stable across
    processes and releases (a hash, never the value: subjects are personal data)."""
    digest = hashlib.blake2b(
        f"memoryapp:{kind}\x00{value}".encode("utf-8", "surrogatepass"),
        digest_size=8,
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def keys(
    *,
    namespaces: Iterable[str | None] = (),
    subjects: Iterable[str | None] = (),
    everything: bool = False,
) -> list[int]:
    """The sorted, distinct keys naming these namespaces and subjects (None skipped),
    and the database-wide key when ``everything``."""
    found = {key(NAMESPACE, ns) for ns in namespaces if ns is not None}
    found |= {key(SUBJECT, s) for s in subjects if s is not None}
    if everything:
        found.add(key(EVERYTHING, ""))
    return sorted(found)


def needed(using: str) -> bool:
    """Whether ``using``'s vendor takes these locks (a caller may skip reading their keys)."""
    return for_connection(connections[using]).advisory_locks


def for_write(
    using: str, *, namespaces: Iterable[str | None] = (), subjects: Iterable[str | None] = ()
) -> None:
    """Before a write: share the locks of its namespaces and subjects (and the
    database-wide one), until the transaction ends. Waits while an erasure of any of
    them runs. Must run inside the write's transaction, before its first row lock."""
    _take(using, _SHARED, keys(namespaces=namespaces, subjects=subjects, everything=True))


def for_erasure(
    using: str,
    *,
    namespaces: Iterable[str | None] = (),
    subjects: Iterable[str | None] = (),
    everything: bool = False,
) -> None:
    """Before an erasure selects: hold its namespaces and subjects (or the whole
    database) exclusively until its transaction ends. Waits for the writes in flight
    there to commit, and makes later ones wait for this commit."""
    _take(
        using,
        _EXCLUSIVE,
        keys(namespaces=namespaces, subjects=subjects, everything=everything),
    )


def _take(using: str, sql: str, wanted: list[int]) -> None:
    connection = connections[using]
    if not wanted or not for_connection(connection).advisory_locks:
        return
    if not connection.in_atomic_block:
        # A transaction-scoped lock outside a transaction ends with the statement.
        raise RuntimeError("advisory locks are taken inside the transaction they guard")
    with connection.cursor() as cursor:
        cursor.execute(sql, [wanted])
        cursor.fetchall()
