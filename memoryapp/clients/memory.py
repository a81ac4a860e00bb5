"""A client for agents on other machines: the facade's method names, over the HTTP API.

``MemoryClient(base_url, token, project=..., user=...)`` answers like
``MemoryManager(project=..., user=...)`` does in-process — ``save_memory``,
``recall``, ``render_stable_block``, ``render_context_block``,
``save_session_summary``, ``crystallize_user_messages`` — with typed results.
It needs only ``httpx`` (``pip install 'memoryapp[client]'``), never Django.

A 429 is retried after the server's ``Retry-After`` (up to ``retries`` times);
any other failure raises a :class:`MemoryClientError` subclass naming the
status and the server's reason.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from memoryapp.rules.tool_results import REFUSED_SECRET, RecallCandidate, save_failed, saved

__all__ = [
    "MemoryClient",
    "MemoryClientError",
    "NotFound",
    "PaginationError",
    "PermissionDenied",
    "Refused",
    "RemoteCandidate",
    "RemoteMemory",
    "RemoteReviewItem",
    "RemoteSummary",
    "Throttled",
    "Unauthorized",
]

MAX_PAGES = 1000  # a list longer than this (50,000 rows at the default page size) is an error
_POSITIVE = re.compile(r"[1-9][0-9]{0,8}")  # a page number, as the server reads one


# ------------------------------------------------------------------ errors
class MemoryClientError(Exception):
    """The API refused or failed a request; ``status`` and ``body`` say how."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class Refused(MemoryClientError):
    """400: the input was refused (``fields`` maps each field to its reasons)."""

    @property
    def fields(self) -> dict[str, list[str]]:
        body = self.body if isinstance(self.body, dict) else {}
        return {k: v if isinstance(v, list) else [str(v)] for k, v in body.items()}

    @property
    def is_secret(self) -> bool:
        """True when the refusal is the credential guard's."""
        return any("credential" in r for reasons in self.fields.values() for r in reasons)


class Unauthorized(MemoryClientError):
    """401: no token, or an unknown one."""


class PermissionDenied(MemoryClientError):
    """403: the token may not do this."""


class NotFound(MemoryClientError):
    """404: unknown, or outside the token's grants (the API does not tell them apart)."""


class Throttled(MemoryClientError):
    """429 after every retry."""


class PaginationError(MemoryClientError):
    """A list could not be read to its end safely.

    Its ``next`` link was not the same list's following page (another host or
    path, other filters, or a page that does not advance), or the list had more
    pages than the client's ``max_pages``. Never a silently shortened list.
    """


_BY_STATUS = {400: Refused, 401: Unauthorized, 403: PermissionDenied, 404: NotFound, 429: Throttled}


# ------------------------------------------------------------------ results
@dataclass(frozen=True)
class RemoteMemory:
    """A stored memory, as the API returns it."""

    id: str
    namespace: str
    scope: str
    type: str
    key_normalized: str
    title: str
    content: str
    tags: list[str]
    created_at: str
    updated_at: str
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_api(cls, data: dict) -> RemoteMemory:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


class RemoteCandidate(RecallCandidate):
    """A recall hit: the facade's :class:`~memoryapp.rules.tool_results.RecallCandidate`."""


@dataclass(frozen=True)
class RecallTurn:
    """One turn's recall: the candidates and both prompt blocks."""

    candidates: list[RemoteCandidate]
    stable_block: str
    context_block: str


@dataclass(frozen=True)
class RemoteSummary:
    """A stored session summary."""

    id: str
    session_id: str
    summary_text: str
    created_at: str


@dataclass(frozen=True)
class RemoteReviewItem:
    """A crystallizer candidate waiting in the review queue."""

    id: str
    scope: str
    type: str
    key_normalized: str
    title: str
    content: str
    occurrences: int
    status: str


def _pick(cls, data: dict):
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in data.items() if k in names})


