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
from memoryapp.fields import now
from memoryapp.models import Memory, Source, new_id
from memoryapp.rules import guard as guards
from memoryapp.writes import store

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
    guard: guards.MemoryGuard,
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
    latest: dict[tuple[str, str, str, str], store.Prepared] = {}
    for number, record in records:
        try:
            if isinstance(record, str):
                raise guards.MemoryValidationError(record)
            prepared, target = resolve(_prepare(guard, record))
        except ValueError as exc:  # MemoryValidationError and SensitiveMemoryError
            report.invalid.append((number, str(exc) or type(exc).__name__))
            continue
        latest[(target.using, target.namespace, prepared.scope, prepared.key_normalized)] = prepared
        report.lines += 1
    report.merged = report.lines - len(latest)
    if dry_run:
        report.created, report.updated = _would_write(latest)
        return report
    if report.invalid and not skip_invalid:
        return report
    by_store: dict[tuple[str, str], list[store.Prepared]] = {}
    for (using, namespace, _scope, _key), prepared in latest.items():
        by_store.setdefault((using, namespace), []).append(prepared)
    for (using, namespace), rows in by_store.items():
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


def _prepare(guard: guards.MemoryGuard, record: dict) -> store.Prepared:
    unknown = record.keys() - _RECORD_FIELDS
    if unknown:
        raise guards.MemoryValidationError(f"unknown field(s): {', '.join(sorted(unknown))}")
    if "key" not in record or "value" not in record:
        raise guards.MemoryValidationError("a record needs 'key' and 'value'")
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
# these statements write the same rows and events for a fraction of it. Text values
# are bound as they are (a ``CharField``/``TextField`` prepares a ``str`` to itself);
# the one timestamp goes through the model field's ``get_db_prep_value``, as the ORM
# (and ``store.write``) does, so SQLite gets the ISO text other writers sort by.
#
# SQLite: ``executemany`` of one-row statements (the loop runs in the driver's C code).
# PostgreSQL: ``COPY … FROM STDIN`` for the inserts (psycopg formats the rows in C; a
# multi-row ``VALUES`` list with thousands of placeholders costs more to parse in
# psycopg's Python than everything else), and one ``UPDATE … FROM unnest(arrays)``
# per batch for the updates. COPY checks constraints and fires triggers as INSERT does,
# and errors are translated to Django's exceptions as for any statement.
#
# The change counter: its triggers are row-level on SQLite (one bump per row, however
# the rows are sent) and statement-level on PostgreSQL (a COPY is one statement), where
# ``bulk_create`` and ``bulk_update`` sent one statement per ``_PG_BATCH`` rows; the
# PostgreSQL statements here are batched the same way, so an import moves the counter
# exactly as before.

# Per-row columns of an insert; the others (namespace, subject, sensitivity and the two
# stamps) are the same for the whole chunk.
_ROW_COLUMNS = (
    "id", "scope", "key_normalized", "type", "title", "content", "tags_json",
    "keywords_json", "source", "confidence",
)  # fmt: skip
_CHUNK_COLUMNS = ("namespace", "subject", "sensitivity", "created_at", "updated_at")
# What an update sets per row (then subject and updated_at, the same for the whole chunk).
_UPDATED_COLUMNS = (
    "type", "title", "content", "tags_json", "keywords_json", "source", "confidence",
)  # fmt: skip
_EVENT_ROW_COLUMNS = ("memory_id", "event_type", "detail")
_EVENT_CHUNK_COLUMNS = ("timestamp", "namespace", "actor")

_PG_BATCH = 500  # rows per INSERT/UPDATE of memories on PostgreSQL (bulk_create's batch_size)

_STAMP_FIELD = Memory._meta.get_field("updated_at")
_SENSITIVITY = Memory._meta.get_field("sensitivity").default  # "normal", as bulk_create wrote


# ``models.dump_list`` without building a JSON encoder per call: ``json.dumps(v,
# ensure_ascii=False)`` is ``JSONEncoder(ensure_ascii=False).encode(v)``, and the
# encoder writes a tuple as it writes a list (tests compare the two).
_dump_list = json.JSONEncoder(ensure_ascii=False).encode


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


