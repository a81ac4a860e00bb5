"""``python manage.py memory <verb>``: the seed's ``/memory`` commands for operators.

The verbs live in ``memoryapp.cli`` modules (one per concern); this command
builds the parser from them and offers the shared helpers.
"""

from __future__ import annotations

import argparse
from importlib import import_module

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from memoryapp.cli import VERB_MODULES
from memoryapp.manager import MemoryManager


class Command(BaseCommand):
    """Inspect and manage agent memories from the command line."""

    help = "Inspect and manage agent memories (see 'manage.py memory --help' for the verbs)."

    def add_arguments(self, parser) -> None:
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--project", default="", help="project namespace ('' by default)")
        common.add_argument("--user", default=None, help="user namespace (none by default)")
        common.add_argument("--database", default=DEFAULT_DB_ALIAS, help="database alias")
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        self.handlers = {}
        for module in VERB_MODULES:
            self.handlers.update(import_module(module).register(verbs, common))

    def handle(self, *args, **options) -> None:
        handler = self.handlers[options["verb"]]
        try:
            handler(self, options)
        except DatabaseError as exc:
            raise CommandError(f"database error: {exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    # ----------------------------------------------------------- helpers
    def manager(self, options) -> MemoryManager:
        """The facade for the namespaces given on the command line."""
        return MemoryManager(
            project=options["project"], user=options["user"], using=options["database"]
        )

    def confirm(self, question: str, options) -> bool:
        """Ask ``[y/N]`` unless ``--yes``; False (and a note) when declined."""
        if options.get("yes"):
            return True
        try:
            answer = input(f"{question} [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            self.stdout.write("Aborted; nothing was changed.")
            return False
        return True

    def print_memories(self, rows) -> None:
        """One block per memory. Plain writes: brackets and markup print literally."""
        rows = list(rows)
        for m in rows:
            tags = ", ".join(m.tags)
            self.stdout.write(f"{m.id}  [{m.scope}/{m.type}]  {m.title}")
            self.stdout.write(f"    {m.content}")
            if tags:
                self.stdout.write(f"    tags: {tags}")
        self.stdout.write(f"{len(rows)} memor{'y' if len(rows) == 1 else 'ies'}.")
