"""What differs between the two supported databases, asked in one place.

The rest of the app never compares ``connection.vendor`` itself: it asks
:func:`for_connection` for the facts below. Vendor *SQL* (triggers, the purge,
snapshots) lives in the other ``memoryapp.db`` modules; erasure's vendor purge
has its own per-vendor classes in :mod:`memoryapp.db.purge`.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import NotSupportedError


@dataclass(frozen=True)
class Vendor:
    """The facts of one database vendor that the app's code depends on."""

    name: str
    row_lock: str
    """Suffix of a ``SELECT`` whose row is updated next (SQLite's IMMEDIATE
    transactions already exclude other writers)."""
    lock_counter_first: bool
    """Writers lock the database-wide change counter before any slice counter:
    one lock order, so concurrent transactions never deadlock (PostgreSQL)."""
    unicode_like: bool
    """``LIKE`` folds case beyond ASCII, so a ``LIKE`` prefilter is a superset."""
    rowid_order: bool
    """Rows have an implicit insertion order (SQLite's ``rowid``)."""
    bulk_copy: bool
    """Bulk loads go through ``COPY FROM STDIN`` (else ``executemany``)."""
    analyze_after_bulk_load: bool
    """The planner needs fresh statistics after a bulk load to keep using the indexes."""
    text_timestamps: bool
    """Timestamps are stored as ISO text (shared with Agentao's files)."""
    adopts_files: bool
    """An Agentao ``memory.db`` file can be adopted in place."""
    partitions_by_namespace: bool
    """The personal-data tables are hash-partitioned by namespace, so an erasure's
    purge rewrites only the partitions that held its rows (:mod:`.partitioning`)."""
    namespace_beside_ids: str
    """The predicate (one parameter, the namespace) that keeps rows looked up by
    ``id IN (…)`` within one namespace. PostgreSQL names the column, so that the
    statement reads the namespace's one partition. SQLite writes ``+namespace``: the
    unary plus is SQLite's documented way to keep a term from choosing the index, and
    without it the planner prefers a ``(namespace, …)`` index and scans the whole
    namespace instead of looking the ids up (30 ms against 0.1 ms at 100,000 memories)."""
    binary_blob_reads: bool
    """A large blob is read in binary format, through a server-binding psycopg cursor:
    Django's PostgreSQL cursors bind on the client and get every result as text, which
    sends a ``bytea`` as hex (twice its size, encoded by the server, decoded here)."""
    json_rows: str
    """A ``SELECT`` of one JSON text: the rows of an ordered subquery as an array of
    arrays, in its order (``"[]"`` for none). Fields: ``{rows}`` (the subquery, aliased
    ``g``), ``{columns}`` (of ``g``), ``{order}`` (its ``ORDER BY`` terms over ``g``).
    One statement can then bring a row and its few children (a token and its grants)."""
    advisory_locks: bool
    """Writers and erasures serialise on transaction-scoped advisory locks, one per
    namespace and per subject (:mod:`.locks`): PostgreSQL's transactions run side by
    side under READ COMMITTED, so an erasure's selection could miss a row a concurrent
    write commits a moment later. SQLite needs none: its IMMEDIATE transactions take
    the one write lock at ``BEGIN``, so a write transaction runs wholly before or
    wholly after an erasure's."""


SQLITE = Vendor(
    name="sqlite",
    row_lock="",
    lock_counter_first=False,
    unicode_like=False,
    rowid_order=True,
    bulk_copy=False,
    analyze_after_bulk_load=False,
    text_timestamps=True,
    adopts_files=True,
    partitions_by_namespace=False,
    namespace_beside_ids="+namespace = %s",
    binary_blob_reads=False,
    # json_group_array follows the subquery's order (SQLite 3.40 has no ORDER BY in
    # aggregates).
    json_rows="SELECT json_group_array(json_array({columns})) FROM ({rows}) g",
    advisory_locks=False,
)
POSTGRESQL = Vendor(
    name="postgresql",
    row_lock=" FOR UPDATE",
    lock_counter_first=True,
    unicode_like=True,
    rowid_order=False,
    bulk_copy=True,
    analyze_after_bulk_load=True,
    text_timestamps=False,
    adopts_files=False,
    partitions_by_namespace=True,
    namespace_beside_ids="namespace = %s",
    binary_blob_reads=True,
    json_rows=(
        "SELECT COALESCE(json_agg(json_build_array({columns}) ORDER BY {order}), '[]')::text"
        " FROM ({rows}) g"
    ),
    advisory_locks=True,
)
_BY_NAME = {v.name: v for v in (SQLITE, POSTGRESQL)}


def for_connection(connection) -> Vendor:
    """The :class:`Vendor` of a Django connection (system check ``memoryapp.E001``
    refuses the others at start-up)."""
    try:
        return _BY_NAME[connection.vendor]
    except KeyError:
        raise NotSupportedError(
            f"memoryapp supports SQLite and PostgreSQL, not {connection.vendor}"
        ) from None


def known(connection) -> Vendor | None:
    """The :class:`Vendor` of a connection, or None for one memoryapp does not support."""
    return _BY_NAME.get(connection.vendor)


def of(alias: str) -> Vendor:
    """The :class:`Vendor` of the database alias ``alias``."""
    from django.db import connections

    return for_connection(connections[alias])
