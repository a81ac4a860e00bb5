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

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = [
    "MemoryClient",
    "MemoryClientError",
    "NotFound",
    "PermissionDenied",
    "Refused",
    "RemoteCandidate",
    "RemoteMemory",
    "RemoteReviewItem",
    "RemoteSummary",
    "Throttled",
    "Unauthorized",
]

REFUSED_SECRET = "Refused to save: content appears to contain sensitive credentials"


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


@dataclass(frozen=True)
class RemoteCandidate:
    """A recall hit (the facade's ``RecallCandidate``)."""

    memory_id: str
    scope: str
    type: str
    title: str
    excerpt: str
    score: float
    reasons: list[str]


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
        project, user, session_id: the namespaces, as for ``MemoryManager``.
        timeout: seconds per request.
        retries: how many times a 429 is retried (after ``Retry-After``, at most 60 s).
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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.project, self.user, self.session_id = project, user, session_id
        self.retries = retries
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
        return {"project": self.project, "user": self.user, **extra}

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
            return f"Error saving memory: {reasons or exc}"
        except MemoryClientError as exc:
            return f"Error saving memory: {exc}"
        note = f" ({'; '.join(memory.warnings)})" if memory.warnings else ""
        return f"Saved memory: {memory.key_normalized}{note}"

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
        """Store the summary of one complete compaction of the session."""
        session = session_id or self.session_id
        if not session:
            raise ValueError("save_session_summary needs a session_id (here or on the client)")
        body = self._bound(
            session_id=session,
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
    def recall_turn(self, query: str, messages=None, top_k: int = 5) -> RecallTurn:
        """Candidates, stable block and context block of one turn, in one request."""
        body = self._bound(
            query=query, messages=list(messages or []), top_k=top_k, session_id=self.session_id
        )
        data = self._request("POST", "recall/", json=body)
        return RecallTurn(
            candidates=[_pick(RemoteCandidate, c) for c in data["candidates"]],
            stable_block=data["stable_block"],
            context_block=data["context_block"],
        )

    def recall(self, query: str, messages=None, top_k: int = 5) -> list[RemoteCandidate]:
        """The ``top_k`` memories scored against ``query``, highest first."""
        return self.recall_turn(query, messages, top_k).candidates

    def render_stable_block(self) -> str:
        """The stable prompt block (profile, preferences, recent project facts)."""
        return self.recall_turn("", top_k=1).stable_block

    def render_context_block(self, query: str, messages=None) -> str:
        """The context block for this turn's query."""
        return self.recall_turn(query, messages).context_block

    def list_memories(
        self, *, scope: str | None = None, q: str | None = None
    ) -> list[RemoteMemory]:
        """Every live memory of the project namespace (and the user's), all pages."""
        out: list[RemoteMemory] = []
        for namespace in [self.project, self.user] if self.user else [self.project]:
            params: dict[str, Any] = {"namespace": namespace}
            if scope:
                params["scope"] = scope
            if q:
                params["q"] = q
            path: str | None = "memories/"
            while path:
                data = self._request("GET", path, params=params)
                out.extend(RemoteMemory.from_api(row) for row in data["results"])
                path, params = _next_page(data.get("next")), {}
        return out


def _reasons(why: Any) -> str:
    return " ".join(map(str, why)) if isinstance(why, list) else str(why)


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("Retry-After", "1")), 0.0), 60.0)
    except ValueError:
        return 1.0


def _next_page(url: str | None) -> str | None:
    """The API's absolute ``next`` link, relative to ``/api/``."""
    if not url:
        return None
    return url.split("/api/", 1)[1]