# ------------------------------------------------------------------ client
class MemoryClient:
    """The memory of one agent (a project namespace, optionally a user) on a remote server.

    Args:
        base_url: the server, e.g. ``https://memory.example.com`` (the API is at ``/api/``).
        token: the API token (``manage.py memory client NAME --grant PREFIX`` prints one).
        project, user, session_id: the namespaces, as for ``MemoryManager`` (which
            also makes up a random session id when none is given).
        timeout: seconds per request.
        retries: how many times a 429 is retried (after ``Retry-After``, at most 60 s).
        max_pages: the most pages one list may take (:class:`PaginationError` beyond).
        transport: an ``httpx`` transport (tests).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        project: str = "",
        user: str | None = None,
        session_id: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        max_pages: int = MAX_PAGES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        # The facade's default (manager/sessions.py new_session_id), without importing Django.
        session_id = session_id or secrets.token_hex(6)
        self.project, self.user, self.session_id = project, user, session_id
        self.retries = retries
        self.max_pages = max_pages
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/",
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing
    def _bound(self, **extra) -> dict:
        return {"namespace": self.project, "subject": self.user, **extra}

    def call(self, method: str, path: str, **kwargs) -> Any:
        """One request to the API (``path`` relative to ``/api/``); the decoded JSON answer.

        ``kwargs`` go to ``httpx`` (``params``, ``json``). A 204 answers None; a
        failure raises the :class:`MemoryClientError` subclass of its status.
        """
        return self._request(method, path, **kwargs)

    def _request(self, method: str, path: str, **kwargs) -> Any:
        for attempt in range(self.retries + 1):
            response = self._http.request(method, path, **kwargs)
            if response.status_code != 429 or attempt == self.retries:
                break
            time.sleep(_retry_after(response))
        if response.status_code == 204:
            return None
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.is_success:
            return body
        error = _BY_STATUS.get(response.status_code, MemoryClientError)
        reason = body.get("detail") if isinstance(body, dict) else None
        if reason is None and isinstance(body, dict) and body:  # field-level errors
            reason = "; ".join(f"{name}: {_reasons(why)}" for name, why in body.items())
        raise error(
            f"{method} /api/{path}: {response.status_code} {reason or response.reason_phrase}",
            status=response.status_code,
            body=body,
        )

    # ------------------------------------------------------------ writes
    def upsert(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        *,
        scope: str | None = None,
        type: str | None = None,
    ) -> RemoteMemory:
        """Save a memory (update in place when the key exists); raises :class:`Refused`."""
        body = self._bound(key=key, value=value, tags=list(tags or ()), scope=scope, type=type)
        return RemoteMemory.from_api(self._request("POST", "memories/", json=body))

    def save_memory(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        scope: str | None = None,
        type: str | None = None,
    ) -> str:
        """The LLM tool, as the facade's: report in words, never raise for a refusal."""
        try:
            memory = self.upsert(key, value, tags, scope=scope, type=type)
        except Refused as exc:
            if exc.is_secret:
                return REFUSED_SECRET
            reasons = "; ".join(r for rs in exc.fields.values() for r in rs)
            return save_failed(reasons or exc)
        except MemoryClientError as exc:
            return save_failed(exc)
        return saved(memory.key_normalized, memory.warnings)

    def delete(self, memory_id: str) -> bool:
        """Soft-delete a memory; False when it was not there (or not visible)."""
        try:
            self._request("DELETE", f"memories/{memory_id}/")
        except NotFound:
            return False
        return True

    def save_session_summary(
        self,
        summary: str,
        *,
        session_id: str | None = None,
        tokens_before: int = 0,
        messages_summarized: int = 0,
    ) -> RemoteSummary:
        """Store the summary of one complete compaction (of the client's session by default)."""
        body = self._bound(
            session_id=session_id or self.session_id,
            summary=summary,
            tokens_before=tokens_before,
            messages_summarized=messages_summarized,
        )
        return _pick(RemoteSummary, self._request("POST", "session-summaries/", json=body))

    def crystallize_user_messages(self, messages: list[dict]) -> list[RemoteReviewItem]:
        """Queue the durable facts the user stated for an operator's review."""
        body = self._bound(session_id=self.session_id, messages=list(messages))
        data = self._request("POST", "crystallize/", json=body)
        return [_pick(RemoteReviewItem, item) for item in data["items"]]

    # ------------------------------------------------------------ reads
    def recall_turn(
        self, query: str, messages=None, top_k: int = 5, ranking: str | None = None
    ) -> RecallTurn:
        """Candidates, stable block and context block of one turn, in one request.

        ``ranking``: ``agentao``, ``hybrid`` or ``semantic``; None leaves it to the server's
        setting.
        """
        body = self._bound(
            query=query, messages=list(messages or []), top_k=top_k, session_id=self.session_id
        )
        if ranking is not None:
            body["ranking"] = ranking
        data = self._request("POST", "recall/", json=body)
        return RecallTurn(
            candidates=[_pick(RemoteCandidate, c) for c in data["candidates"]],
            stable_block=data["stable_block"],
            context_block=data["context_block"],
        )

    def recall(
        self, query: str, messages=None, top_k: int = 5, ranking: str | None = None
    ) -> list[RemoteCandidate]:
        """The ``top_k`` memories scored against ``query``, highest first."""
        return self.recall_turn(query, messages, top_k, ranking).candidates

    def render_stable_block(self) -> str:
        """The stable prompt block (profile, preferences, recent project facts)."""
        return self.recall_turn("", top_k=1).stable_block

    def render_context_block(self, query: str, messages=None) -> str:
        """The context block for this turn's query."""
        return self.recall_turn(query, messages).context_block

    def export(self, subject: str | None = None, *, namespace: str | None = None) -> dict:
        """Everything stored about a subject (user key), a namespace, or the subject's rows
        in that namespace: the JSON document of ``GET /api/exports/`` (GDPR access).

        The token needs the export right (staff holding ``export_memory``, or a client whose
        grant gives read in the namespaces); the server records the export. The subject
        travels in the query string, as the endpoint takes it: keep the server's access
        log free of query strings. Raises :class:`NotFound` for a namespace outside the
        token's grants, :class:`PermissionDenied` without the right.
        """
        if subject is None and namespace is None:
            raise ValueError("export needs a subject, a namespace, or both")
        params = {"subject": subject, "namespace": namespace}
        return self._request(
            "GET", "exports/", params={k: v for k, v in params.items() if v is not None}
        )

    def list_memories(
        self, *, scope: str | None = None, q: str | None = None
    ) -> list[RemoteMemory]:
        """Every live memory of the project namespace (and the user's), all pages."""
        out: list[RemoteMemory] = []
        for namespace in [self.project, self.user] if self.user else [self.project]:
            params = {"namespace": namespace, "scope": scope or None, "q": q or None}
            for rows in self.pages("memories/", params):
                out.extend(RemoteMemory.from_api(row) for row in rows)
        return out

    def pages(
        self, path: str, params: dict[str, Any] | None = None, *, max_pages: int | None = None
    ) -> Iterator[list[dict]]:
        """The rows of a list endpoint (``path`` relative to ``/api/``), one page at a time.

        Every request sends all of ``params`` (``None`` values are left out) itself:
        a ``next`` link is read only for its page number, and only when it is this
        list's own following page — the same host and path, the same parameters, a
        later page. Anything else raises :class:`PaginationError`, as does a list
        longer than ``max_pages`` (default: the client's): the loop always ends, and
        never on rows of a list that was not asked for.
        """
        params = {k: v for k, v in (params or {}).items() if v is not None}
        if "page" in params or "?" in path:
            raise ValueError("pages() takes the filters in params, and no 'page'")
        bound = self.max_pages if max_pages is None else max_pages
        url = self._http.build_request("GET", path).url
        query, page = dict(params), 1
        for _ in range(bound):
            data = self._request("GET", path, params=query)
            if not isinstance(data, dict) or not isinstance(data.get("results"), list):
                raise MemoryClientError(f"GET /api/{path}: the answer is not a page of rows")
            yield data["results"]
            if not data.get("next"):
                return
            page = _following_page(url, params, page, data["next"], path)
            query = {**params, "page": page}
        raise PaginationError(
            f"GET /api/{path}: more than {bound} pages; narrow the filters or raise max_pages"
        )


