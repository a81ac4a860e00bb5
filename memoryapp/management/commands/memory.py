"""``python manage.py memory <verb>``: the seed's ``/memory`` commands for operators.

The verbs live in ``memoryapp.cli`` modules (one per concern); this command
builds the parser from them and offers the shared helpers.
"""

from __future__ import annotations

import argparse
from importlib import import_module

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from memoryapp.cli import VERB_MODULES, bound_to, namespace_label
from memoryapp.facade import MemoryManager
from memoryapp.rules.wording import plural


class Command(BaseCommand):
    """Inspect and manage agent memories from the command line."""

    help = "Inspect and manage agent memories (see 'manage.py memory --help' for the verbs)."

    def add_arguments(self, parser) -> None:
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--project", default="", help="project namespace ('' by default)")
        common.add_argument("--user", default=None, help="user namespace (none by default)")
        common.add_argument("--database", default=DEFAULT_DB_ALIAS, help="database alias")
        common.add_argument(
            "--quiet", action="store_true", help="no progress line on standard error"
        )
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        self.handlers = {}
        for module in VERB_MODULES:
            self.handlers.update(import_module(module).register(verbs, common))

    def handle(self, *args, **options) -> None:
        handler = self.handlers[options["verb"]]
        check_arguments(options)
        try:
            handler(self, options)
        except DatabaseError as exc:
            raise CommandError(f"database error: {exc}") from exc
        except UnicodeDecodeError as exc:
            # Only standard input and files are decoded; the codec's message is noise.
            raise CommandError(
                f"the input is not valid UTF-8 text (byte {exc.object[exc.start]:#04x} "
                f"at offset {exc.start})"
            ) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    # ----------------------------------------------------------- helpers
    def manager(self, options) -> MemoryManager:
        """The facade for the namespaces given on the command line."""
        return MemoryManager(
            project=options["project"], user=options["user"], using=options["database"]
        )

    def confirm(self, question: str, options) -> bool:
        """Ask ``[y/N]`` unless ``--yes``; True when confirmed.

        Declined (or no answer on a closed stdin) is a failure, exit status 1, so a
        script that forgot ``--yes`` does not carry on as if the change was made.
        """
        if options.get("yes"):
            return True
        try:
            answer = input(f"{question} [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("Aborted; nothing was changed.")
        return True

    def print_memories(self, rows, options, *, everywhere: bool = False) -> None:
        """One block per memory, then the count and where it was read.

        Plain writes: brackets and markup print literally. Contents longer than
        200 characters are cut (``--full`` prints them whole); with
        ``--all-namespaces`` each memory names its namespace.
        """
        rows = list(rows)
        full = options.get("full")
        for m in rows:
            tags = ", ".join(m.tags)
            where = f"{namespace_label(m.namespace)}  " if everywhere else ""
            self.stdout.write(f"{m.id}  {where}[{m.scope}/{m.type}]  {m.title}")
            self.stdout.write(f"    {m.content if full else cut(m.content)}")
            if tags:
                self.stdout.write(f"    tags: {tags}")
        if everywhere:
            spaces = len({m.namespace for m in rows})
            self.stdout.write(
                f"{plural(len(rows), 'memory', 'memories')} in "
                f"{plural(spaces, 'namespace', 'namespaces')}."
            )
        else:
            self.stdout.write(f"{plural(len(rows), 'memory', 'memories')} in {bound_to(options)}.")


def check_arguments(options) -> None:
    """Refuse, before any work, what no verb can use: an unknown ``--database`` alias, and
    an argument the shell passed as bytes that are not UTF-8.

    Python keeps such bytes as lone surrogates (``surrogateescape``); echoed in a
    message they made the output itself fail with a codec error.
    """
    alias = options.get("database")
    if alias is not None and alias not in connections:
        known = ", ".join(sorted(connections.settings))
        raise CommandError(f"unknown database alias; the known ones are: {known}")
    for name, value in options.items():
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, str) and not _encodable(item):
                label = _FLAGS.get(name, name).replace("_", "-")
                option = f"the {label}" if name in _POSITIONAL else f"--{label}"
                raise CommandError(f"{option} argument is not valid UTF-8 text")


_POSITIONAL = {"file", "query", "tag", "title", "path", "session_id", "name"}
_FLAGS = {"ids": "id", "list_receipts": "list"}  # options whose dest is not the flag's name


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def cut(text: str, limit: int = 200) -> str:
    """``text`` on one screen: the first ``limit`` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit].rstrip() + " …"
