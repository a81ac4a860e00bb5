"""``memory index``: store (or drop) the recall snapshots of every namespace ahead of traffic.

After a bulk import, a restore or an upgrade that changes tokenisation, the first
worker to recall in each namespace would build and store its snapshot; this verb
does it for all of them at once, one namespace at a time per process (memory stays
bounded), in ``--jobs`` processes side by side.
"""

from __future__ import annotations

import multiprocessing

from django.db import connections

from memoryapp.db.meta import read_slice_counters
from memoryapp.db.snapshots import in_memory
from memoryapp.models import Memory, RecallSnapshot
from memoryapp.recall.cache import INDEXES


def register(verbs, common) -> dict:
    """Add the ``index`` verb."""
    p = verbs.add_parser(
        "index",
        parents=[common],
        help="store the recall snapshot of every namespace (or --drop them all)",
    )
    p.add_argument(
        "--all-namespaces",
        action="store_true",
        help="every namespace with memories (default: --project and --user only)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that build side by side, each one namespace at a time (default 1; "
        "building is CPU work: up to the machine's cores)",
    )
    p.add_argument("--drop", action="store_true", help="delete the stored snapshots instead")
    p.add_argument("--yes", action="store_true", help="do not ask before --drop")
    return {"index": _index}


def _slices(options) -> list[tuple[str, str]]:
    rows = Memory.objects.using(options["database"]).live()
    if not options["all_namespaces"]:
        wanted = [options["project"]] + ([options["user"]] if options["user"] else [])
        rows = rows.filter(namespace__in=wanted)
    # DISTINCT in the database: one row per slice, not one per memory (10,000,000
    # pairs held at once took 2.6 GB in this process at 10,000 tenants).
    return sorted(rows.values_list("namespace", "scope").order_by().distinct())


def _index(command, options) -> None:
    using = options["database"]
    if options["drop"]:
        snapshots = RecallSnapshot.objects.using(using)
        if not options["all_namespaces"]:
            wanted = [options["project"]] + ([options["user"]] if options["user"] else [])
            snapshots = snapshots.filter(namespace__in=wanted)
        count = snapshots.count()
        if count and not command.confirm(f"Delete {count:,} recall snapshot(s)?", options):
            raise SystemExit(1)
        snapshots.delete()
        command.stdout.write(f"Deleted {count:,} recall snapshot(s); workers rebuild on demand.")
        return
    if connections[using].in_atomic_block:  # snapshots are written outside transactions
        command.stderr.write("memory index cannot run inside a transaction.")
        raise SystemExit(1)
    jobs = options["jobs"]
    if jobs < 1:
        command.stderr.write(f"--jobs must be 1 or more, not {jobs}.")
        raise SystemExit(2)
    slices = _slices(options)
    jobs = min(jobs, len(slices))
    if jobs > 1 and not _can_fork(using):
        command.stderr.write("--jobs: this platform or database cannot build in parallel; 1 job.")
        jobs = 1
    if jobs <= 1:
        built, loaded = _store(using, slices)
    else:
        # Each child opens its own connections: none may be inherited open.
        connections.close_all()
        chunks = [slices[i::jobs] for i in range(jobs)]  # interleaved: sizes even out
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            counts = pool.starmap(_store_in_child, [(using, chunk) for chunk in chunks])
        built, loaded = (sum(c[i] for c in counts) for i in (0, 1))
    command.stdout.write(
        f"{len(slices):,} namespace slice(s): {built:,} built and stored, "
        f"{loaded:,} already stored (brought up to date where they had drifted)."
    )


def _store(using: str, slices: list[tuple[str, str]]) -> tuple[int, int]:
    """Bring each slice's stored snapshot up to date; (built, loaded from a snapshot)."""
    built = loaded = 0
    for namespace, scope in slices:
        counter = read_slice_counters(using, [(namespace, scope)])[(namespace, scope)]
        builds, loads = INDEXES.builds, INDEXES.loads
        INDEXES.get(using, namespace, scope, counter)
        INDEXES.discard(using, namespace, scope)  # one namespace in memory at a time
        built += INDEXES.builds - builds
        loaded += INDEXES.loads - loads
    return built, loaded


def _store_in_child(using: str, slices: list[tuple[str, str]]) -> tuple[int, int]:
    """:func:`_store` in a forked child, which closes the connections it opened."""
    try:
        return _store(using, slices)
    finally:
        connections.close_all()


def _can_fork(using: str) -> bool:
    """Children need ``fork`` (they inherit the configured Django) and a database that
    outlives them (an in-memory SQLite database is the parent's alone)."""
    return "fork" in multiprocessing.get_all_start_methods() and not in_memory(using)
