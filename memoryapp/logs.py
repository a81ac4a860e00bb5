"""Logging that never carries a memory's text: SQL values redacted, a JSON format option.

Django logs every statement on ``django.db.backends`` at DEBUG (with ``DEBUG``
on, or a debug cursor) — with the values interpolated into the SQL and again
as ``params``. Those values are memory content, keys, subjects. The app
attaches :class:`RedactSQLValues` to that logger when it starts
(:func:`install`), so a host's logging configuration cannot forget it: the
statement's shape stays (what ran, how long it took), its literals become
``'…'`` and its parameters a count.
"""

from __future__ import annotations

import logging
import re

DB_LOGGER = "django.db.backends"
_LITERAL = re.compile(r"(?:\b[EeXxBbUu]&?)?'(?:[^']|'')*'")
REDACTED = "'…'"


def redact_sql(sql: str) -> str:
    """``sql`` with every quoted literal replaced by ``'…'`` (numbers and names stay)."""
    return _LITERAL.sub(REDACTED, sql)


class RedactSQLValues(logging.Filter):
    """A filter for ``django.db.backends``: keeps each record, without the values."""

    def filter(self, record: logging.LogRecord) -> bool:
        sql = getattr(record, "sql", None)
        params = getattr(record, "params", None)
        if isinstance(sql, str):
            record.sql = redact_sql(sql)
        if params is not None:
            n = len(params) if hasattr(params, "__len__") else "?"
            redacted = record.params = f"({n} value(s) redacted)"
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(
                redact_sql(a) if isinstance(a, str) and a == sql else a for a in record.args
            )
            if params is not None:
                record.args = tuple(redacted if a is params else a for a in record.args)
        return True


def install() -> None:
    """Attach :class:`RedactSQLValues` to ``django.db.backends`` once."""
    logger = logging.getLogger(DB_LOGGER)
    if not any(isinstance(f, RedactSQLValues) for f in logger.filters):
        logger.addFilter(RedactSQLValues())
