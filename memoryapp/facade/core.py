"""The core of the facade: stores, writes, reads, deletes, wipe, summaries, versions.

Writes, deletes and the wipe are :mod:`memoryapp.services`'; the facade binds
the namespaces, counts its writes and keeps the store problems of its reads.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError

from memoryapp.conf import get_guard, user_database
from memoryapp.db.meta import read_change_counter
from memoryapp.facade import ephemeral
from memoryapp.facade.blocks import PromptBlocks
from memoryapp.facade.problems import StoreProblems
from memoryapp.facade.queue import ReviewQueue
from memoryapp.facade.sessions import SessionSummaries, new_session_id
from memoryapp.facade.types import SEES_ALL, Reads, WipeResult
from memoryapp.models import Memory, Source
from memoryapp.rules import tool_results, validation
from memoryapp.rules.errors import MemoryValidationError, SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard
from memoryapp.services import memories, reads, wipe
from memoryapp.services.memories import SCOPE_DOWNGRADE_WARNING
from memoryapp.services.slices import Binding, StoreSlice
from memoryapp.writes import bulk, store

logger = logging.getLogger("memoryapp.facade")

__all__ = ["SCOPE_DOWNGRADE_WARNING", "MemoryManager"]


class MemoryManager(PromptBlocks, ReviewQueue, SessionSummaries):
    """The long-term memory of one agent session (docs/behaviour.md §13).

    Args:
        project: the project namespace (``""`` = single-tenant, Agentao-compatible).
        user: the user namespace, or ``None`` for no user scope (user-scope
            writes then land in the project scope).
        using: database alias of the project store (default ``"default"``).
        user_using: database alias of the user store (default
            ``MEMORYAPP_USER_DATABASE``, else ``using``).
        session_id: the current session id; a fresh random one when omitted.
        guard: the :class:`~memoryapp.rules.guard.MemoryGuard` to validate with;
            default the ``MEMORYAPP_GUARD`` class.
    """

    #: The class of :meth:`child`'s managers: :class:`~memoryapp.facade.children.ChildManager`,
    #: set by ``manager/__init__.py``. Injected, not imported: it subclasses this class, so
    #: ``core`` importing ``children`` would be an import cycle.
    _child_class: type[MemoryManager]
    # A child's route to its parent's save_memory (set by child(); read by ChildManager).
    _route: Callable[..., Any] | None

    # Set by ephemeral() and child() only: close() discards the throw-away rows.
    _finalizer: weakref.finalize[..., MemoryManager]

    sees: Reads = SEES_ALL  # what reads see; a sub-agent's manager sees nothing

    def __init__(
        self,
        project: str = "",
        user: str | None = None,
        *,
        using: str | None = None,
        user_using: str | None = None,
        session_id: str | None = None,
        guard: MemoryGuard | None = None,
    ) -> None:
        if not isinstance(project, str):
            raise MemoryValidationError("project namespace must be a string")
        if user is not None and not isinstance(user, str):
            raise MemoryValidationError("user namespace must be a string or None")
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
            session_id if isinstance(session_id, str) and session_id else new_session_id()
        )
        self.write_version = 0
        self.problems = StoreProblems()
        self._stable_cache: tuple[int, str, list[str]] | None = None
        # Recall's own counters, as Agentao's retriever keeps them for "/memory status".
        self.recall_count = 0  # candidates returned, this manager's lifetime
        self.recall_error_count = 0
        self.last_recall_error: str | None = None
        self.binding = Binding.of(
            project=project, user=user, using=self.using, user_using=self.user_using
        )

    def __repr__(self) -> str:
        return f"MemoryManager(project={self.project!r}, user={self.user!r}, using={self.using!r})"

    # ----------------------------------------------------------------- stores
    def _stores(self, scope: str | None = None) -> list[StoreSlice]:
        return self.binding.stores(scope)

    @property
    def read_failures(self) -> int:
        """How many turn-path reads have failed (it moves on every failure), as Agentao's.

        A cache built from a failed read compares it before and after, so it does
        not keep an empty answer once the store reads again.
        """
        return self.problems.failures

    def note_store_problem(self, label: str, message: str) -> bool:
        """Record that the ``label`` store (``"project"``/``"user"``) is unusable.

        Agentao's host calls it for a store it could not open. The first message
        per store is kept (True when this call recorded it); it is reported once by
        :meth:`take_store_problems` and, unlike a failed read, is not cleared by a
        later successful one: the host said the store is unusable.
        """
        return self.problems.note(label, message)

    def take_store_problems(self) -> list[str]:
        """Messages about stores that could not be read, each told once (docs/behaviour.md §11)."""
        return self.problems.take()

    # ----------------------------------------------------------------- writes
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
        result = memories.upsert(
            binding=self.binding,
            guard=self.guard,
            key=key,
            value=value,
            tags=tags,
            scope=scope,
            type=type,
            source=source,
            actor=actor,
        )
        self._wrote()
        return result

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
        """Bulk-import ``(line number, record dict)`` pairs (see :mod:`memoryapp.writes.bulk`).

        Each record is guarded and classified like :meth:`upsert`; nothing is
        written when one is invalid unless ``skip_invalid``.
        """
        report = memories.import_records(
            binding=self.binding,
            guard=self.guard,
            records=records,
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
        except SensitiveMemoryError:
            return tool_results.REFUSED_SECRET
        except Exception as exc:  # the model gets the reason, the turn goes on
            return tool_results.save_failed(_reason(exc))
        notes: list[str] = []
        if validation.key_is_cut(key):
            notes.append(f"the key was cut to its first {validation.MAX_KEY_CHARS} characters")
        return tool_results.saved(memory.key_normalized, notes)

    def _wrote(self) -> None:
        self.write_version += 1

    # ------------------------------------------------------------------ reads
    def get_entry(self, memory_id: str) -> Memory | None:
        """The live memory with this id in one of this manager's stores, else None."""
        return reads.one(stores=self._stores(), memory_id=memory_id)

    def get_all_entries(self, scope: str | None = None) -> list[Memory]:
        """Live memories of a scope (None = both), ordered by ``created_at``.

        A store that cannot be read counts as empty and is reported once
        through :meth:`take_store_problems`.
        """
        if not self.sees.memories:
            return []
        stores = self._stores(scope)
        return self.problems.read(stores, lambda: reads.live(stores=stores), [])

    def search(self, query: str, scope: str | None = None) -> list[Memory]:
        """Case-insensitive literal substring search over title, content, key, tags, keywords."""
        if not self.sees.memories or not isinstance(query, str) or not query.strip():
            return []
        return reads.matching(stores=self._stores(scope), query=query)

    def filter_by_tag(self, tag: str, scope: str | None = None) -> list[Memory]:
        """Memories carrying ``tag`` exactly (case-insensitive)."""
        if not self.sees.memories or not isinstance(tag, str) or not tag.strip():
            return []
        return reads.tagged(stores=self._stores(scope), tag=tag)

    # ---------------------------------------------------------- delete, clear
    def delete(self, memory_id: str, *, actor: str = "") -> bool:
        """Soft-delete one memory; True if a live row was found (docs/behaviour.md §3)."""
        memory_id = validation.check_id(memory_id)
        for s in self._stores():
            if memories.soft_delete(store_slice=s, ids=[memory_id], actor=actor):
                self._wrote()
                return True
        return False

    def delete_by_title(self, title: str, *, actor: str = "") -> int:
        """Soft-delete every live memory whose title matches case-insensitively; the count."""
        if not isinstance(title, str) or not title.strip():
            return 0
        victims = reads.titled(stores=self._stores(), title=title)
        count = 0
        for s in self._stores():
            ids = [m.id for m in victims if m.namespace == s.namespace and m.scope == s.scope]
            count += len(memories.soft_delete(store_slice=s, ids=ids, actor=actor))
        if count:
            self._wrote()
        return count

    def clear(self, scope: str | None = None, *, actor: str = "") -> int:
        """Soft-delete every live memory of a scope (None = both); raises on storage failure."""
        total = wipe.clear_memories(binding=self.binding, scope=scope, actor=actor)
        self._wrote()
        return total

    def wipe_preview(self) -> wipe.WipePreview:
        """What :meth:`wipe_all` would clear now (live memories, session summaries)."""
        return wipe.preview(binding=self.binding)

    def wipe_all(self, *, actor: str = "") -> WipeResult:
        """The seed's reset: clear both scopes and hard-delete the session summaries.

        Never raises. Not erasure: soft-deleted rows keep their content (docs/behaviour.md §3, §9).
        """
        result = wipe.run(  # through this manager's own clear, a host's override included
            clear_memories=lambda: self.clear(None, actor=actor),
            delete_summaries=self._delete_summaries,
            summaries_left=lambda: self._summaries().exists(),
        )
        self._wrote()
        return result

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
        aliases = {self.using, self.user_using} if self.user is not None else {self.using}
        return sum(read_change_counter(alias) for alias in sorted(aliases))


# ---------------------------------------------------------------- helpers
def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
