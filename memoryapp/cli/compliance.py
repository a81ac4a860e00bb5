"""Compliance verbs of `manage.py memory`: erase (replay, retry), export, purge-expired, backup."""

from __future__ import annotations

import contextlib
import json

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from memoryapp import compliance
from memoryapp.cli import cli_actor, progress
from memoryapp.cli.subject_key import STDIN_HELP, subject_from_stdin
from memoryapp.compliance.selection import ADMIN_LOG
from memoryapp.conf import PURGE_METHODS, purge_method
from memoryapp.db.lookups import prefix_q
from memoryapp.models import ErasureReceipt, ReceiptState, ReviewItem, ReviewStatus
from memoryapp.rules.copy_text import phrases as copy_phrases
from memoryapp.rules.wording import plural
from memoryapp.services import review


def register(verbs, common) -> dict:
    """Add the compliance verbs to the parser; return their handlers."""
    p = verbs.add_parser(
        "erase",
        parents=[common],
        help="erase for real (hard delete + vacuum), with a receipt; --replay after a restore",
    )
    what = p.add_argument_group("what to erase (one of)")
    what.add_argument("--subject", help="a user key: everything written for it or in its sessions")
    what.add_argument("--subject-stdin", action="store_true", help="as --subject, " + STDIN_HELP)
    what.add_argument("--namespace", help="a namespace (with --subject/--id: a restriction)")
    what.add_argument(
        "--id",
        dest="ids",
        action="append",
        metavar="ID",
        type=_row_id,
        help="repeatable; an id held in more than one namespace needs --namespace",
    )
    what.add_argument("--everything", action="store_true", help="every memory table row")
    what.add_argument(
        "--review-items",
        action="store_true",
        help="the review queue (filters: --namespace, --subject, --status)",
    )
    p.add_argument("--status", action="append", choices=ReviewStatus.values, help="repeatable")
    p.add_argument(
        "--include-authored",
        action="store_true",
        help="with --subject: also the project-scope memories the subject wrote",
    )
    other = p.add_argument_group("receipts")
    other.add_argument(
        "--replay", action="store_true", help="re-apply every recorded erasure (after a restore)"
    )
    other.add_argument("--ledger", help="with --replay: a ledger file to read as well")
    other.add_argument(
        "--retry",
        nargs="?",
        const="*",
        metavar="RECEIPT_ID",
        help="complete unfinished erasures now, in the foreground (all, or one receipt: its id "
        "or a unique 8+ prefix; those needing attention too)",
    )
    other.add_argument(
        "--show",
        metavar="RECEIPT_ID",
        help="print one receipt as JSON (its id, or a unique prefix of 8+ characters)",
    )
    other.add_argument("--list", action="store_true", dest="list_receipts", help="list receipts")
    other.add_argument("--write-ledger", metavar="FILE", help="append every receipt to FILE")
    p.add_argument("--no-purge", action="store_true", help="delete now, purge later (--retry)")
    p.add_argument(
        "--method",
        choices=PURGE_METHODS,
        help="the purge method of this run (default MEMORYAPP_ERASURE_PURGE_METHOD); "
        "'rewrite' rewrites whole files/tables: the way out of residue the usual purge leaves",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be removed")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--actor", help="who asks (default cli:<login>)")

    p = verbs.add_parser(
        "purge-expired",
        parents=[common],
        help="erase what the retention settings say has expired, with a receipt",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be removed")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--actor", help="who asks (default cli:<login>)")

    p = verbs.add_parser(
        "worker",
        parents=[common],
        help="complete unfinished erasures (delete, purge, verify) until stopped",
    )
    p.add_argument("--once", action="store_true", help="stop when no receipt is due")
    p.add_argument(
        "--poll", type=float, default=2.0, metavar="SECONDS", help="idle wait between rounds"
    )
    return {
        "worker": do_worker,
        "erase": do_erase,
        "purge-expired": do_purge_expired,
    }


# ------------------------------------------------------------------ helpers
def _row_id(value: str) -> str:
    """An ``--id``: a row id, never empty or blank (``--id ''`` names no row)."""
    import argparse

    if not value.strip():
        raise argparse.ArgumentTypeError("an id is never empty")
    if value != value.strip() or len(value) > 64:
        raise argparse.ArgumentTypeError("not a row id (surrounding spaces, or over 64 characters)")
    return value


def aliases_of(options):
    """``--database`` as given; the default alias means "default + the user database"."""
    alias = options["database"]
    if alias not in connections:
        raise CommandError(f"unknown database alias {alias!r}")
    return None if alias == DEFAULT_DB_ALIAS else alias


def _actor(options) -> str:
    return cli_actor(options)


