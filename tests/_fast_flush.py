"""On PostgreSQL, a transactional test's flush truncates only the tables it changed.

Django ends every transactional test (``transaction=True``, ``live_server``) with
``flush``: one ``TRUNCATE`` of every table. Here that is 5 tables of 64 partitions
each, about 350 tables and 1,500 indexes, and PostgreSQL rebuilds and fsyncs every
index it truncates: about 2 s a test, most of the PostgreSQL pass.

This plugin keeps what the flush promises (every table emptied, its files as a
``TRUNCATE`` leaves them, so no test's bytes reach the next test's byte scan) and
drops the work on tables that already are so. One difference stays: truncating a
partition does not fire the statement trigger of its parent, so the change counter
row of ``schema_meta`` comes back from ``post_migrate`` at 0 rather than 1.

The first flush of a database is Django's own; right after it, the total size of
every leaf table (heap, TOAST, indexes, free-space and visibility maps) is noted.
Each later flush truncates the leaves whose total size differs from that note: a
leaf's heap is empty (0 bytes) right after a TRUNCATE, and a row written there, even
rolled back, extends it, so a leaf of the noted size holds nothing. A leaf whose
heap is not empty right after the flush (``schema_meta``: a trigger writes the
change counter as ``memories`` is truncated) is truncated every time, since rows may
come and go in its pages without changing its size. ``CASCADE`` takes in the tables
that reference a truncated one, as a full flush truncates them too.
``reset_sequences`` flushes stay Django's own.
"""

from __future__ import annotations

from django.db.backends.postgresql.operations import DatabaseOperations

# Database NAME -> {leaf table: total size in bytes right after a full flush, or -1 for
# a leaf holding rows then (truncated every time)}.
_EMPTY_SIZES: dict[str, dict[str, int]] = {}

_django_sql_flush = DatabaseOperations.sql_flush
_django_execute_sql_flush = DatabaseOperations.execute_sql_flush


def leaf_sizes(connection, tables, *, heap: bool = False) -> dict[str, int]:
    """Each leaf table under ``tables`` (a partition, or the table itself) and its total
    size (``heap``: the size of its heap's main fork alone)."""
    size = "pg_relation_size" if heap else "pg_total_relation_size"
    with connection.cursor() as cursor:
        cursor.execute(
            # pg_partition_tree() lists a partitioned table's leaves and nothing for a
            # plain table, which is its own leaf.
            f"SELECT leaf.relid::regclass::text, {size}(leaf.relid)"
            " FROM unnest(%s::text[]) AS n(name)"
            " JOIN pg_class AS t ON t.oid = to_regclass(quote_ident(n.name))"
            " CROSS JOIN LATERAL ("
            "   SELECT relid FROM pg_partition_tree(t.oid) WHERE isleaf"
            "   UNION SELECT t.oid WHERE t.relkind = 'r'"
            " ) AS leaf",
            [sorted(tables)],
        )
        return dict(cursor.fetchall())


def changed_leaves(connection, tables) -> list[str] | None:
    """The leaves a flush must truncate, or None before the first full flush was noted."""
    empty = _EMPTY_SIZES.get(connection.settings_dict["NAME"])
    if empty is None:
        return None
    return [
        leaf for leaf, size in leaf_sizes(connection, tables).items() if empty.get(leaf) != size
    ]


def _sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    leaves = None if reset_sequences or not tables else changed_leaves(self.connection, tables)
    if leaves is None:
        self.connection._memoryapp_full_flush = tables
        return _django_sql_flush(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    self.connection._memoryapp_full_flush = None
    if not leaves:
        return []
    return [f"{style.SQL_KEYWORD('TRUNCATE')} {', '.join(leaves)} {style.SQL_KEYWORD('CASCADE')};"]


def _execute_sql_flush(self, sql_list):
    _django_execute_sql_flush(self, sql_list)
    tables = getattr(self.connection, "_memoryapp_full_flush", None)
    if tables and sql_list:
        heaps = leaf_sizes(self.connection, tables, heap=True)
        _EMPTY_SIZES[self.connection.settings_dict["NAME"]] = {
            leaf: -1 if heaps.get(leaf) else size
            for leaf, size in leaf_sizes(self.connection, tables).items()
        }
    self.connection._memoryapp_full_flush = None


def pytest_configure(config):
    """Install the narrowed flush for the PostgreSQL backend (SQLite's is a cheap DELETE)."""
    DatabaseOperations.sql_flush = _sql_flush
    DatabaseOperations.execute_sql_flush = _execute_sql_flush
