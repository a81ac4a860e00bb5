"""The core of the facade: stores, writes, reads, deletes, wipe, summaries, versions."""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, transaction
from django.db.models import Q

from .. import bulk, ephemeral, guards, search, store, validation
from ..conf import get_guard, user_database
from ..db.meta import read_change_counter
from ..indexes import INDEXES, change_window
from ..models import Memory, Scope, SessionSummary, Source
from .blocks import PromptBlocks
from .queue import ReviewQueue
from .types import StoreSlice, WipeResult

logger = logging.getLogger("memoryapp.manager")

SUMMARY_TAIL_WINDOW = 10  # latest summaries the cross-session tail looks at (docs/behaviour.md §4)


SCOPE_DOWNGRADE_WARNING = (
    "User scope was asked for, but no user namespace was given: "
    "the memory was stored in the project scope."
)


class MemoryManager(PromptBlocks, ReviewQueue):
    """The long-term memory of one agent session (docs/behaviour.md §13).

    Args:
        project: the project namespace (``""`` = single-tenant, Agentao-compatible).
        user: the user namespace, or ``None`` for no user scope (user-scope
            writes then land in the project scope).
        using: database alias of the project store (default ``"default"``).
        user_using: database alias of the user store (default
            ``MEMORYAPP_USER_DATABASE``, else ``using``).
        session_id: the current session id; a fresh random one when omitted.
        guard: the :class:`~memoryapp.guards.MemoryGuard` to validate with;
            default the ``MEMORYAPP_GUARD`` class.
    """

    #: The class of :meth:`child`'s managers: :class:`~memoryapp.manager.children.ChildManager`,
    #: set by ``manager/__init__.py``. Injected, not imported: it subclasses this class, so
    #: ``core`` importing ``children`` would be an import cycle.
    _child_class: type[MemoryManager]
    # A child's route to its parent's save_memory (set by child(); read by ChildManager).
    _route: Callable[..., Any] | None

    # Set by ephemeral() and child() only: close() discards the throw-away rows.
    _finalizer: weakref.finalize[..., MemoryManager]

    def __init__(
        self,
        project: str = "",
        user: str | None = None,
        *,
        using: str | None = None,
        user_using: str | None = None,
        session_id: str | None = None,
        guard: guards.MemoryGuard | None = None,
    ) -> None:
        if not isinstance(project, str):
            raise guards.MemoryValidationError("project namespace must be a string")
        if user is not None and not isinstance(user, str):
            raise guards.MemoryValidationError("user namespace must be a string or None")
        # One rule at every entry point (Python, admin, API, CLI): stripped, bounded,
        # no control characters or path tricks; nothing invalid reaches the database.
        project = validation.check_namespace(project, "project namespace")
        if user is not None:
            user = validation.check_namespace(user, "user namespace")
        if isinstance(session_id, str):
            validation.check_stored_key(session_id, "session id")
        self.project = project
        self.user = user
        self.using = using or DEFAULT_DB_ALIAS
        self.user_using = user_using or user_database() or self.using
        self.guard = guard or get_guard()
        self.session_id: str = (
            session_id if isinstance(session_id, str) and session_id else _new_session_id()
        )
        self.write_version = 0
        self._problems: dict[str, str] = {}
        self._stable_cache: tuple[int, str, list[str]] | None = None
        self._reported: set[str] = set()
        self._read_failures = 0
        # Recall's own counters, as Agentao's retriever keeps them for "/memory status".
        self.recall_count = 0  # candidates returned, this manager's lifetime
        self.recall_error_count = 0
        self.last_recall_error: str | None = None
        self._project_store = StoreSlice("project store", self.using, project, Scope.PROJECT)
        self._user_store = (
            StoreSlice("user store", self.user_using, user, Scope.USER)
            if user is not None
            else None
        )

    def __repr__(self) -> str:
        return f"MemoryManager(project={self.project!r}, user={self.user!r}, using={self.using!r})"

    # ----------------------------------------------------------------- stores
    def _stores(self, scope: str | None = None) -> list[StoreSlice]:
        if scope is not None and scope not in guards.SCOPES:
            raise guards.MemoryValidationError(
                f"Unknown scope {scope!r}: expected one of {', '.join(guards.SCOPES)}"
            )
        stores = [self._project_store]
        if self._user_store is not None:
            stores.append(self._user_store)
        return [s for s in stores if scope is None or s.scope == scope]

    def _store_for(self, scope: str) -> StoreSlice:
        return self._user_store if scope == Scope.USER and self._user_store else self._project_store

    def _live_filter(self, stores: list[StoreSlice]) -> dict[str, Q]:
        """One OR-ed filter per database alias, so two stores on one database cost one query."""
        by_alias: dict[str, Q] = {}
        for s in stores:
            q = Q(namespace=s.namespace, scope=s.scope)
            by_alias[s.using] = by_alias[s.using] | q if s.using in by_alias else q
        return by_alias

    def _query(self, scope: str | None, refine=None) -> list[Memory]:
        """Live rows of the selected stores, ordered by ``created_at``."""
        rows: list[Memory] = []
        filters = self._live_filter(self._stores(scope))
        for alias, q in filters.items():
            qs = Memory.objects.using(alias).live().filter(q)
            if refine is not None:
                qs = refine(qs, alias)
            rows.extend(qs.order_by("created_at", "id"))
        if len(filters) > 1:
            rows.sort(key=lambda m: (m.created_at, m.id))
        return rows

    def _guarded_read(self, stores: list[StoreSlice], read, empty):
        """Run a turn-path read; a database error records a store problem and yields ``empty``."""
        try:
            result = read()
        except DatabaseError as exc:
            self._read_failures += 1
            for s in stores:
                self._record_problem(s, exc)
            return empty
        for s in stores:
            self._problems.pop(s.label, None)
            self._reported.discard(s.label)
        return result

    def _record_problem(self, s: StoreSlice, exc: Exception) -> None:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        message = f"The {s.label} (database {s.using!r}) could not be read: {first_line}"
        if s.label not in self._problems:
            # One warning per outage, not one per turn.
            logger.warning("memory %s unavailable: %s", s.label, type(exc).__name__)
        self._problems[s.label] = message

    @property
    def read_failures(self) -> int:
        """How many turn-path reads have failed (it moves on every failure), as Agentao's.

        A cache built from a failed read compares it before and after, so it does
        not keep an empty answer once the store reads again.
        """
        return self._read_failures

    def note_store_problem(self, label: str, message: str) -> bool:
        """Record that the ``label`` store (``"project"``/``"user"``) is unusable.

        Agentao's host calls it for a store it could not open. The first message
        per store is kept (True when this call recorded it); it is reported once by
        :meth:`take_store_problems` and, unlike a failed read, is not cleared by a
        later successful one: the host said the store is unusable.
        """
        key = f"noted:{label}"
        if key in self._problems:
            return False
        self._problems[key] = str(message)
        return True

    def take_store_problems(self) -> list[str]:
        """Messages about stores that could not be read, each told once (docs/behaviour.md §11)."""
        fresh = [msg for label, msg in self._problems.items() if label not in self._reported]
        self._reported.update(label for label in self._problems)
        return fresh

    # ----------------------------------------------------------------- writes
    def _downgrade(self, prepared: store.Prepared) -> store.Prepared:
        """No user store: a user-scope write lands in the project scope (docs/behaviour.md §2).

        The log lines never carry the key or the value.
        """
        if prepared.scope != Scope.USER or self._user_store is not None:
            return prepared
        if prepared.scope_explicit:
            logger.warning(
                "user scope requested but this manager has no user store; "
                "the memory was saved in the project scope"
            )
        else:
            logger.debug("inferred user scope without a user store; saved in the project scope")
        return replace(prepared, scope=Scope.PROJECT)

    def upsert(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        scope: str | None = None,
        type: str | None = None,
        source: str = Source.EXPLICIT,
        *,
        actor: str = "",
    ) -> Memory:
        """Validate, classify and save a memory (docs/behaviour.md §2); a known key is updated.

        Raises:
            MemoryValidationError: invalid key, content, scope, type or tags.
            SensitiveMemoryError: the content looks like a credential.
        """
        return self.upsert_result(key, value, tags, scope, type, source, actor=actor).memory

    def upsert_result(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        scope: str | None = None,
        type: str | None = None,
        source: str = Source.EXPLICIT,
        *,
        actor: str = "",
    ) -> store.UpsertResult:
        """:meth:`upsert`, also telling whether the row was created (the API's 201 vs 200)."""
        asked = store.prepare(self.guard, key, value, tags, scope, type, source)
        prepared = self._downgrade(asked)
        target = self._store_for(prepared.scope)
        with change_window(target.using, [(target.namespace, target.scope)]) as window:
            result = store.write(
                prepared,
                using=target.using,
                namespace=target.namespace,
                subject=self.user,
                actor=actor,
                savepoint=False,  # change_window rolls back on any error
            )
        INDEXES.apply_own_write(
            window, target.namespace, target.scope, [result.memory], result.capped
        )
        self._wrote()
        warnings = []
        if validation.key_is_cut(key):
            warnings.append(validation.KEY_CUT_WARNING)
        if asked.scope_explicit and asked.scope != prepared.scope:
            warnings.append(SCOPE_DOWNGRADE_WARNING)
        return replace(result, warnings=tuple(warnings)) if warnings else result

    def import_memories(
        self,
        records,
        *,
        actor: str = "",
        skip_invalid: bool = False,
        dry_run: bool = False,
        progress=None,
        analyze: bool = True,
    ) -> bulk.ImportReport:
        """Bulk-import ``(line number, record dict)`` pairs (see :mod:`memoryapp.bulk`).

        Each record is guarded and classified like :meth:`upsert`; nothing is
        written when one is invalid unless ``skip_invalid``.
        """

        def resolve(prepared):
            prepared = self._downgrade(prepared)
            target = self._store_for(prepared.scope)
            return prepared, bulk.ImportTarget(target.using, target.namespace)

        report = bulk.import_records(
            records,
            guard=self.guard,
            resolve=resolve,
            subject=self.user,
            actor=actor,
            skip_invalid=skip_invalid,
            dry_run=dry_run,
            progress=progress,
            analyze=analyze,
        )
        if report.written:
            self._wrote()
        return report

    def save_memory(
        self,
        key: str,
        value: str,
        tags: Iterable[str] | None = (),
        scope: str | None = None,
        type: str | None = None,
    ) -> str:
        """The LLM tool: save and report in words; never raises."""
        try:
            memory = self.upsert(key, value, tags, scope=scope, type=type, source=Source.EXPLICIT)
        except guards.SensitiveMemoryError:
            return "Refused to save: content appears to contain sensitive credentials"
        except Exception as exc:  # the model gets the reason, the turn goes on
            return f"Error saving memory: {_reason(exc)}"
        if validation.key_is_cut(key):
            return (
                f"Saved memory: {memory.key_normalized} (the key was cut to its first "
                f"{validation.MAX_KEY_CHARS} characters)"
            )
        return f"Saved memory: {memory.key_normalized}"

    def _wrote(self) -> None:
        self.write_version += 1

    # ------------------------------------------------------------------ reads
    def get_entry(self, memory_id: str) -> Memory | None:
        """The live memory with this id in one of this manager's stores, else None."""
        memory_id = validation.check_id(memory_id)
        for alias, q in self._live_filter(self._stores()).items():
            row = Memory.objects.using(alias).live().filter(q, pk=memory_id).first()
            if row is not None:
                return row
        return None

    def get_all_entries(self, scope: str | None = None) -> list[Memory]:
        """Live memories of a scope (None = both), ordered by ``created_at``.

        A store that cannot be read counts as empty and is reported once
        through :meth:`take_store_problems`.
        """
        stores = self._stores(scope)
        return self._guarded_read(stores, lambda: self._query(scope), [])

    def search(self, query: str, scope: str | None = None) -> list[Memory]:
        """Case-insensitive literal substring search over title, content, key, tags, keywords."""
        if not isinstance(query, str) or not query.strip():
            return []
        needle = validation.check_query(query).strip().lower()
        refine = search.sql_narrowing("search_prefilter", needle)
        return [m for m in self._query(scope, refine) if search.matches(m, needle)]

    def filter_by_tag(self, tag: str, scope: str | None = None) -> list[Memory]:
        """Memories carrying ``tag`` exactly (case-insensitive)."""
        if not isinstance(tag, str) or not tag.strip():
            return []
        wanted = validation.check_query(tag, "Tag filter").strip().lower()
        refine = search.sql_narrowing("tagged_prefilter", wanted)
        return [m for m in self._query(scope, refine) if wanted in {t.lower() for t in m.tags}]

    # ---------------------------------------------------------- delete, clear
    def delete(self, memory_id: str, *, actor: str = "") -> bool:
        """Soft-delete one memory; True if a live row was found (docs/behaviour.md §3)."""
        memory_id = validation.check_id(memory_id)
        for s in self._stores():
            if self._soft_delete(s, [memory_id], actor=actor):
                self._wrote()
                return True
        return False

    def _soft_delete(
        self, s: StoreSlice, ids: list[str], *, actor: str = "", reason: str = ""
    ) -> int:
        """Soft-delete ids of one store; keeps a cached recall index current."""
        if not ids:
            return 0
        with change_window(s.using, [(s.namespace, s.scope)]) as window:
            victims = store.soft_delete_ids(s.using, s.namespace, ids, actor=actor, reason=reason)
        INDEXES.apply_own_write(window, s.namespace, s.scope, removed=victims)
        return len(victims)

    def delete_by_title(self, title: str, *, actor: str = "") -> int:
        """Soft-delete every live memory whose title matches case-insensitively; the count."""
        if not isinstance(title, str) or not title.strip():
            return 0
        wanted = title.strip().lower()
        victims = [m for m in self._query(None) if m.title.strip().lower() == wanted]
        count = 0
        for s in self._stores():
            ids = [m.id for m in victims if m.namespace == s.namespace and m.scope == s.scope]
            count += self._soft_delete(s, ids, actor=actor)
        if count:
            self._wrote()
        return count

    def clear(self, scope: str | None = None, *, actor: str = "") -> int:
        """Soft-delete every live memory of a scope (None = both); raises on storage failure."""
        total = 0
        for s in self._stores(scope):
            with change_window(s.using, [(s.namespace, s.scope)]) as window:
                removed = store.clear(s.using, s.namespace, [s.scope], actor=actor)
            INDEXES.apply_own_write(window, s.namespace, s.scope, removed=removed)
            total += len(removed)
        self._wrote()
        return total

    def wipe_all(self, *, actor: str = "") -> WipeResult:
        """The seed's reset: clear both scopes and hard-delete the session summaries.

        Never raises. Not erasure: soft-deleted rows keep their content (docs/behaviour.md §3, §9).
        """
        not_cleared: list[str] = []
        memories = 0
        try:
            memories = self.clear(None, actor=actor)
        except Exception:
            logger.warning("wipe_all: clearing memories failed", exc_info=True)
            not_cleared.append("memories")
        summaries = 0
        try:
            summaries = self._delete_summaries()
        except Exception:
            logger.warning("wipe_all: deleting session summaries failed", exc_info=True)
        try:
            # Read back: a delete that "succeeded" but left rows is still a failure.
            if self._summaries().exists():
                not_cleared.append("session summaries")
        except Exception:
            logger.warning("wipe_all: could not verify session summaries", exc_info=True)
            not_cleared.append("session summaries")
        self._wrote()
        return WipeResult(memories, summaries, tuple(not_cleared))

    # ------------------------------------------------------ session summaries
    def _summaries(self):
        return SessionSummary.objects.using(self.using).in_namespace(self.project)

    def _delete_summaries(self) -> int:
        with transaction.atomic(using=self.using):
            deleted, _ = self._summaries().delete()
        return deleted

    def save_session_summary(
        self, text: str, tokens_before: int = 0, messages_summarized: int = 0
    ) -> SessionSummary | None:
        """Record the summary of a complete compaction; never raises (None when not saved).

        Refused (None, and a log line without the text): invalid text, more than
        64,000 characters, or a credential — a summary is stored and rendered into
        prompts like a memory.
        """
        try:
            if not isinstance(text, str) or not text.strip():
                return None
            summary = validation.check_summary(text)
            self.guard.detect_sensitive(summary)
        except guards.SensitiveMemoryError:
            logger.warning("save_session_summary refused: it looks like a credential")
            return None
        except guards.MemoryValidationError as exc:
            logger.warning("save_session_summary refused: %s", exc)  # the reason, never the text
            return None
        try:
            row = SessionSummary.objects.using(self.using).create(
                session_id=self.session_id,
                summary_text=summary,
                tokens_before=max(int(tokens_before or 0), 0),
                messages_summarized=max(int(messages_summarized or 0), 0),
                namespace=self.project,
                subject=self.user,
            )
        except Exception:
            logger.warning("save_session_summary failed", exc_info=True)
            return None
        self._wrote()
        return row

    def archive_session(self, session_id: str | None = None) -> str | None:
        """Start (or resume) a session; returns the previous id if it had summaries."""
        previous = self.session_id
        try:
            had = self._summaries().for_session(previous).exists()
        except DatabaseError:
            had = False
        self.session_id = (
            session_id if isinstance(session_id, str) and session_id else _new_session_id()
        )
        self._wrote()
        return previous if had else None

    def get_recent_session_summaries(
        self, session_id: str | None = None, limit: int | None = 5
    ) -> list[SessionSummary]:
        """A session's summaries (this one's by default), newest first, at most ``limit``.

        Agentao's signature and order; ``limit`` None or negative means no limit.
        """
        qs = self._summaries().for_session(session_id or self.session_id)
        qs = qs.order_by("-created_at", "-id")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
            qs = qs[:limit]
        return list(qs)

    def clear_session(self) -> None:
        """Delete this session's summaries (the id does not advance); never raises."""
        try:
            with transaction.atomic(using=self.using):
                self._summaries().for_session(self.session_id).delete()
        except Exception:
            logger.warning("clear_session failed", exc_info=True)
            return
        self._wrote()

    def clear_all_session_summaries(self) -> int:
        """Delete every summary of this namespace, all sessions (``/clear``); 0 on failure.

        A failure and an empty namespace both answer 0: ask
        :meth:`session_summaries_remain` when the outcome must be reported.
        """
        try:
            deleted = self._delete_summaries()
        except Exception:
            logger.warning("clearing all session summaries failed", exc_info=True)
            return 0
        self._wrote()
        return deleted

    def session_summaries_remain(self) -> bool:
        """Whether any summary of this namespace is stored; True when that cannot be read."""
        try:
            return self._summaries().exists()
        except Exception:
            return True

    def list_session_summaries(self, session_id: str | None = None) -> list[SessionSummary]:
        """Summaries of this namespace (optionally one session), oldest first."""
        qs = self._summaries()
        if session_id is not None:
            qs = qs.for_session(session_id)
        return list(qs.order_by("created_at", "id"))

    def get_cross_session_tail(self) -> str:
        """The cross-session tail of the stable block (docs/behaviour.md §4); never raises."""
        from ..render import cross_session_tail

        def read():
            latest = list(
                self._summaries()
                .order_by("-created_at", "-id")
                .values_list("session_id", "summary_text")[:SUMMARY_TAIL_WINDOW]
            )
            return list(reversed(latest))

        rows = self._guarded_read([self._project_store], read, [])
        try:
            return cross_session_tail(rows, self.session_id)
        except Exception:
            logger.warning("get_cross_session_tail failed", exc_info=True)
            return ""

    # -------------------------------------------------- ephemeral and children
    @classmethod
    def ephemeral(cls, *, session_id: str | None = None, guard=None) -> MemoryManager:
        """A manager on a throw-away in-memory store: works for the session, leaves nothing.

        Call :meth:`close` when done (it also runs when the manager is collected).
        """
        alias = ephemeral.ephemeral_alias()
        project = ephemeral.new_namespace()
        mm = cls(
            project,
            f"{project}/user",
            using=alias,
            user_using=alias,
            session_id=session_id,
            guard=guard,
        )
        mm._finalizer = weakref.finalize(mm, ephemeral.discard, alias, (project, f"{project}/user"))
        return mm

    def close(self) -> None:
        """Discard an ephemeral manager's rows now; a no-op for persistent managers."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def child(self) -> MemoryManager:
        """A sub-agent's manager (docs/behaviour.md §7): writes go through this manager's
        ``save_memory``; its summaries and candidates stay in a throw-away store; its reads
        see nothing."""
        route = getattr(self, "save_memory", None)
        alias = ephemeral.ephemeral_alias()
        project = ephemeral.new_namespace()
        kid = self._child_class(project, None, using=alias, guard=self.guard)
        kid._route = route if callable(route) else None
        kid._finalizer = weakref.finalize(kid, ephemeral.discard, alias, (project,))
        return kid

    def _facade(self, **binding) -> MemoryManager:
        """A new plain facade bound by ``binding`` (the queue's writers for other subjects).

        A method, so that ``queue`` (a mixin of this class) need not import this module.
        """
        return MemoryManager(**binding)

    # ------------------------------------------------------------ versions
    def store_change_version(self) -> tuple[int | None, ...]:
        """Each present store's change counter (project, then user), None where unreadable.

        Agentao's cache key for store contents: it also moves on other writers'
        writes (unlike :attr:`write_version`). A store without a user namespace
        contributes no entry.
        """
        versions: list[int | None] = []
        for s in self._stores():
            try:
                versions.append(read_change_counter(s.using))
            except DatabaseError:
                versions.append(None)
        return tuple(versions)

    def change_version(self) -> int:
        """The database's ``schema_meta.memories_change`` (summed over both aliases if two)."""
        aliases = {self.using, self.user_using} if self._user_store else {self.using}
        return sum(read_change_counter(alias) for alias in sorted(aliases))


# ---------------------------------------------------------------- helpers


def _new_session_id() -> str:
    return secrets.token_hex(6)


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
