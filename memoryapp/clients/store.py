"""``HttpMemoryStore``: Agentao's ``MemoryStore`` protocol over the HTTP API, one namespace.

An unmodified Agentao ``MemoryManager`` on another machine keeps its memory in
this service when given two of these (a project and a user namespace)::

    from agentao.memory import MemoryManager
    from memoryapp.clients.store import HttpMemoryStore

    mm = MemoryManager(
        project_store=HttpMemoryStore(url, token, "acme/web"),
        user_store=HttpMemoryStore(url, token, "acme/alice"),
    )

Each method answers as :class:`memoryapp.agentao.DjangoMemoryStore` does on the
server's database (the store endpoints run it there), with Agentao's own
dataclasses and timestamp text. It needs ``httpx`` and ``agentao``, never Django.

Failures Agentao's manager should survive — the service unreachable, failing,
throttled after the retries, or refusing the token (401, 403, or 404 for a
namespace outside its grants) — raise :class:`RemoteStoreError`, which is also
a ``sqlite3.OperationalError``: the manager then runs the turn without that
store's memories and reports why (``take_store_problems``), as it does for a
locked file. A refused write raises :class:`~memoryapp.clients.memory.Refused`.
"""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx

from memoryapp.clients.memory import MemoryClient, MemoryClientError, NotFound, Refused

if TYPE_CHECKING:
    from agentao.memory.models import MemoryRecord, MemoryReviewItem, SessionSummaryRecord

__all__ = ["HttpMemoryStore", "RemoteStoreError"]

_T = TypeVar("_T")
_PAGE = 500  # the API's largest page
_MAX_NEEDLE = 4000  # a search or tag longer than the longest stored text cannot match
_NOW_TOLERANCE = dt.timedelta(seconds=2)


class RemoteStoreError(MemoryClientError, sqlite3.OperationalError):
    """The memory service could not serve a store call (Agentao's manager degrades on it)."""


def _models():
    try:
        from agentao.memory import models
    except ImportError as exc:  # pragma: no cover - the Agentao runtime is the caller
        raise ImportError("HttpMemoryStore serves Agentao's runtime: pip install agentao") from exc
    return models


