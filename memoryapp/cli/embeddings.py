"""``memory reembed``: store the current embedder's vectors (memoryapp.writes.reembed)."""

from __future__ import annotations

from memoryapp import conf
from memoryapp.cli import progress
from memoryapp.writes import reembed


def register(verbs, common) -> dict:
    """Add the ``reembed`` verb."""
    p = verbs.add_parser(
        "reembed",
        parents=[common],
        help="store the semantic ranking's vectors of the rows whose model changed (or --all)",
    )
    p.add_argument("--all", action="store_true", help="every row, not only the stale ones")
    return {"reembed": _reembed}


def _reembed(command, options) -> None:
    if conf.embedder() is None:
        command.stderr.write(f"memory reembed: no embedder ({conf.embedder_problem()}).")
        raise SystemExit(1)
    with progress.for_command(command, options, "embedding") as bar:
        count = reembed.reembed(options["database"], everything=options["all"], progress=bar.update)
    command.stdout.write(f"Embedded {count:,} memor{'y' if count == 1 else 'ies'}.")
