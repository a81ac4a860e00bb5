"""Logging that never carries a memory's text: SQL values, query strings and exception text out.

Django logs every statement on ``django.db.backends`` at DEBUG (with ``DEBUG``
on, or a debug cursor) — with the values interpolated into the SQL and again
as ``params``. Those values are memory content, keys, subjects. The app
attaches :class:`RedactSQLValues` to that logger when it starts
(:func:`install`), so a host's logging configuration cannot forget it: the
statement's shape stays (what ran, how long it took), its literals become
``'…'`` and its parameters a count.

Request logs carry URLs, whose query strings hold subjects, namespaces and
searched text (``?subject=acme%2Ferin``, ``?q=…``), and exceptions carry
messages that can quote a row (a database error's ``DETAIL``, a refused value).
:class:`WithoutValues`, attached to ``django.request`` and ``django.server``
(runserver's request lines) by :func:`install` and to the project's console
handler, keeps each query parameter's name and replaces its value with ``…``,
and replaces an exception by its class and frames (file, line, function, code),
without its message or local variables (docs/compliance.md §10). The gunicorn
access log uses the same rule (``project/gunicorn_logging.py``).
"""

from __future__ import annotations

import logging
import re
import traceback

DB_LOGGER = "django.db.backends"
REQUEST_LOGGERS = ("django.request", "django.server")
REDACTED_VALUE = "…"
# A parameter name kept in the log: short, plain characters (a name made of
# anything else may itself be a value, sent as ``?acme/erin``).
_PARAM_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]{1,64}\Z")
_QUERY = re.compile(r"\?([^\s\"'#]*)")
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
    """Attach :class:`RedactSQLValues` and :class:`WithoutValues` to their loggers once."""
    logger = logging.getLogger(DB_LOGGER)
    if not any(isinstance(f, RedactSQLValues) for f in logger.filters):
        logger.addFilter(RedactSQLValues())
    for name in REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, WithoutValues) for f in logger.filters):
            logger.addFilter(WithoutValues())


def redact_query_string(query: str) -> str:
    """A query string with each value replaced by ``…`` and each plain name kept.

    ``subject=acme%2Ferin&q=x`` becomes ``subject=…&q=…``; a part without ``=``
    (itself a value) and a name that is not plain become ``…``.
    """
    parts = []
    for part in re.split(r"[&;]", query):
        if not part:
            continue
        name, sep, _ = part.partition("=")
        name = name if _PARAM_NAME.match(name) else REDACTED_VALUE
        parts.append(f"{name}={REDACTED_VALUE}" if sep else REDACTED_VALUE)
    return "&".join(parts)


def redact_uri(uri: str) -> str:
    """A path or URL with its query string redacted (:func:`redact_query_string`)."""
    path, sep, rest = uri.partition("?")
    if not sep:
        return uri
    query, hash_sep, _ = rest.partition("#")
    return f"{path}?{redact_query_string(query)}" + (f"#{REDACTED_VALUE}" if hash_sep else "")


def redact_queries(text: str) -> str:
    """``text`` with every query string in it redacted (a request line, a message)."""
    return _QUERY.sub(lambda m: "?" + redact_query_string(m.group(1)), text)


def format_exception_without_values(exc: BaseException) -> str:
    """A traceback of ``exc`` and its chain: classes and frames, never a message or a local.

    An exception's message can quote what it refused or a row (a database
    error's ``DETAIL``: ``Key (…)=(…) already exists``); the frames (file,
    line, function, source line) are code, which is what an operator needs.
    """
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, "context"
        else:
            current = None
    lines: list[str] = []
    for index, (item, _) in enumerate(reversed(chain)):
        if index:
            # The link of the exception printed before this one, as Python words it.
            linked_by = chain[len(chain) - index][1]
            lines.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if linked_by == "cause"
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        if item.__traceback__ is not None:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(traceback.format_list(traceback.extract_tb(item.__traceback__)))
        kind = type(item)
        lines.append(f"{kind.__module__}.{kind.__qualname__} (message withheld)\n")
    return "".join(lines).rstrip("\n")


class WithoutValues(logging.Filter):
    """Keeps each record, with query values redacted and exceptions as class and frames.

    The message is rendered and its query strings redacted; an exception moves
    to ``exc_text`` in the form of :func:`format_exception_without_values`
    (formatters use ``exc_text`` when ``exc_info`` is empty); the ``request``
    Django attaches (whose ``repr`` holds the full URL) is dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "_memoryapp_without_values", False):
            record.msg = redact_queries(record.getMessage())
            record.args = ()
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = format_exception_without_values(record.exc_info[1])
            elif record.exc_text:
                record.exc_text = None  # rendered by someone else, with its message
            record.exc_info = None
            record.__dict__.pop("request", None)
            record.__dict__["_memoryapp_without_values"] = True
        return True