_INSERT_MEMORY = (
    f"INSERT INTO memories ({', '.join(_ROW_COLUMNS + _CHUNK_COLUMNS)}) "
    f"VALUES ({_marks(len(_ROW_COLUMNS) + len(_CHUNK_COLUMNS))})"
)
# An import without a user key keeps an updated row's subject (as store.write does):
# erasure by subject must still find the rows that user wrote.
_UPDATE_MEMORY = (
    "UPDATE memories SET "
    + ", ".join(f"{column} = %s" for column in _UPDATED_COLUMNS)
    + ", subject = COALESCE(%s, subject), updated_at = %s WHERE namespace = %s AND id = %s"
)
_INSERT_EVENT = (
    f"INSERT INTO memory_events ({', '.join(_EVENT_ROW_COLUMNS + _EVENT_CHUNK_COLUMNS)}) "
    f"VALUES ({_marks(len(_EVENT_ROW_COLUMNS) + len(_EVENT_CHUNK_COLUMNS))})"
)
_PG_COPY_MEMORY = f"COPY memories ({', '.join(_ROW_COLUMNS + _CHUNK_COLUMNS)}) FROM STDIN"
_PG_UPDATE_MEMORY = (
    "UPDATE memories AS m SET "
    + ", ".join(f"{column} = v.{column}" for column in _UPDATED_COLUMNS)
    + ", subject = COALESCE(%s::text, m.subject), updated_at = %s::timestamptz "
    f"FROM unnest({', '.join(['%s::text[]'] * (len(_UPDATED_COLUMNS) + 1))}) "
    f"AS v({', '.join(_UPDATED_COLUMNS)}, id) WHERE m.namespace = %s AND m.id = v.id"
)
_PG_COPY_EVENT = (
    f"COPY memory_events ({', '.join(_EVENT_ROW_COLUMNS + _EVENT_CHUNK_COLUMNS)}) FROM STDIN"
)


def _copy_rows(connection, cursor, sql: str, rows) -> None:
    """``COPY … FROM STDIN`` of ``rows`` (PostgreSQL; the driver formats rows in C)."""
    with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def _columns(rows: list[tuple], start: int, stop: int) -> list[list]:
    """The values of ``rows[start:stop]``, column by column (for ``unnest``)."""
    return [list(column) for column in zip(*rows[start:stop], strict=True)]


# The live row of each key, one index probe per key. Without statistics (a table
# being filled, autovacuum off or not yet run) PostgreSQL estimates one row per
# namespace and scans all of it, filtering the keys, instead of using the keys in the
# index condition; the LIMIT keeps the lateral subquery a per-key probe of the partial
# unique index (at most one live row per key: the LIMIT drops nothing).
_PG_LIVE_IDS = (
    "SELECT m.key_normalized, m.id FROM unnest(%s::text[]) AS k(key_normalized) "
    "CROSS JOIN LATERAL (SELECT key_normalized, id FROM memories WHERE namespace = %s "
    "AND scope = %s AND key_normalized = k.key_normalized AND deleted_at IS NULL LIMIT 1) AS m"
)


def _live_ids(cursor, postgresql: bool, namespace: str, rows) -> dict[tuple[str, str], str]:
    """``{(scope, key_normalized): id}`` of the live rows holding the keys of ``rows``."""
    by_scope: dict[str, list[str]] = {}
    for p in rows:
        by_scope.setdefault(p.scope, []).append(p.key_normalized)
    existing: dict[tuple[str, str], str] = {}
    for scope, keys in sorted(by_scope.items()):
        if postgresql:
            cursor.execute(_PG_LIVE_IDS, [keys, namespace, scope])
        else:
            # Scope named, so the partial unique index serves the lookup: with the
            # namespace alone SQLite scans the whole namespace, once per chunk.
            cursor.execute(
                "SELECT key_normalized, id FROM memories WHERE namespace = %s AND scope = %s "
                f"AND key_normalized IN ({_marks(len(keys))}) AND deleted_at IS NULL",
                [namespace, scope, *keys],
            )
        existing.update(((scope, key), memory_id) for key, memory_id in cursor.fetchall())
    return existing


