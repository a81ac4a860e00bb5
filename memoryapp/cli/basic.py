"""The seed's ``/memory`` verbs: list, search, tag, delete, clear, wipe, session, stats; add."""

from __future__ import annotations

import io
from collections import Counter

from django.core.management.base import CommandError

from memoryapp.cli import bound_to, cli_actor, namespace_label, progress
from memoryapp.models import Memory, ReviewItem, SchemaMeta
from memoryapp.rules import validation
from memoryapp.rules.validation import SCOPES
from memoryapp.rules.wording import plural
from memoryapp.services import search


def register(verbs, common) -> dict:
    """Add the basic verbs to the parser; return their handlers."""
    p = verbs.add_parser("list", parents=[common], help="list live memories")
    _reading(p)
    p = verbs.add_parser("search", parents=[common], help="substring search")
    p.add_argument("query")
    _reading(p)
    p = verbs.add_parser("tag", parents=[common], help="memories with a tag")
    p.add_argument("tag")
    _reading(p)
    p = verbs.add_parser("delete", parents=[common], help="soft-delete memories by title")
    p.add_argument("title")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = verbs.add_parser("clear", parents=[common], help="soft-delete every memory of a scope")
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = verbs.add_parser(
        "wipe", parents=[common], help="the seed's reset (soft): memories and summaries"
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = verbs.add_parser("session", parents=[common], help="session summaries")
    p.add_argument("session_id", nargs="?", help="one session (all when omitted)")
    p = verbs.add_parser(
        "stats",
        parents=[common],
        help="counts, change counter, store problems (of --project/--user, else every namespace)",
    )
    p = verbs.add_parser(
        "add",
        parents=[common],
        help="save one memory (a known title updates it) through the guard, as an agent would",
    )
    p.add_argument("title", help="the memory's key and title")
    p.add_argument("content")
    p.add_argument("--tag", action="append", default=[], help="a tag (repeat for several)")
    p.add_argument("--scope", choices=SCOPES, help="default: classified from the content")
    p.add_argument("--type", choices=validation.TYPES, help="default: classified")
    p.add_argument("--actor", help="who writes, on the audit event (default cli:<login>)")
    p = verbs.add_parser("import", parents=[common], help="bulk-import memories from JSON lines")
    p.add_argument(
        "file", help='one {"key", "value", "tags"?, "scope"?, "type"?} per line ("-" = stdin)'
    )
    p.add_argument("--skip-invalid", action="store_true", help="import the valid lines anyway")
    p.add_argument("--dry-run", action="store_true", help="validate only, write nothing")
    return {
        "list": do_list,
        "search": do_search,
        "tag": do_tag,
        "delete": do_delete,
        "clear": do_clear,
        "wipe": do_wipe,
        "session": do_session,
        "stats": do_stats,
        "add": do_add,
        "import": do_import,
    }


def _reading(parser) -> None:
    """The options of the read-only memory verbs."""
    parser.add_argument("--scope", choices=SCOPES)
    parser.add_argument(
        "--all-namespaces", action="store_true", help="read every namespace (ignores --project)"
    )
    parser.add_argument("--full", action="store_true", help="print long contents whole")


def _everywhere(options, keep=None, narrow=None) -> list[Memory]:
    """Live memories of every namespace (one scope if given) that ``keep`` accepts.

    ``narrow(queryset, alias)`` is the facade's SQL superset (the same prefilters its
    ``search``/``filter_by_tag`` use), so only candidate rows leave the database.
    """
    alias = options["database"]
    rows = Memory.objects.using(alias).live().order_by("namespace", "created_at")
    if options["scope"]:
        rows = rows.filter(scope=options["scope"])
    if narrow is not None:
        rows = narrow(rows, alias)
    return [m for m in rows.iterator(chunk_size=2000) if keep is None or keep(m)]


def _elsewhere(cmd, options, rows) -> None:
    """After an empty read of the bound namespaces: say where live memories are, if anywhere.

    A first ``memory list`` without ``--project`` reads the default namespace
    (``''``), which is often empty while the agents' namespaces are not.
    """
    if rows:
        return
    bound = {options["project"], *([options["user"]] if options["user"] else [])}
    others = Memory.objects.using(options["database"]).live().exclude(namespace__in=bound)
    spaces = others.values("namespace").distinct().count()
    if spaces:
        cmd.stdout.write(
            f"{plural(others.count(), 'live memory is', 'live memories are')} in "
            f"{plural(spaces, 'other namespace', 'other namespaces')}: name one with "
            "--project (and --user), or read them all with --all-namespaces."
        )


def do_list(cmd, options) -> None:
    """Print the live memories of a scope."""
    if options["all_namespaces"]:
        return cmd.print_memories(_everywhere(options), options, everywhere=True)
    rows = cmd.manager(options).get_all_entries(options["scope"])
    cmd.print_memories(rows, options)
    _elsewhere(cmd, options, rows)


def do_search(cmd, options) -> None:
    """Print the memories matching a substring."""
    if options["all_namespaces"]:
        needle = validation.check_query(options["query"]).strip().lower()
        rows = _everywhere(
            options,
            lambda m: bool(needle) and search.matches(m, needle),
            search.sql_narrowing("search_prefilter", needle),
        )
        return cmd.print_memories(rows, options, everywhere=True)
    rows = cmd.manager(options).search(options["query"], options["scope"])
    cmd.print_memories(rows, options)
    _elsewhere(cmd, options, rows)


def do_tag(cmd, options) -> None:
    """Print the memories carrying a tag."""
    if options["all_namespaces"]:
        wanted = validation.check_query(options["tag"], "Tag filter").strip().lower()
        rows = _everywhere(
            options,
            lambda m: wanted in {t.lower() for t in m.tags},
            search.sql_narrowing("tagged_prefilter", wanted),
        )
        return cmd.print_memories(rows, options, everywhere=True)
    rows = cmd.manager(options).filter_by_tag(options["tag"], options["scope"])
    cmd.print_memories(rows, options)
    _elsewhere(cmd, options, rows)


def do_delete(cmd, options) -> None:
    """Soft-delete the memories with a title, after confirmation."""
    mm = cmd.manager(options)
    wanted = options["title"].strip().lower()
    matches = [m for m in mm.get_all_entries() if m.title.strip().lower() == wanted]
    if not matches:
        raise CommandError(f"No live memory is titled {options['title']!r}.")
    if not cmd.confirm(f"Soft-delete {plural(len(matches), 'memory', 'memories')}?", options):
        return
    count = mm.delete_by_title(options["title"], actor=cli_actor(options))
    cmd.stdout.write(f"Deleted {plural(count, 'memory', 'memories')} (soft delete).")


def do_clear(cmd, options) -> None:
    """Soft-delete every memory of a scope, after confirmation."""
    scope = options["scope"] or "project and user"
    if not cmd.confirm(f"Soft-delete every {scope} memory of this namespace?", options):
        return
    count = cmd.manager(options).clear(options["scope"], actor=cli_actor(options))
    cmd.stdout.write(f"Cleared {plural(count, 'memory', 'memories')} (soft delete).")


def do_wipe(cmd, options) -> None:
    """The seed's wipe_all, after confirmation; a partial failure exits non-zero."""
    question = (
        "Wipe this namespace (soft-delete its memories, delete its session summaries)? "
        "This is NOT erasure: use 'memory erase' to remove data for good."
    )
    if not cmd.confirm(question, options):
        return
    result = cmd.manager(options).wipe_all(actor=cli_actor(options))
    cmd.stdout.write(
        f"memories cleared: {result.memories_cleared}; "
        f"summaries cleared: {result.summaries_cleared}; ok: {result.ok}"
    )
    if not result.ok:
        raise CommandError(f"not cleared: {', '.join(result.not_cleared)}")


def do_session(cmd, options) -> None:
    """Print the session summaries of the namespace (or of one session)."""
    rows = cmd.manager(options).list_session_summaries(options["session_id"])
    for s in rows:
        cmd.stdout.write(
            f"{s.created_at:%Y-%m-%d %H:%M:%S}  session {s.session_id}  "
            f"({s.messages_summarized} messages, {s.tokens_before} tokens)"
        )
        cmd.stdout.write(f"    {s.summary_text}")
    cmd.stdout.write(f"{len(rows)} summar{'y' if len(rows) == 1 else 'ies'}.")


def do_stats(cmd, options) -> None:
    """Counts per namespace/scope/type, the change counter and store problems.

    With ``--project`` (and ``--user``) the counts are of those namespaces;
    without either, of every namespace.
    """
    using = options["database"]
    memories = Memory.objects.using(using)
    items = ReviewItem.objects.using(using)
    if options["project"] or options["user"]:
        bound = [options["project"], *([options["user"]] if options["user"] else [])]
        memories = memories.filter(namespace__in=bound)
        items = items.filter(namespace__in=bound)
        where = bound_to(options)
    else:
        where = "every namespace (--project NS for one)"
    counts = Counter(memories.live().values_list("namespace", "scope", "type"))
    cmd.stdout.write(f"live memories by namespace / scope / type, {where}:")
    for (ns, scope, mem_type), n in sorted(counts.items()):
        cmd.stdout.write(f"  {ns or '(default)'}  {scope}  {mem_type}: {n:,}")
    if not counts:
        cmd.stdout.write("  (none)")
    cmd.stdout.write(f"soft-deleted memories: {memories.deleted().count():,}")
    cmd.stdout.write(f"pending review items: {items.pending().count():,}")
    meta = dict(SchemaMeta.objects.using(using).values_list("key", "value"))
    # One counter for the whole store: it moves with a write to any namespace.
    cmd.stdout.write(f"memories_change (every namespace): {meta.get('memories_change', '0')}")
    cmd.stdout.write(f"schema version: {meta.get('version', '?')}")
    mm = cmd.manager(options)
    mm.get_all_entries()
    mm.get_cross_session_tail()
    problems = mm.take_store_problems()
    cmd.stdout.write("store problems: " + ("; ".join(problems) if problems else "none"))


def _count_lines(path: str) -> int | None:
    """Lines of a file (the import's total, for the progress line's ETA); None if unreadable."""
    try:
        with open(path, "rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError:
        return None


def do_import(cmd, options) -> None:
    """Validate then write a JSON-lines file of memories in one transaction."""
    import sys

    from memoryapp.writes.bulk import parse_json_lines

    source = options["file"]
    try:
        # Bytes that are not UTF-8 are kept (as lone surrogates) so that their line is
        # reported by number, and skipped with --skip-invalid, instead of a codec error.
        handle = (
            io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
            if source == "-"
            else open(source, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
        )
    except OSError as exc:
        raise CommandError(f"cannot read {source}: {exc.strerror}") from exc
    total = _count_lines(source) if source != "-" else None
    with handle, progress.for_command(cmd, options, "importing", unit="lines") as bar:
        report = cmd.manager(options).import_memories(
            parse_json_lines(handle),
            actor=cli_actor(options),
            skip_invalid=options["skip_invalid"],
            dry_run=options["dry_run"],
            progress=lambda n: bar.update(n, total),
        )
    for number, reason in report.invalid[:50]:
        cmd.stdout.write(f"line {number}: {reason}")
    if len(report.invalid) > 50:
        cmd.stdout.write(f"... and {len(report.invalid) - 50} more invalid lines")
    invalid = plural(len(report.invalid), "invalid line", "invalid lines")
    if options["dry_run"]:
        # Say what the same command without --dry-run would do.
        would = (
            f"it would import {plural(report.total, 'memory', 'memories')} "
            f"({report.created:,} new, {report.updated:,} updated){_merged(report)}"
        )
        if not report.invalid:
            cmd.stdout.write(f"Dry run: every line is valid; {would}. Nothing was written.")
        elif options["skip_invalid"]:
            cmd.stdout.write(f"Dry run: {would}, and skip {invalid}. Nothing was written.")
        else:
            raise CommandError(
                f"Dry run: {invalid}; the import would write nothing "
                "(fix them, or pass --skip-invalid)."
            )
        return
    if not report.written:  # invalid lines without --skip-invalid
        raise CommandError(f"{invalid}; nothing was written (fix them, or pass --skip-invalid).")
    cmd.stdout.write(
        f"Imported {plural(report.total, 'memory', 'memories')} "
        f"({report.created:,} new, {report.updated:,} updated)"
        + _merged(report)
        + (
            f"; skipped {plural(len(report.invalid), 'invalid line', 'invalid lines')}."
            if report.invalid
            else "."
        )
    )


def _merged(report) -> str:
    """ " from 160 lines: 59 of them gave way to a later line with the same key", or ""."""
    if not report.merged:
        return ""
    return (
        f" from {plural(report.lines, 'line', 'lines')}: "
        f"{report.merged:,} of them gave way to a later line with the same key "
        "(the last line of a key wins)"
    )


def do_add(cmd, options) -> None:
    """Save one memory through the facade and its guard (the same write as ``upsert``)."""
    result = cmd.manager(options).upsert_result(
        options["title"],
        options["content"],
        options["tag"],
        scope=options["scope"],
        type=options["type"],
        actor=cli_actor(options),
    )
    m = result.memory
    verb = "Saved new memory" if result.created else "Updated memory"
    cmd.stdout.write(
        f"{verb} {m.id}  [{m.scope}/{m.type}]  {m.title}  in {namespace_label(m.namespace)}."
    )
    for warning in result.warnings:
        cmd.stdout.write(f"note: {warning}")
    if result.capped:
        older = plural(len(result.capped), "older memory", "older memories")
        cmd.stdout.write(f"note: the auto cap soft-deleted {older}.")
