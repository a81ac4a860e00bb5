"""A separate OS process holding one memory manager, driven by tests/ops/test_multiprocess.py.

Usage: ``DATABASE_URL=... python tests/mp_worker.py memoryapp|agentao [project] [user]``.
Reads one JSON command per line on stdin and answers one JSON line on stdout
(``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``); the
first line it prints is ``{"ready": pid}``. The manager lives as long as the
process, so its caches (recall index, stable block) persist between commands
exactly as in a long-running app server or agent.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402


class AppSide:
    """This app's own ``MemoryManager`` (docs/behaviour.md §13 names)."""

    def __init__(self, project: str, user: str | None) -> None:
        from memoryapp import MemoryManager

        self.mm = MemoryManager(project=project, user=user)

    def save(self, key, value, tags=(), type=None):
        return self.mm.upsert(key, value, tags=tags, type=type).id

    def delete(self, memory_id):
        return self.mm.delete(memory_id)

    def recall(self, query, top_k=5):
        return [[c.memory_id, c.score, list(c.reasons)] for c in self.mm.recall(query, top_k=top_k)]

    def stable(self):
        return self.mm.render_stable_block()


class AgentaoSide:
    """Agentao's ``MemoryManager`` and ``MemoryRetriever`` over ``DjangoMemoryStore``."""

    def __init__(self, project: str, user: str | None) -> None:
        from agentao.memory import MemoryManager, MemoryPromptRenderer, MemoryRetriever

        from memoryapp.agentao import DjangoMemoryStore

        self.mm = MemoryManager(
            project_store=DjangoMemoryStore(project),
            user_store=DjangoMemoryStore(user) if user is not None else None,
        )
        self.retriever = MemoryRetriever(self.mm)
        self.renderer = MemoryPromptRenderer()

    def save(self, key, value, tags=(), type=None):
        from agentao.memory import SaveMemoryRequest

        return self.mm.upsert(
            SaveMemoryRequest(key=key, value=value, tags=list(tags), type=type)
        ).id

    def delete(self, memory_id):
        return self.mm.delete(memory_id)

    def recall(self, query, top_k=5):
        hits = self.retriever.recall_candidates(query, top_k=top_k)
        return [[h.memory_id, h.score, list(h.reasons)] for h in hits]

    def stable(self):
        return self.renderer.render_stable_block(
            self.mm.get_stable_entries(), self.mm.get_cross_session_tail()
        )


def main() -> None:
    mode = sys.argv[1]
    project = sys.argv[2] if len(sys.argv) > 2 else "acme/web"
    user = sys.argv[3] if len(sys.argv) > 3 else "acme/alice"
    side = None
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            if op == "migrate":
                call_command("migrate", verbosity=0, interactive=False)
                result = None
            else:
                if side is None:
                    side = (AppSide if mode == "memoryapp" else AgentaoSide)(project, user)
                result = getattr(side, op)(**command)
            answer = {"ok": True, "result": result}
        except Exception as exc:
            answer = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
