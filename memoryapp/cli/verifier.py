"""``manage.py memory verifier``: check one server's copy of each erasure, beside that server.

Where the worker cannot read a server's files (no ``pg_read_server_files`` grant, the
server on another machine), a process on the database host can: it reads that server's
relation files under its data directory itself and writes each result on the primary
(``memory_erasure_copy_checks``), where the worker, the receipts, ``/healthz`` and
``/metrics`` read it. The erased fragments it looks for come from the primary sealed
under ``MEMORYAPP_ERASURE_KEY`` and stay in this process's memory (docs/operations.md,
"Verifying every copy").
"""

from __future__ import annotations

import os

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from memoryapp.rules.wording import plural


def register(verbs, common) -> dict:
    """Add the ``verifier`` verb to the parser; return its handler."""
    p = verbs.add_parser(
        "verifier",
        parents=[common],
        help="beside a database server: byte-scan its copy of each erasure, report to the primary",
    )
    p.add_argument(
        "--server",
        required=True,
        help="the server's database alias (a replica alias, or 'default' for the primary)",
    )
    p.add_argument(
        "--data-directory",
        required=True,
        help="that server's data directory on this machine (its relation files are read there)",
    )
    p.add_argument("--once", action="store_true", help="check what is pending, then stop")
    p.add_argument(
        "--poll", type=float, default=10.0, metavar="SECONDS", help="idle wait between rounds"
    )
    return {"verifier": do_verifier}


def do_verifier(cmd, options) -> None:
    """Check the server's pending copies until stopped (``--once``: one round)."""
    import signal
    import threading

    from memoryapp.compliance import copies

    server, data_directory = options["server"], options["data_directory"]
    if server not in connections:
        raise CommandError(f"no database alias {server!r} is configured (DATABASE_REPLICA_URLS)")
    if not os.path.isdir(os.path.join(data_directory, "global")):
        raise CommandError(f"{data_directory!r} is not a PostgreSQL data directory here")
    if options["poll"] <= 0:
        raise CommandError("--poll must be a positive number of seconds")
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
    primary = options["database"] or DEFAULT_DB_ALIAS
    cmd.stdout.write(f"Verifier for {server} started (data directory {data_directory}).")
    total = 0
    try:
        while not stop.is_set():
            try:
                done = copies.verify_here(server, data_directory, using=primary)
            except DatabaseError as exc:  # a server away: said once a round, tried again
                cmd.stdout.write(f"verifier round failed: {type(exc).__name__}; retrying")
                done = 0
                for alias in (server, primary):
                    connections[alias].close_if_unusable_or_obsolete()
            total += done
            if done:
                cmd.stdout.write(f"{server}: {plural(done, 'copy', 'copies')} checked")
            if options["once"]:
                break
            stop.wait(options["poll"])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    cmd.stdout.write(f"Verifier for {server} stopped: {plural(total, 'copy', 'copies')} checked.")
