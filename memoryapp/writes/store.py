"""Write operations on the memory tables: upsert, soft delete, clear, events and the auto cap.

Every function takes the database alias explicitly; none knows about HTTP,
the admin or the facade. Multi-row writes run in one transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memoryapp.db import vendor
from memoryapp.fields import now
from memoryapp.models import Memory, MemoryEvent, Source, dump_list
from memoryapp.rules.classify import default_confidence, extract_keywords, infer_scope, infer_type
from memoryapp.rules.errors import MemoryValidationError, about
from memoryapp.rules.guard import MemoryGuard
from memoryapp.rules.validation import clean_tags
from memoryapp.writes import live


@dataclass(frozen=True)
class UpsertResult:
    """The row written, whether it was new, the ids the auto cap soft-deleted, and
    what the caller should be told (``warnings``: fixed sentences, never the text)."""

    memory: Memory
    created: bool
    capped: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def log_event(
    using: str,
    memory_id: str,
    event_type: str,
    *,
    namespace: str = "",
    actor: str = "",
    **detail,
) -> None:
    """Append one audit event. ``detail`` holds ids, labels and counts — never content."""
    MemoryEvent.objects.using(using).create(
        memory_id=memory_id,
        event_type=event_type,
        namespace=namespace,
        actor=actor,
        detail=json.dumps(detail, sort_keys=True) if detail else None,
    )


@dataclass(frozen=True)
class Prepared:
    """A validated, classified memory, ready to be written (the guard has run)."""

    key_normalized: str
    title: str
    content: str
    scope: str
    type: str
    source: str
    confidence: str
    tags: tuple[str, ...]
    keywords: tuple[str, ...]
    scope_explicit: bool


def prepare(
    guard: MemoryGuard,
    key: str,
    value: str,
    tags: Iterable[str] | None = (),
    scope: str | None = None,
    type: str | None = None,
    source: str = Source.EXPLICIT,
    title: str | None = None,
) -> Prepared:
    """Run the guard and the classification of docs/behaviour.md §2 (no database access).

    ``title`` replaces the title derived from the key (an approved review item keeps
    its readable title); it passes the guard as the key does.

    Raises:
        MemoryValidationError: bad key, title, content, tags, scope, type or source;
            its ``field`` names the input.
        SensitiveMemoryError: the key, the content or a tag looks like a credential;
            its ``field`` names the input.
    """
    if source not in Source.values:
        raise MemoryValidationError(f"Unknown memory source: {source!r}", field="source")
    key_normalized, key_title, content = guard.check(key, value)
    if title is None:
        title = key_title
    else:
        with about("title"):
            title = guard.validate_title(title)
            if not title:
                raise MemoryValidationError("Title must not be empty")
            guard.detect_sensitive(title)
    with about("tags"):
        tag_list = clean_tags(tags)
        for tag in tag_list:  # tags are stored, shown and copied into keywords like content
            guard.detect_sensitive(tag)
    with about("scope"):
        scope_chosen = infer_scope(key_normalized, tag_list, scope)
    with about("type"):
        type_chosen = infer_type(tag_list, type)
    return Prepared(
        key_normalized=key_normalized,
        title=title,
        content=content,
        scope=scope_chosen,
        type=type_chosen,
        source=source,
        confidence=default_confidence(source),
        tags=tuple(tag_list),
        keywords=tuple(extract_keywords(title, content, tag_list)),
        scope_explicit=scope is not None,
    )


def write(
    prepared: Prepared,
    *,
    using: str,
    namespace: str,
    subject: str | None = None,
    actor: str = "",
    savepoint: bool = True,
) -> UpsertResult:
    """Insert the memory, or update the live row with the same (namespace, scope, key).

    Same key: same id, ``created_at`` kept, ``updated_at`` moves, an ``update``
    event; a new row logs ``create``. Safe under concurrency: on SQLite the
    IMMEDIATE transaction serialises writers; on PostgreSQL a lost insert race
    (the partial unique index) falls back to updating the winner's row.

    ``savepoint=False`` (for a caller whose own transaction is rolled back on
    any error, as the facade's ``change_window`` is) saves the savepoint pair
    a nested call would otherwise cost.
    """
    p = prepared
    stamp = now()
    row = live.Row(
        p.scope, p.key_normalized, p.type, p.title, p.content, dump_list(p.tags),
        dump_list(p.keywords), p.source, p.confidence,
        json.dumps({"scope": p.scope, "source": p.source, "type": p.type}, sort_keys=True),
    )  # fmt: skip
    with (
        transaction.atomic(using=using, savepoint=savepoint),
        connections[using].cursor() as cursor,
    ):
        (written,) = live.upsert_rows(
            cursor, using=using, namespace=namespace, rows=[row], subject=subject, actor=actor,
            stamp=stamp, lock=True,
        )  # fmt: skip
        memory = Memory(
            id=written.id, namespace=namespace, subject=written.subject, scope=p.scope,
            key_normalized=p.key_normalized, type=p.type, title=p.title, content=p.content,
            tags_json=row.tags_json, keywords_json=row.keywords_json, source=p.source,
            confidence=p.confidence, sensitivity="normal", created_at=_aware(written.created_at),
            updated_at=stamp, deleted_at=None,
        )  # fmt: skip
        memory._state.adding, memory._state.db = False, using
        capped = (
            enforce_auto_cap(using, namespace, p.scope, actor=actor)
            if p.source == Source.AUTO
            else []
        )
    return UpsertResult(memory, written.created, tuple(capped))


_INSERT_EVENT = (
    "INSERT INTO memory_events (memory_id, event_type, timestamp, detail, namespace, actor) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_STAMP_FIELD = Memory._meta.get_field("updated_at")
_IDS_PER_STATEMENT = 500  # well under every vendor's bound-parameter limit


def _aware(value) -> dt.datetime:
    """A timestamp read by raw SQL as an aware UTC datetime (SQLite gives naive or text)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if timezone.is_naive(value):
        value = value.replace(tzinfo=dt.UTC)
    return value


def enforce_auto_cap(using: str, namespace: str, scope: str, *, actor: str = "") -> list[str]:
    """Soft-delete the least recently updated ``auto`` memories past the cap; returns their ids."""
    from memoryapp.conf import auto_source_cap

    cap = auto_source_cap()
    auto = (
        Memory.objects.using(using)
        .live()
        .filter(namespace=namespace, scope=scope, source=Source.AUTO)
        .order_by("-updated_at", "-id")
    )
    excess = list(auto.values_list("id", flat=True)[cap:])
    return soft_delete_ids(using, namespace, excess, actor=actor, reason="auto_cap")


def soft_delete_ids(
    using: str, namespace: str | None, ids: Iterable[str], *, actor: str = "", reason: str = ""
) -> list[str]:
    """Soft-delete the live rows among ``ids`` (within ``namespace`` unless None); logs each.

    Returns the ids actually deleted (those that were live), in the order given.
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return []
    position = {memory_id: i for i, memory_id in enumerate(wanted)}
    beside = vendor.for_connection(connections[using]).namespace_beside_ids
    in_namespace = "" if namespace is None else f" AND {beside}"
    with transaction.atomic(using=using):
        victims: list[tuple] = []
        for start in range(0, len(wanted), _IDS_PER_STATEMENT):
            chunk = wanted[start : start + _IDS_PER_STATEMENT]
            marks = ", ".join(["%s"] * len(chunk))
            params = chunk if namespace is None else [*chunk, namespace]
            victims += _soft_delete_where(
                using, f"id IN ({marks}){in_namespace}", params, actor=actor, reason=reason
            )
    victims.sort(key=lambda victim: position[victim[0]])
    return [victim[0] for victim in victims]


def clear(using: str, namespace: str, scopes: Iterable[str], *, actor: str = "") -> list[str]:
    """Soft-delete every live row of ``scopes`` in ``namespace``; returns their ids.

    One statement however many rows (a wipe of 100,000 memories included); the
    ids come back oldest first.
    """
    scopes = list(scopes)
    if not scopes:
        return []
    marks = ", ".join(["%s"] * len(scopes))
    with transaction.atomic(using=using):
        victims = _soft_delete_where(
            using,
            f"namespace = %s AND scope IN ({marks})",
            [namespace, *scopes],
            actor=actor,
            reason="clear",
        )
    victims.sort(key=lambda victim: (victim[2], victim[0]))
    return [victim[0] for victim in victims]


def _soft_delete_where(
    using: str, where: str, params: list, *, actor: str, reason: str
) -> list[tuple]:
    """Soft-delete the live rows matching ``where``; one ``soft_delete`` event each.

    Plain SQL with ``RETURNING`` (SQLite 3.35+, PostgreSQL): the rows are marked
    and named in one statement, and their events go in with one ``executemany``
    (the ORM's per-object ``bulk_create`` cost seconds at 100,000 rows). Returns
    ``(id, namespace, created_at)`` per row. Must run inside a transaction.
    """
    connection = connections[using]
    sql_stamp = _STAMP_FIELD.get_db_prep_value(now(), connection)
    detail = json.dumps({"reason": reason}) if reason else None
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories SET deleted_at = %s, updated_at = %s "
            f"WHERE deleted_at IS NULL AND {where} RETURNING id, namespace, created_at",
            [sql_stamp, sql_stamp, *params],
        )
        victims = cursor.fetchall()
        if victims:
            cursor.executemany(
                _INSERT_EVENT,
                [(mid, "soft_delete", sql_stamp, detail, ns, actor) for mid, ns, _ in victims],
            )
    return victims


def _key_taken(key_normalized: str) -> str:
    """Why a soft-deleted memory cannot be restored: a live row holds its key."""
    return (
        f"A live memory with the key {key_normalized!r} already exists in this "
        "namespace and scope; delete or rename it first."
    )


def restore(using: str, memory_id: str, *, actor: str = "") -> Memory:
    """Undo a soft delete (admin). Refuses when a live row already holds the same key."""
    with transaction.atomic(using=using):
        row = Memory.objects.using(using).select_for_update().get(pk=memory_id)
        if row.deleted_at is None:
            return row
        clash = (
            Memory.objects.using(using)
            .live()
            .filter(namespace=row.namespace, scope=row.scope, key_normalized=row.key_normalized)
            .exists()
        )
        if clash:
            raise MemoryValidationError(_key_taken(row.key_normalized))
        row.deleted_at = None
        row.updated_at = now()
        row.save(using=using, update_fields=["deleted_at", "updated_at"])
        log_event(using, row.id, "restore", namespace=row.namespace, actor=actor)
    return row


def restore_ids(
    using: str, ids: Iterable[str], *, actor: str = ""
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Undo the soft delete of the deleted rows among ``ids``, in the order given; logs each.

    :func:`restore` for many rows (the admin's "Select all"): the same rule, a
    row whose key a live row of its namespace and scope holds stays deleted and
    is reported, where a row restored earlier in the same call counts as live.
    Four statements per 500 rows (the events in one ``executemany``) instead of
    five per row, in one transaction.
    Returns the restored ids and ``(id, title, reason)`` per refused row.
    """
    wanted = list(dict.fromkeys(ids))
    restored: list[str] = []
    refused: list[tuple[str, str, str]] = []
    with transaction.atomic(using=using):
        for start in range(0, len(wanted), _IDS_PER_STATEMENT):
            _restore_chunk(
                using, wanted[start : start + _IDS_PER_STATEMENT], actor, restored, refused
            )
    return restored, refused


def _restore_chunk(using: str, chunk: list[str], actor: str, restored: list, refused: list):
    """Restore one chunk of :func:`restore_ids` (appends to ``restored`` and ``refused``)."""
    rows = {
        m.id: m
        for m in Memory.objects.using(using)
        .select_for_update()
        .filter(pk__in=chunk, deleted_at__isnull=False)
        .only("id", "namespace", "scope", "key_normalized", "title")
    }
    keys = {(m.namespace, m.scope, m.key_normalized) for m in rows.values()}
    live = Memory.objects.using(using).live()
    taken = keys & set(
        live.filter(
            namespace__in={k[0] for k in keys}, key_normalized__in={k[2] for k in keys}
        ).values_list("namespace", "scope", "key_normalized")
    )
    back = []
    for memory_id in chunk:
        row = rows.get(memory_id)
        if row is None:
            continue  # live already, or gone
        key = (row.namespace, row.scope, row.key_normalized)
        if key in taken:
            refused.append((row.id, row.title, _key_taken(row.key_normalized)))
            continue
        taken.add(key)  # a later row of the same key clashes with this one
        back.append(row)
    if not back:
        return
    connection = connections[using]
    sql_stamp = _STAMP_FIELD.get_db_prep_value(now(), connection)
    marks = ", ".join(["%s"] * len(back))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories SET deleted_at = NULL, updated_at = %s "
            f"WHERE deleted_at IS NOT NULL AND id IN ({marks})",
            [sql_stamp, *(row.id for row in back)],
        )
        cursor.executemany(
            _INSERT_EVENT,
            [(row.id, "restore", sql_stamp, None, row.namespace, actor) for row in back],
        )
    restored.extend(row.id for row in back)


__all__ = [
    "Prepared",
    "UpsertResult",
    "clear",
    "enforce_auto_cap",
    "log_event",
    "restore",
    "restore_ids",
    "soft_delete_ids",
    "prepare",
    "write",
]
