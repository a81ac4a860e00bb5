"""Query expressions whose meaning must not depend on the database vendor."""

from __future__ import annotations

from django.db.models import F, Q
from django.db.models.lookups import PatternLookup, StartsWith


class CaseSensitivePrefix(StartsWith):
    """``lhs`` starts with ``rhs``, comparing code points exactly, on every vendor.

    Django's ``__startswith`` compiles to ``LIKE 'x%'``. PostgreSQL's ``LIKE`` is
    case-sensitive, but SQLite's folds ASCII case unless ``case_sensitive_like`` is
    on, so a grant for ``acme/`` would match ``ACME/…`` and ``Acme/…`` there — a
    tenant leak. On SQLite this compares the first ``length(rhs)`` characters with
    ``=`` (the BINARY collation: exact), and ``lhs >= rhs`` beside it lets an index
    on ``lhs`` start its range scan at the prefix (every string starting with
    ``rhs`` sorts at or after it byte-wise). ``%`` and ``_`` in ``rhs`` are literal
    on both vendors (PostgreSQL keeps Django's escaped ``LIKE``).
    """

    def as_sqlite(self, compiler, connection):
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        # The plain value, not the LIKE pattern PatternLookup would build from it.
        rhs_sql, rhs_params = super(PatternLookup, self).process_rhs(compiler, connection)
        sql = f"({lhs_sql} >= {rhs_sql} AND substr({lhs_sql}, 1, length({rhs_sql})) = {rhs_sql})"
        params = (*lhs_params, *rhs_params, *lhs_params, *rhs_params, *rhs_params)
        return sql, params


def prefix_q(field: str, prefix: str) -> Q:
    """A filter for rows whose ``field`` starts with ``prefix``, case-sensitively everywhere."""
    return Q(CaseSensitivePrefix(F(field), prefix))
