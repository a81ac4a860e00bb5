"""Verb groups of ``manage.py memory``; each module registers its sub-commands.

A module exposes ``register(verbs, common) -> dict[str, handler]`` where
``verbs`` is the argparse sub-parser collection, ``common`` the parent parser
holding ``--project/--user/--database``, and a handler is
``handler(command, options) -> None`` (``command`` is the running
``BaseCommand``: use ``command.stdout``, ``command.confirm``, ``command.manager``).
"""

import getpass

VERB_MODULES = [
    "memoryapp.cli.basic",
    "memoryapp.cli.review",
    "memoryapp.cli.interop",
    "memoryapp.cli.clients",
    "memoryapp.cli.compliance",
    "memoryapp.cli.records",
    "memoryapp.cli.requests",
    "memoryapp.cli.indexes",
    "memoryapp.cli.embeddings",
    "memoryapp.cli.verifier",
    "memoryapp.cli.demo",
]


def cli_actor(options) -> str:
    """Who asks, as every receipt and event records it: ``--actor`` or ``cli:<login>``."""
    if options.get("actor"):
        return options["actor"]
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no login name in some containers
        return "cli"


def namespace_label(namespace: str) -> str:
    """A namespace as the CLI prints it: quoted, ``''`` named as the default."""
    return repr(namespace) if namespace else "'' (default)"


def bound_to(options) -> str:
    """The namespaces a verb read, in words: "project 'acme/web' and user 'acme/bob'"."""
    words = f"project {namespace_label(options['project'])}"
    if options.get("user"):
        words += f" and user {namespace_label(options['user'])}"
    return words