def _reasons(why: Any) -> str:
    return " ".join(map(str, why)) if isinstance(why, list) else str(why)


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.0), 60.0)
    except ValueError:
        return 1.0


def _following_page(url: httpx.URL, params: dict, page: int, link: Any, path: str) -> int:
    """The page number of a list's ``next`` link, checked to be the list's following page.

    The link must name the list's own host and path (its scheme may differ: a
    proxy that terminates TLS often makes the server build ``http://`` links), the
    very parameters the client sent, and a page after ``page``. The link itself is
    never requested, and never quoted in the error: it holds the filters' values.
    """
    why = None
    try:
        target = url.join(link) if isinstance(link, str) else None
    except httpx.InvalidURL:
        target = None
    if target is None:
        why = "is not a URL"
    elif (target.host, target.port, target.path) != (url.host, url.port, url.path):
        why = "points to another host or path"
    else:
        sent = sorted(httpx.QueryParams(params).multi_items())
        kept = sorted((k, v) for k, v in target.params.multi_items() if k != "page")
        number = target.params.get_list("page")
        if kept != sent:
            why = "does not keep the list's parameters"
        elif len(number) != 1 or not _POSITIVE.fullmatch(number[0]) or int(number[0]) <= page:
            why = "does not advance to a later page"
        else:
            return int(number[0])
    raise PaginationError(f"GET /api/{path}: the next-page link {why}; stopped at page {page}")
