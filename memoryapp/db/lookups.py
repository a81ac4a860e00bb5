"""Query expressions whose meaning must not depend on the database vendor."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Q
from django.db.models.lookups import Lookup, PatternLookup, StartsWith


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


def covering_q(field: str, grants: Iterable[tuple[str, bool]]) -> Q:
    """Rows whose ``field`` one of ``grants`` covers; an empty list matches nothing.

    Each grant is ``(namespace, is_prefix)``: an exact name, or a prefix compared
    case-sensitively (:func:`prefix_q`). Plain pairs, so the same rule can be built
    from an API client's grants at request time and from a sealed erasure target later.
    """
    q = Q(pk__in=[])
    exact: list[str] = []
    for namespace, is_prefix in grants:
        if is_prefix:
            q |= prefix_q(field, namespace)
        else:
            exact.append(namespace)
    if exact:
        q |= Q(**{f"{field}__in": exact})
    return q


# ---------------------------------------------------------------- search (docs/behaviour.md §3)
# A literal, case-insensitive substring, as ``memoryapp.services.search.matches`` defines it
# with Python's ``str.lower``. ``LIKE`` cannot say it for every needle: SQLite's folds
# ASCII only, and the JSON text of the tag and keyword columns escapes ``"`` and
# ``\`` and may match across two items. These lookups compare the folded text
# itself, each JSON item on its own (``json_each`` / ``json_array_elements_text``).
# SQLite folds with Python's own ``str.lower`` (a function registered on the
# connection) for a needle beyond ASCII, with its built-in ``lower`` otherwise.
SQLITE_FOLD = "memoryapp_lower"


def _fold(value):
    return str(value).lower() if value is not None else None


def _sqlite_fold(connection, needle: object) -> str:
    """The SQLite folding function for ``needle``, registered on the connection if needed."""
    if isinstance(needle, str) and needle.isascii():
        return "lower"
    connection.ensure_connection()
    # Cheap, and idempotent: the connection may be new since the last search.
    connection.connection.create_function(SQLITE_FOLD, 1, _fold, deterministic=True)
    return SQLITE_FOLD


class _FoldedLookup(Lookup):
    prepare_rhs = False  # the needle is compared as given

    def _sides(self, compiler, connection):
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        rhs_sql, rhs_params = self.process_rhs(compiler, connection)
        return lhs_sql, rhs_sql, (*lhs_params, *rhs_params)


class FoldedContains(_FoldedLookup):
    """``lhs`` (text) holds ``rhs`` as a literal substring, case folded on both sides."""

    lookup_name = "memoryapp_folded_contains"

    def as_sql(self, compiler, connection):  # PostgreSQL
        lhs, rhs, params = self._sides(compiler, connection)
        return f"strpos(lower({lhs}), lower({rhs})) > 0", params

    def as_sqlite(self, compiler, connection):
        lhs, rhs, params = self._sides(compiler, connection)
        fold = _sqlite_fold(connection, self.rhs)
        return f"instr({fold}({lhs}), {fold}({rhs})) > 0", params


class JsonItemFolded(_FoldedLookup):
    """An item of the JSON array text ``lhs`` holds ``rhs`` (``equals``: is ``rhs``), case
    folded on both sides; text that is not a JSON array has no items."""

    lookup_name = "memoryapp_json_item_folded"
    equals = False

    def _test(self, item: str, rhs: str, fold: str, position: str) -> str:
        if self.equals:
            return f"{fold}({item}) = {fold}({rhs})"
        return f"{position}({fold}({item}), {fold}({rhs})) > 0"

    def as_sql(self, compiler, connection):  # PostgreSQL
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        rhs_sql, rhs_params = self.process_rhs(compiler, connection)
        items = (
            f"json_array_elements_text(CASE WHEN json_typeof(({lhs_sql})::json) = 'array' "
            f"THEN ({lhs_sql})::json ELSE '[]'::json END)"
        )
        test = self._test("item.v", rhs_sql, "lower", "strpos")
        sql = f"EXISTS (SELECT 1 FROM {items} AS item(v) WHERE {test})"
        return sql, (*lhs_params, *lhs_params, *rhs_params)

    def as_sqlite(self, compiler, connection):
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        rhs_sql, rhs_params = self.process_rhs(compiler, connection)
        fold = _sqlite_fold(connection, self.rhs)
        # Nested CASEs: json_type() fails on malformed text, so it only sees valid JSON.
        array = (
            f"CASE WHEN json_valid({lhs_sql}) THEN "
            f"(CASE WHEN json_type({lhs_sql}) = 'array' THEN {lhs_sql} END) END"
        )
        test = self._test("item.value", rhs_sql, fold, "instr")
        sql = f"EXISTS (SELECT 1 FROM json_each({array}) AS item WHERE {test})"
        return sql, (*lhs_params, *lhs_params, *lhs_params, *rhs_params)


class JsonItemFoldedEquals(JsonItemFolded):
    """An item of the JSON array text ``lhs`` is ``rhs``, case folded."""

    lookup_name = "memoryapp_json_item_folded_equals"
    equals = True