def _counts(counts: dict) -> str:
    """Rows per table; the admin history's entries are kept (titles replaced), so said apart."""
    parts = [f"{table} {n}" for table, n in counts.items() if n and table != ADMIN_LOG]
    text = ", ".join(parts) or "nothing"
    if counts.get(ADMIN_LOG):
        text += f" (and {ADMIN_LOG} {counts[ADMIN_LOG]} titles replaced)"
    return text


def print_receipt(cmd, r: ErasureReceipt) -> None:
    """Print a receipt's counts, state, purge and verification (every erasing command)."""
    cmd.stdout.write(f"Erasure receipt {r.pk} ({r.target_kind}), {r.created_at:%Y-%m-%d %H:%M:%S}")
    cmd.stdout.write(f"  removed: {_counts(r.counts)}")
    kept = (r.authored or {}).get("project_memories_kept")
    if kept:
        cmd.stdout.write(
            f"  kept: {plural(kept, 'project-scope memory', 'project-scope memories')} "
            "the subject authored "
            "(--include-authored erases them)"
        )
    cmd.stdout.write(f"  state: {r.state}")
    cmd.stdout.write(f"  purge: {r.purge_status} [{r.purge_method}]")
    # The outcome by name: never "verified: yes" beside a byte scan that was not possible.
    cmd.stdout.write(f"  outcome: {compliance.outcome_words(r)}")
    for copy in copy_phrases((r.details or {}).get("copies") or []):
        cmd.stdout.write(f"  copy: {copy}")
    if r.verification:
        cmd.stdout.write(f"  verification: {r.verification}")
    for line in (r.caveats or "").splitlines():
        cmd.stdout.write(f"  caveat: {line}")


def fail_unless_purged(receipts) -> None:
    """Exit non-zero, naming the next step, unless every receipt is purged and verified."""
    unfinished = [r for r in receipts if not (r.purged and r.verified)]
    if not unfinished:
        return
    ids = ", ".join(r.pk for r in unfinished)
    if any(r.state == ReceiptState.NEEDS_ATTENTION for r in unfinished):
        after = "automatic retries have stopped"
    else:
        after = "a running 'manage.py memory worker' retries it with backoff"
    one = unfinished[0].pk if len(unfinished) == 1 else "<id>"
    raise CommandError(
        f"the erasure is not complete for {ids} (see above why); {after}. Next: "
        f"'manage.py memory erase --retry {one}' now, or with '--method rewrite' when the "
        "byte scan keeps finding residue (docs/compliance.md)"
    )


def _print_retry(cmd, r: ErasureReceipt, before: str) -> None:
    """What the retry of one receipt did, in a line above its receipt."""
    attempt = f"attempt {r.attempts}"
    if r.state == ReceiptState.COMPLETE:
        outcome = compliance.outcome_words(r)
        cmd.stdout.write(f"Retried {r.pk} ({before}, {attempt}): complete, {outcome}.")
    elif not r.purged:
        cmd.stdout.write(f"Retried {r.pk} ({before}, {attempt}): {r.purge_status}.")
    else:
        cmd.stdout.write(f"Retried {r.pk} ({before}, {attempt}): purged, NOT verified.")


def _method(options):
    """``--method``: this run's purge method (the settings are left as they are)."""
    method = options.get("method")
    return purge_method(method) if method else contextlib.nullcontext()


def _states(target: str | None, using) -> dict[str, str]:
    """The receipts' states before a retry, to say what it changed."""
    qs = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS)
    qs = qs.filter(pk=target) if target is not None else qs.exclude(state=ReceiptState.COMPLETE)
    return {pk: str(state) for pk, state in qs.values_list("pk", "state")}


@contextlib.contextmanager
def _erasure_progress(cmd, options):
    """The erasure's steps (deleting, purging, verifying) on the progress line."""
    with (
        progress.for_command(cmd, options, "erasing").tick() as bar,
        compliance.phases.observe(bar.phase),
    ):
        yield


