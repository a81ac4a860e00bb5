"""The session summaries of the facade (docs/behaviour.md §4): its session id and write counter.

The rows are :mod:`memoryapp.services.summaries`'.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from django.db import DatabaseError

from memoryapp.models import SessionSummary
from memoryapp.rules.render import cross_session_tail
from memoryapp.services import summaries

if TYPE_CHECKING:
    from memoryapp.facade.problems import StoreProblems
    from memoryapp.facade.types import Reads
    from memoryapp.rules.guard import MemoryGuard
    from memoryapp.services.slices import Binding

logger = logging.getLogger("memoryapp.facade")


def new_session_id() -> str:
    """A fresh random session id."""
    return secrets.token_hex(6)


class SessionSummaries:
    """Mixin of :class:`~memoryapp.facade.MemoryManager`: save, list, clear, the tail."""

    if TYPE_CHECKING:  # what it uses of MemoryManager (core.py), for the type checker only
        binding: Binding
        guard: MemoryGuard
        session_id: str
        sees: Reads
        problems: StoreProblems

        def _wrote(self) -> None: ...

    def _summaries(self):
        return summaries.summaries(self.binding)

    def _delete_summaries(self) -> int:
        return summaries.delete(binding=self.binding)

    def save_session_summary(
        self, text: str, tokens_before: int = 0, messages_summarized: int = 0
    ) -> SessionSummary | None:
        """Record the summary of a complete compaction; never raises (None when not saved).

        Refused (None, and a log line without the text): invalid text, more than
        64,000 characters, or a credential — a summary is stored and rendered into
        prompts like a memory.
        """
        row = summaries.save(
            binding=self.binding,
            guard=self.guard,
            session_id=self.session_id,
            text=text,
            tokens_before=tokens_before,
            messages_summarized=messages_summarized,
        )
        if row is not None:
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
            session_id if isinstance(session_id, str) and session_id else new_session_id()
        )
        self._wrote()
        return previous if had else None

    def get_recent_session_summaries(
        self, session_id: str | None = None, limit: int | None = 5
    ) -> list[SessionSummary]:
        """A session's summaries (this one's by default), newest first, at most ``limit``.

        Agentao's signature and order; ``limit`` None or negative means no limit.
        """
        return summaries.recent(
            binding=self.binding, session_id=session_id or self.session_id, limit=limit
        )

    def clear_session(self) -> None:
        """Delete this session's summaries (the id does not advance); never raises."""
        try:
            summaries.delete(binding=self.binding, session_id=self.session_id)
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
        return summaries.listed(binding=self.binding, session_id=session_id)

    def get_cross_session_tail(self) -> str:
        """The cross-session tail of the stable block (docs/behaviour.md §4); never raises."""
        if not self.sees.summaries:
            return ""
        rows = self.problems.read(
            [self.binding.project_store], lambda: summaries.tail_rows(binding=self.binding), []
        )
        try:
            return cross_session_tail(rows, self.session_id)
        except Exception:
            logger.warning("get_cross_session_tail failed", exc_info=True)
            return ""
