"""Bulk import of memories (``manage.py memory import``): validate everything, then write fast.

Every record goes through the same guard and classification as an upsert
(:func:`memoryapp.writes.store.prepare`); nothing is written when any record is
invalid (unless the caller asks to skip them), and the writes of one import run
in a single transaction, so an import is all or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connections, transaction

from memoryapp.db import locks, partitioning, vendor
from memoryapp.db import upsert as upsert_sql
from memoryapp.fields import now
from memoryapp.models import Source
from memoryapp.rules.errors import MemoryValidationError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.writes import live, store

CHUNK = 2000  # rows per bulk statement: bounded memory, few round trips


@dataclass
class ImportReport:
    """What an import did (or would do): counts and the rejected lines."""

    created: int = 0
    updated: int = 0
    invalid: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    written: bool = False
    lines: int = 0
    """Valid records read (blank lines are not records)."""
    merged: int = 0
    """Valid records that gave way to a later one with the same key (the last one wins)."""

    @property
    def total(self) -> int:
        """Rows written (created + updated); for a dry run, the rows it would write."""
        return self.created + self.updated


@dataclass(frozen=True)
class ImportTarget:
    """Where prepared rows of one scope go."""

    using: str
    namespace: str


def parse_json_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict | str]]:
    """Yield ``(line number, record)`` for each non-blank line; a bad line yields its error."""
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # bytes read with surrogateescape
                yield number, "not valid UTF-8 text"
                continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON: {exc.msg}"
            continue
        yield number, value if isinstance(value, dict) else "a line must hold a JSON object"


def import_records(
    records: Iterable[tuple[int, dict | str]],
    *,
    guard: MemoryGuard,
    resolve: Callable[[store.Prepared], tuple[store.Prepared, ImportTarget]],
    subject: str | None,
    actor: str = "",
    skip_invalid: bool = False,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    analyze: bool = True,
) -> ImportReport:
    """Validate then write many memories; the same key updates in place (later lines win).

    Args:
        records: ``(line number, {"key", "value", "tags"?, "scope"?, "type"?, "source"?})``
            pairs, or ``(line number, error text)`` for lines that did not parse.
        guard: the guard every record goes through.
        resolve: maps a prepared record to its final form and target store
            (the facade's user-store downgrade).
        subject: provenance written on every row.
        actor: recorded on the audit events.
        skip_invalid: write the valid records even when some are invalid.
        dry_run: validate only.
        progress: called with the number of rows written so far.
        analyze: refresh the planner's statistics afterwards (a caller importing in
            many small pieces does it once at the end: :func:`refresh_statistics`).
    """
    report = ImportReport()
    latest = _validate(records, guard, resolve, report)
    if dry_run:
        report.created, report.updated = _would_write(latest)
        return report
    if report.invalid and not skip_invalid:
        return report
    for (using, namespace), rows in _by_store(latest).items():
        with transaction.atomic(using=using):
            # An erasure of the namespace or the subject runs wholly before or after.
            locks.for_write(using, namespaces=[namespace], subjects=[subject])
            for start in range(0, len(rows), CHUNK):
                created, updated = _write_chunk(
                    rows[start : start + CHUNK], using, namespace, subject, actor
                )
                report.created += created
                report.updated += updated
                if progress is not None:
                    progress(report.total)
            for scope in {p.scope for p in rows if p.source == Source.AUTO}:
                store.enforce_auto_cap(using, namespace, scope, actor=actor)
        if analyze:
            refresh_statistics(using, [namespace])
    report.written = True
    return report


_Latest = dict[tuple[str, str, str, str], store.Prepared]


def _validate(records, guard, resolve, report: ImportReport) -> _Latest:
    """The valid records by (alias, namespace, scope, key), the last of a key winning;
    the invalid ones and the counts go to ``report``."""
    latest: _Latest = {}
    for number, record in records:
        try:
            if isinstance(record, str):
                raise MemoryValidationError(record)
            prepared, target = resolve(_prepare(guard, record))
        except ValueError as exc:  # MemoryValidationError and SensitiveMemoryError
            report.invalid.append((number, str(exc) or type(exc).__name__))
            continue
        latest[(target.using, target.namespace, prepared.scope, prepared.key_normalized)] = prepared
        report.lines += 1
    report.merged = report.lines - len(latest)
    return latest


def _by_store(latest: _Latest) -> dict[tuple[str, str], list[store.Prepared]]:
    """The records of ``latest`` by the (alias, namespace) they are written to."""
    by_store: dict[tuple[str, str], list[store.Prepared]] = {}
    for (using, namespace, _scope, _key), prepared in latest.items():
        by_store.setdefault((using, namespace), []).append(prepared)
    return by_store


def refresh_statistics(using: str, namespaces: Iterable[str] | None = None) -> None:
    """After a bulk load, give PostgreSQL's planner statistics for the new rows.

    Without them (autovacuum off, or not yet run) the planner scans the whole
    namespace for every upsert lookup and stable-block query: 107 ms instead of
    0.09 ms per upsert at 100,000 memories in bench/RESULTS.md. Given the
    ``namespaces`` written, only their partitions are analysed (an ``ANALYZE``
    of a partitioned table samples every one of its partitions).
    """
    connection = connections[using]
    if not vendor.for_connection(connection).analyze_after_bulk_load:
        return
    with connection.cursor() as cursor:
        for table in ("memories", "memory_events"):
            for relation in partitioning.written_relations(cursor, table, namespaces):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(relation)}")


_RECORD_FIELDS = frozenset({"key", "value", "tags", "scope", "type", "source", "title"})


def _prepare(guard: MemoryGuard, record: dict) -> store.Prepared:
    unknown = record.keys() - _RECORD_FIELDS
    if unknown:
        raise MemoryValidationError(f"unknown field(s): {', '.join(sorted(unknown))}")
    if "key" not in record or "value" not in record:
        raise MemoryValidationError("a record needs 'key' and 'value'")
    return store.prepare(
        guard,
        record["key"],
        record["value"],
        record.get("tags") or (),
        record.get("scope"),
        record.get("type"),
        record.get("source") or Source.EXPLICIT,
        title=record.get("title"),
    )


# --- The writes: plain SQL ---------------------------------------------------------
# The ORM's ``Memory(...)`` + ``bulk_create``/``bulk_update`` cost ~350 µs per row in
# Python (model instances, per-field ``pre_save``/``get_db_prep_save``, the compiler);
# the one write of live memories (:func:`memoryapp.writes.live.upsert_rows`) writes
# the same rows and events for a fraction of it, a chunk at a time.


# ``models.dump_list`` without building a JSON encoder per call: ``json.dumps(v,
# ensure_ascii=False)`` is ``JSONEncoder(ensure_ascii=False).encode(v)``, and the
# encoder writes a tuple as it writes a list (tests compare the two).
_dump_list = json.JSONEncoder(ensure_ascii=False).encode


def _live_ids(cursor, postgresql: bool, namespace: str, rows) -> dict[tuple[str, str], str]:
    """``{(scope, key_normalized): id}`` of the live rows holding the keys of ``rows``."""
    by_scope: dict[str, list[str]] = {}
    for p in rows:
        by_scope.setdefault(p.scope, []).append(p.key_normalized)
    existing: dict[tuple[str, str], str] = {}
    for scope, keys in sorted(by_scope.items()):
        for key, memory_id, _created, _subject in upsert_sql.live_rows(
            cursor, postgresql, namespace, scope, keys
        ):
            existing[(scope, key)] = memory_id
    return existing


def _would_write(latest: _Latest) -> tuple[int, int]:
    """``(created, updated)`` an import of ``latest`` would write now: a dry run's counts.

    The same lookup of live keys as the write, reading only.
    """
    created = updated = 0
    for (using, namespace), rows in _by_store(latest).items():
        connection = connections[using]
        postgresql = vendor.for_connection(connection).bulk_copy
        with connection.cursor() as cursor:
            for start in range(0, len(rows), CHUNK):
                chunk = rows[start : start + CHUNK]
                found = len(_live_ids(cursor, postgresql, namespace, chunk))
                updated += found
                created += len(chunk) - found
    return created, updated


def _write_chunk(rows, using, namespace, subject, actor) -> tuple[int, int]:
    """Insert or update one chunk of prepared rows, with their events: ``(created, updated)``.

    A new key gets a fresh id and ``created_at == updated_at ==`` the chunk's stamp; a
    key with a live row updates that row in place (id and ``created_at`` kept,
    ``subject`` set to this import's user, or kept when it has none); the events are
    the ``create`` ones in row order, then the ``update`` ones.
    """
    details: dict[tuple[str, str], str] = {}
    values = []
    for p in rows:
        detail = details.get((p.scope, p.source))
        if detail is None:
            detail = json.dumps({"scope": p.scope, "source": p.source, "via": "import"})
            details[(p.scope, p.source)] = detail
        values.append(
            live.Row(p.scope, p.key_normalized, p.type, p.title, p.content, _dump_list(p.tags),
                     _dump_list(p.keywords), p.source, p.confidence, detail)
        )  # fmt: skip
    with connections[using].cursor() as cursor:
        written = live.upsert_rows(
            cursor, using=using, namespace=namespace, rows=values, subject=subject,
            actor=actor, stamp=now(),
        )  # fmt: skip
    created = sum(w.created for w in written)
    return created, len(written) - created