# ------------------------------------------------------------------ worker
def do_worker(cmd, options) -> None:
    """Run the erasure worker: SIGTERM or Ctrl-C stop it after the current round."""
    import signal
    import threading

    from memoryapp.compliance import worker

    if options["poll"] <= 0:
        raise CommandError("--poll must be a positive number of seconds")
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}

    def report(change: worker.Change) -> None:
        # One line per change of a receipt; --quiet keeps only those a person must act on.
        if not options["quiet"] or change.needs_attention:
            cmd.stdout.write(change.line())

    if not options["quiet"]:
        cmd.stdout.write(f"Erasure worker {worker.worker_name()} started (Ctrl-C stops it).")
    try:
        done = worker.run(
            using=options["database"],
            poll=options["poll"],
            once=options["once"],
            stop=stop,
            report=report,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not options["quiet"]:
        cmd.stdout.write(f"Erasure worker stopped: {plural(done, 'receipt', 'receipts')} handled.")


# ------------------------------------------------------------------ erase
def do_erase(cmd, options) -> None:
    """Erase, replay, retry, show or list receipts."""
    using = aliases_of(options)
    subject_from_stdin(options)
    if options["user"] and not options["subject"]:
        raise CommandError("erase takes the user key as --subject (not --user)")
    if options["show"]:
        return _show(cmd, options["show"], using)
    if options["list_receipts"]:
        return _list(cmd, using)
    if options["write_ledger"]:
        return _write_ledger(cmd, options["write_ledger"], using)
    if options["retry"] is not None:
        return _retry(cmd, options, using)
    if options["replay"]:
        return _replay(cmd, options, using)
    if options["review_items"]:
        return _erase_review_items(cmd, options, using)
    return _erase_target(cmd, options, using)


def _write_ledger(cmd, path: str, using) -> None:
    qs = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS).order_by("created_at")
    try:
        n = compliance.receipts.write_ledger(path, qs)
    except OSError as exc:
        raise CommandError(f"cannot write the ledger {path}: {exc.strerror or exc}") from None
    cmd.stdout.write(f"Wrote {plural(n, 'receipt', 'receipts')} to {path}.")


def _retry(cmd, options, using) -> None:
    target = None if options["retry"] == "*" else receipt_id(options["retry"], using)
    before = _states(target, using)
    busy: list[compliance.ReceiptInProgress] = []
    try:
        with _erasure_progress(cmd, options), _method(options):
            done = compliance.retry_purge(target, using=using, busy=busy)
    except ErasureReceipt.DoesNotExist:
        raise CommandError(f"no erasure receipt {target!r}") from None
    except compliance.ReceiptInProgress as held:
        raise CommandError(str(held)) from None
    for other in busy:  # retrying all: those another process runs are left to it
        cmd.stdout.write(f"Skipped: {other}.")
    for r in done:
        _print_retry(cmd, r, before.get(r.pk, "unfinished"))
        print_receipt(cmd, r)
    if target is not None and not done:
        cmd.stdout.write(f"Receipt {target} is already complete: nothing to retry.")
    cmd.stdout.write(f"{plural(len(done), 'receipt', 'receipts')} retried.")
    fail_unless_purged(done)


def _erase_target(cmd, options, using) -> None:
    """A subject, ids, a namespace or everything: preview, ask, erase, print the receipt."""
    request = {
        "subject": options["subject"],
        "namespace": options["namespace"],
        "ids": options["ids"],
        "everything": options["everything"],
        "include_authored": options["include_authored"],
    }
    plan = compliance.preview(**request, using=using)
    # A key read from standard input was kept out of argv and history: not printed either.
    described = _describe(request, key_hidden=bool(options.get("subject_stdin")))
    kept = plan["project_memories_kept"]
    note = (
        f" ({plural(kept, 'project-scope memory', 'project-scope memories')} it authored kept)"
        if kept
        else ""
    )
    question = (
        f"Permanently erase {_counts(plan['counts'])} for {described}{note}? This cannot be undone."
    )
    if options["dry_run"]:
        cmd.stdout.write(f"Would erase {_counts(plan['counts'])} for {described}{note}.")
        return
    if not cmd.confirm(question, options):
        return
    with _erasure_progress(cmd, options), _method(options):
        receipt = compliance.erase(
            **request, actor=_actor(options), using=using, purge=not options["no_purge"]
        )
    print_receipt(cmd, receipt)
    if not options["no_purge"]:
        fail_unless_purged([receipt])


def _describe(request: dict, *, key_hidden: bool = False) -> str:
    if request["everything"]:
        return "EVERYTHING (all namespaces)"
    if request["subject"] is not None:
        where = f" in namespace {request['namespace']!r}" if request["namespace"] else ""
        if key_hidden:
            return f"the subject read from standard input{where}"
        return f"subject {request['subject']!r}{where}"
    if request["ids"]:
        return plural(len(request["ids"]), "id", "ids")
    return f"namespace {request['namespace']!r}"


def _erase_review_items(cmd, options, using) -> None:
    filters = {
        "namespace": options["namespace"],
        "status": options["status"],
        "subject": options["subject"],
    }
    label = ", ".join(f"{k}={v}" for k, v in filters.items() if v) or "all review items"
    if options["dry_run"]:
        chosen = ReviewItem.objects.using(using or DEFAULT_DB_ALIAS).filter(
            **{k: v for k, v in filters.items() if v is not None}
        )
        n = chosen.count()
        cmd.stdout.write(
            f"Would erase {plural(n, 'review item', 'review items')} ({label}); nothing done."
        )
        return
    if not cmd.confirm(f"Permanently purge the review queue ({label})?", options):
        return
    with _erasure_progress(cmd, options):
        [receipt] = review.purge(
            namespaces=[filters.pop("namespace")],
            **filters,
            actor=_actor(options),
            using=using,
            purge=not options["no_purge"],
        )
    print_receipt(cmd, receipt)
    if not options["no_purge"]:
        fail_unless_purged([receipt])