def _remote(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn transport failures and refusals of the token into :class:`RemoteStoreError`."""

    @functools.wraps(method)
    def wrapper(self: HttpMemoryStore, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except Refused:
            raise
        except MemoryClientError as exc:
            if isinstance(exc, NotFound):
                why = f"namespace {self.namespace!r} is not granted to this token (or unknown)"
            else:
                why = str(exc)
            raise RemoteStoreError(
                f"memory service {self.base_url}: {why}", status=exc.status, body=exc.body
            ) from exc
        except httpx.HTTPError as exc:
            raise RemoteStoreError(
                f"memory service {self.base_url} unreachable: {type(exc).__name__}: {exc}"
            ) from exc

    return wrapper


def _stamp(text: str | None) -> str | None:
    """An API timestamp (ISO 8601, UTC) as Agentao's text: naive UTC, ``T``, µs when non-zero."""
    if not text:
        return None
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.isoformat()


def _sent_stamp(text: str | None) -> str:
    """``created_at`` as sent: Agentao's whole-second local "now" becomes '' (the server's now).

    Agentao stamps new rows with ``datetime.now()`` — local time, naive — while
    naive stamps are read as UTC: on a machine whose clock is not UTC, the
    stamp would be hours off on the server. Any other stamp is sent as given.
    """
    if not isinstance(text, str) or not text.strip():
        return ""
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return ""
    naive_whole_second = value.tzinfo is None and value.microsecond == 0
    if naive_whole_second and abs(dt.datetime.now() - value) < _NOW_TOLERANCE:
        return ""
    return text.strip()


def _storable(text: str) -> bool:
    """Whether ``text`` could be part of a stored value (no NUL, no lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _oldest_first(record: MemoryRecord) -> tuple:
    # DjangoMemoryStore's order: created_at, then (scope, key), unique among live rows.
    return (dt.datetime.fromisoformat(record.created_at), record.scope, record.key_normalized)


def _hit(record: MemoryRecord, needle: str) -> bool:
    """DjangoMemoryStore's search rule: a literal, case-folded substring of a stored text."""
    texts = [record.title, record.content, record.key_normalized, *record.tags, *record.keywords]
    return any(needle in str(t).lower() for t in texts)


class HttpMemoryStore:
    """Agentao's ``MemoryStore`` protocol on one namespace of a remote memory service.

    Args:
        base_url: the service, e.g. ``https://memory.example.com`` (the API is at ``/api/``).
        token: an API token granted the namespace (``manage.py memory client``).
        namespace: the namespace every call reads and writes (one store per
            namespace, as Agentao uses one file per store).
        subject: provenance written into new rows (the user key of the session).
        client: a :class:`~memoryapp.clients.memory.MemoryClient` to share (then
            ``base_url`` and ``token`` may be None and ``close`` leaves it open).
        timeout, retries, transport: as for :class:`~memoryapp.clients.memory.MemoryClient`.
    """

    def __init__(
        self,
        base_url: str | None,
        token: str | None,
        namespace: str = "",
        *,
        subject: str | None = None,
        client: MemoryClient | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not isinstance(namespace, str):
            raise TypeError("namespace must be a string")
        if client is None:
            if base_url is None or token is None:
                raise TypeError("HttpMemoryStore needs base_url and token, or a client")
            client = MemoryClient(
                base_url, token, timeout=timeout, retries=retries, transport=transport
            )
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client
        self.base_url = str(client._http.base_url).removesuffix("/api/")
        self.namespace = namespace
        self.subject = subject
        # Read by Agentao's MemoryManager: set when a store stands in for one that
        # could not be opened. A remote store never does that.
        self.fallback_reason: str | None = None

    def __repr__(self) -> str:
        return f"HttpMemoryStore({self.base_url!r}, namespace={self.namespace!r})"

    # ------------------------------------------------------------ plumbing
    def _call(self, method: str, path: str, **kwargs) -> Any:
        return self._client.call(method, path, **kwargs)

    def _pages(self, path: str, params: dict, limit: int | None = None) -> Iterator[dict]:
        """Every row of a list endpoint (at most ``limit``), page after page.

        :meth:`MemoryClient.pages` follows only the list's own next pages, at most
        ``max_pages`` of them: a server that keeps answering ``next`` cannot keep
        the store (and Agentao's turn) looping.
        """
        params = {**params, "namespace": self.namespace, "page_size": _PAGE}
        if limit is not None:
            params["page_size"] = max(1, min(limit, _PAGE))
        taken = 0
        for rows in self._client.pages(path, params):
            for row in rows:
                if limit is not None and taken >= limit:
                    return
                taken += 1
                yield row
            if limit is not None and taken >= limit:
                return

    def _body(self, **fields) -> dict:
        body = {"namespace": self.namespace, **fields}
        if self.subject is not None:
            body["subject"] = self.subject
        return body

    def _in_namespace(self) -> dict:
        return {"namespace": self.namespace}

    def _on_row(self, method: str, collection: str, row_id: str, action: str = "", **kwargs):
        """``(found, answer)`` of a call on one row of this namespace (by id).

        An id no row can have, or a 404 (unknown, or another namespace's), is not found.
        """
        if not isinstance(row_id, str) or not row_id or not _storable(row_id):
            return False, None
        path = f"{collection}/{quote(row_id, safe='')}/{action}"
        try:
            return True, self._call(method, path, params=self._in_namespace(), **kwargs)
        except NotFound:
            return False, None

    @staticmethod
    def _record(data: dict) -> MemoryRecord:
        return _models().MemoryRecord(
            id=data["id"],
            scope=data["scope"],
            type=data["type"],
            key_normalized=data["key_normalized"],
            title=data["title"],
            content=data["content"],
            tags=list(data["tags"]),
            keywords=list(data["keywords"]),
            source=data["source"],
            confidence=data["confidence"],
            sensitivity=data["sensitivity"],
            created_at=_stamp(data["created_at"]),
            updated_at=_stamp(data["updated_at"]),
            deleted_at=_stamp(data.get("deleted_at")),
        )

    @staticmethod
    def _summary(data: dict) -> SessionSummaryRecord:
        return _models().SessionSummaryRecord(
            id=data["id"],
            session_id=data["session_id"],
            summary_text=data["summary_text"],
            tokens_before=data["tokens_before"],
            messages_summarized=data["messages_summarized"],
            created_at=_stamp(data["created_at"]),
        )

    @staticmethod
    def _review_item(data: dict) -> MemoryReviewItem:
        return _models().MemoryReviewItem(
            id=data["id"],
            scope=data["scope"],
            type=data["type"],
            key_normalized=data["key_normalized"],
            title=data["title"],
            content=data["content"],
            tags=list(data["tags"]),
            evidence=data["evidence"],
            source_session=data["source_session"],
            occurrences=int(data["occurrences"]),
            confidence=data["confidence"],
            status=data["status"],
            created_at=_stamp(data["created_at"]),
            updated_at=_stamp(data["updated_at"]),
        )

    def _memories(self, **params) -> list[MemoryRecord]:
        rows = [self._record(r) for r in self._pages("memories/", params)]
        return sorted(rows, key=_oldest_first)

    # ------------------------------------------------------- memory CRUD (8)
    @_remote
    def upsert_memory(self, record: MemoryRecord) -> MemoryRecord:
        """Insert ``record``, or update the live row with its (scope, key) in place.

        The server runs its guard again; a refusal raises :class:`Refused`.
        """
        body = self._body(
            id=record.id or "",
            scope=record.scope,
            type=record.type,
            key_normalized=record.key_normalized,
            title=record.title,
            content=record.content,
            tags=list(record.tags or ()),
            keywords=list(record.keywords or ()),
            source=record.source,
            confidence=record.confidence,
            sensitivity=record.sensitivity,
            created_at=_sent_stamp(record.created_at),
        )
        return self._record(self._call("POST", "memories/records/", json=body))

    @_remote
    def get_memory_by_id(self, memory_id: str) -> MemoryRecord | None:
        """The live memory with this id in this namespace, else None."""
        found, data = self._on_row("GET", "memories", memory_id)
        return self._record(data) if found else None

    @_remote
    def get_memory_by_scope_key(self, scope: str, key_normalized: str) -> MemoryRecord | None:
        """The live memory with this (scope, key), else None."""
        params = {"scope": scope, "key_normalized": key_normalized}
        try:
            rows = list(self._pages("memories/", params, limit=1))
        except Refused:  # a scope or key no row can hold
            return None
        return self._record(rows[0]) if rows else None

    @_remote
    def list_memories(self, scope: str | None = None) -> list[MemoryRecord]:
        """Live memories of a scope (None or '' = all), oldest ``created_at`` first."""
        return self._memories(**({"scope": scope} if scope else {}))

    @_remote
    def search_memories(self, query: str, scope: str | None = None) -> list[MemoryRecord]:
        """Case-insensitive literal substring of title, content, key, a tag or a keyword.

        The server narrows by the stripped query; the exact rule (the query as
        given: an empty one matches every live row) is applied here.
        """
        if query is None:
            return []
        if len(query.strip()) > _MAX_NEEDLE or not _storable(query):
            return []
        params = {"q": query.strip(), **({"scope": scope} if scope else {})}
        needle = query.lower()
        return [r for r in self._memories(**params) if _hit(r, needle)]

    @_remote
    def filter_by_tag(self, tag: str, scope: str | None = None) -> list[MemoryRecord]:
        """Live memories carrying ``tag`` exactly, compared case-insensitively."""
        if tag is None:
            return []
        if len(tag) > _MAX_NEEDLE or not _storable(tag):
            return []
        params: dict[str, str] = {"scope": scope} if scope else {}
        if tag == tag.strip():  # else the server's (stripped) filter is no superset
            params["tag"] = tag
        wanted = tag.lower()
        return [
            r for r in self._memories(**params) if any(str(t).lower() == wanted for t in r.tags)
        ]

    @_remote
    def soft_delete_memory(self, memory_id: str) -> bool:
        """Soft-delete one live memory of this namespace; True if found."""
        return self._on_row("DELETE", "memories", memory_id)[0]

    @_remote
    def clear_memories(self, scope: str | None = None) -> int:
        """Soft-delete every live memory of a scope (None or '' = all); returns the count."""
        body = {"namespace": self.namespace, "scope": scope or None}
        return int(self._call("POST", "memories/clear/", json=body)["cleared"])

    # ---------------------------------------------------- session summaries (3)
    @_remote
    def save_session_summary(self, record: SessionSummaryRecord) -> None:
        """Store a summary (the server chooses its id and time, as the facade does)."""
        body = {
            "namespace": self.namespace,
            "subject": self.subject,
            "session_id": record.session_id,
            "summary": record.summary_text,
            "tokens_before": int(record.tokens_before or 0),
            "messages_summarized": int(record.messages_summarized or 0),
        }
        self._call("POST", "session-summaries/", json=body)

    @_remote
    def list_session_summaries(
        self, session_id: str | None = None, limit: int = 20
    ) -> list[SessionSummaryRecord]:
        """Summaries (of one session, or all), newest first; a negative or None limit: all."""
        if limit is not None and int(limit) == 0:
            return []
        bound = int(limit) if limit is not None and int(limit) > 0 else None
        params = {"order": "newest", **({"session_id": session_id} if session_id else {})}
        return [self._summary(r) for r in self._pages("session-summaries/", params, bound)]

    @_remote
    def clear_session_summaries(self, session_id: str | None = None) -> int:
        """Delete the summaries of one session (or, with None, all); returns the count."""
        body = {"namespace": self.namespace, "session_id": session_id or None}
        return int(self._call("POST", "session-summaries/clear/", json=body)["cleared"])

    # ----------------------------------------------------------- review queue (4)
    @_remote
    def upsert_review_item(self, item: MemoryReviewItem) -> MemoryReviewItem:
        """Insert a review item, or fold it into the pending one with the same (scope, key)."""
        body = self._body(
            id=item.id or "",
            scope=item.scope,
            type=item.type,
            key_normalized=item.key_normalized,
            title=item.title,
            content=item.content,
            tags=list(item.tags or ()),
            evidence=item.evidence or "",
            source_session=item.source_session or "",
            occurrences=int(item.occurrences or 0),
            confidence=item.confidence,
            status=item.status,
            created_at=_sent_stamp(item.created_at),
        )
        return self._review_item(self._call("POST", "review-items/records/", json=body))

    @_remote
    def get_review_item(self, item_id: str) -> MemoryReviewItem | None:
        """The review item with this id (any status) in this namespace, else None."""
        found, data = self._on_row("GET", "review-items", item_id)
        return self._review_item(data) if found else None

    @_remote
    def list_review_items(
        self, status: str | None = "pending", limit: int = 50
    ) -> list[MemoryReviewItem]:
        """Items of a status — most occurrences first, then newest — or (None) all, newest first."""
        if limit is not None and int(limit) == 0:
            return []
        bound = int(limit) if limit is not None and int(limit) > 0 else None
        params = {"status": status, "order": "occurrences"} if status else {"order": "newest"}
        try:
            return [self._review_item(r) for r in self._pages("review-items/", params, bound)]
        except Refused:  # a status no item can have
            return []

    @_remote
    def update_review_status(self, item_id: str, status: str) -> bool:
        """Set an item's status; False when this namespace has no such item."""
        found, _ = self._on_row("POST", "review-items", item_id, "status/", json={"status": status})
        return found

    # --------------------------------------------------------------- optional
    @_remote
    def change_version(self) -> int:
        """Changes whenever a memory of this namespace changes, by any writer anywhere."""
        data = self._call("GET", "memories/change-version/", params=self._in_namespace())
        return int(data["version"])

    def close(self) -> None:
        """Close the connection pool (unless the client was given); safe to call twice."""
        if self._owns_client:
            self._client.close()