def _would_write(latest: dict[tuple[str, str, str, str], store.Prepared]) -> tuple[int, int]:
    """``(created, updated)`` an import of ``latest`` would write now: a dry run's counts.

    The same lookup of live keys as the write (:func:`_live_ids`), reading only.
    """
    by_store: dict[tuple[str, str], list[store.Prepared]] = {}
    for (using, namespace, _scope, _key), prepared in latest.items():
        by_store.setdefault((using, namespace), []).append(prepared)
    created = updated = 0
    for (using, namespace), rows in by_store.items():
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
    """Insert or update one chunk of prepared rows, with their events.

    The same rows, columns and events as the ORM version wrote: a new key gets a fresh
    id and ``created_at == updated_at ==`` the chunk's stamp; a key with a live row
    updates that row in place (id and ``created_at`` kept, ``subject`` set to this
    import's user, or kept when it has none); the events are the ``create`` ones in row
    order, then the ``update`` ones.
    """
    connection = connections[using]
    postgresql = vendor.for_connection(connection).bulk_copy
    stamp = _STAMP_FIELD.get_db_prep_value(now(), connection)
    inserts: list[tuple] = []
    updates: list[tuple] = []
    created: list[tuple[str, str]] = []
    updated: list[tuple[str, str]] = []
    details: dict[tuple[str, str], str] = {}
    with connection.cursor() as cursor:
        existing = _live_ids(cursor, postgresql, namespace, rows)
        for p in rows:
            detail = details.get((p.scope, p.source))
            if detail is None:
                detail = json.dumps({"scope": p.scope, "source": p.source, "via": "import"})
                details[(p.scope, p.source)] = detail
            memory_id = existing.get((p.scope, p.key_normalized))
            if memory_id is None:
                memory_id = new_id()
                inserts.append(
                    (memory_id, p.scope, p.key_normalized, p.type, p.title, p.content,
                     _dump_list(p.tags), _dump_list(p.keywords), p.source, p.confidence)
                )  # fmt: skip
                created.append((memory_id, detail))
            else:
                updates.append(
                    (p.type, p.title, p.content, _dump_list(p.tags), _dump_list(p.keywords),
                     p.source, p.confidence, memory_id)
                )  # fmt: skip
                updated.append((memory_id, detail))
        events = [(mid, "create", detail) for mid, detail in created]
        events += [(mid, "update", detail) for mid, detail in updated]
        if postgresql:
            chunk = (namespace, subject, _SENSITIVITY, stamp, stamp)
            for start in range(0, len(inserts), _PG_BATCH):
                # One COPY per batch: one firing of the statement-level trigger, as before.
                batch = [row + chunk for row in inserts[start : start + _PG_BATCH]]
                _copy_rows(connection, cursor, _PG_COPY_MEMORY, batch)
            for start in range(0, len(updates), _PG_BATCH):
                columns = _columns(updates, start, start + _PG_BATCH)
                cursor.execute(_PG_UPDATE_MEMORY, [subject, stamp, *columns, namespace])
            event_chunk = (stamp, namespace, actor)
            _copy_rows(
                connection, cursor, _PG_COPY_EVENT, (event + event_chunk for event in events)
            )
        else:
            chunk = (namespace, subject, _SENSITIVITY, stamp, stamp)
            if inserts:
                cursor.executemany(_INSERT_MEMORY, [row + chunk for row in inserts])
            if updates:
                cursor.executemany(
                    _UPDATE_MEMORY,
                    [(*row[:-1], subject, stamp, namespace, row[-1]) for row in updates],
                )
            event_chunk = (stamp, namespace, actor)
            cursor.executemany(_INSERT_EVENT, [event + event_chunk for event in events])
    return len(inserts), len(updates)