def _replay(cmd, options, using) -> None:
    try:
        plan = compliance.replay(ledger=options["ledger"], using=using, dry_run=True)
    except FileNotFoundError as exc:
        raise CommandError(str(exc)) from exc
    for note in plan.notes:
        cmd.stdout.write(f"note: {note}")
    cmd.stdout.write(
        f"{len(plan.replayed)} recorded erasure(s); "
        f"{plan.restored_receipts} known only to the ledger; "
        f"rows to remove again: {_counts(plan.counts)}"
    )
    if options["dry_run"]:
        for line in plan.replayed:
            cmd.stdout.write(f"  {line['id']} ({line['kind']}): {_counts(line['removed'])}")
        return
    if not plan.replayed:
        return
    if not cmd.confirm("Re-apply every recorded erasure to this database?", options):
        return
    report = compliance.replay(
        ledger=options["ledger"],
        actor=_actor(options),
        using=using,
        purge=not options["no_purge"],
    )
    for line in report.replayed:
        cmd.stdout.write(f"  {line['id']} ({line['kind']}): removed {_counts(line['removed'])}")
    cmd.stdout.write(
        f"Restored {plural(report.restored_receipts, 'receipt', 'receipts')} from the ledger."
    )
    if report.receipt is not None:
        print_receipt(cmd, report.receipt)
        if not options["no_purge"]:
            fail_unless_purged([report.receipt])


MIN_RECEIPT_PREFIX = 8  # the admin shows 12; 8 hex digits already tell ~4 billion apart


def receipt_id(typed: str, using=None) -> str:
    """The receipt id ``typed`` names: the whole id, or a unique prefix of 8 or more characters.

    The admin shows a receipt's first 12 characters; an operator types what they see.
    The prefix compares exactly (case-sensitively) on both vendors. A prefix that is
    too short or matches several receipts is a ``CommandError`` saying so.
    """
    rows = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS)
    if rows.filter(pk=typed).exists():
        return typed
    if len(typed) < MIN_RECEIPT_PREFIX:
        raise CommandError(
            f"no erasure receipt {typed!r} (give the id, or at least its first "
            f"{MIN_RECEIPT_PREFIX} characters)"
        )
    found = list(rows.filter(prefix_q("id", typed)).order_by("id").values_list("id", flat=True)[:2])
    if not found:
        raise CommandError(f"no erasure receipt {typed!r}")
    if len(found) > 1:
        raise CommandError(
            f"{typed!r} is the start of more than one erasure receipt: give more characters"
        )
    return found[0]


def _show(cmd, typed: str, using) -> None:
    pk = receipt_id(typed, using)
    r = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS).get(pk=pk)
    cmd.stdout.write(json.dumps(compliance.receipt_as_dict(r), indent=2, sort_keys=True))


def _list(cmd, using) -> None:
    rows = ErasureReceipt.objects.using(using or DEFAULT_DB_ALIAS).order_by("created_at", "id")
    n = 0
    for r in rows:
        n += 1
        total = compliance.rows_removed(r.counts)  # the admin's "removed" column, same rows
        cmd.stdout.write(
            f"{r.pk}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.target_kind:<12} rows {total:<6} "
            f"{compliance.outcome_of(r)[0]}  {r.purge_status}"
        )
    cmd.stdout.write(f"{plural(n, 'receipt', 'receipts')}.")


# ------------------------------------------------------------------ retention
def do_purge_expired(cmd, options) -> None:
    """Erase expired soft-deleted memories, decided review items (and old summaries if set)."""
    using = aliases_of(options)
    plan = compliance.preview_expired(using=using)
    if not plan["cutoffs"]:
        cmd.stdout.write("No retention period is configured (MEMORYAPP_RETENTION_*): nothing done.")
        return
    for table, cutoff in plan["cutoffs"].items():
        cmd.stdout.write(f"{table}: expired before {cutoff}")
    cmd.stdout.write(f"expired: {_counts(plan['counts'])}")
    if options["dry_run"]:
        return
    if not any(plan["counts"].values()):
        cmd.stdout.write("Nothing has expired.")
        return
    if not cmd.confirm("Permanently erase the expired rows?", options):
        return
    with _erasure_progress(cmd, options):
        receipt = compliance.purge_expired(actor=_actor(options), using=using)
    if receipt is None:  # no retention setting: returned above, before the plan
        return
    print_receipt(cmd, receipt)
    fail_unless_purged([receipt])
