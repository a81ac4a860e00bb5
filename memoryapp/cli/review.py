"""Review-queue verbs: ``review`` (list, approve, reject, purge) and ``crystallize FILE``."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from memoryapp.cli import cli_actor
from memoryapp.models import ReviewStatus
from memoryapp.rules.wording import plural


def register(verbs, common) -> dict:
    """Add the review verbs to the parser; return their handlers."""
    p = verbs.add_parser("review", parents=[common], help="list, approve, reject or purge")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--approve", metavar="ID", help="promote a pending item to a memory")
    action.add_argument("--reject", metavar="ID", help="reject a pending item")
    action.add_argument("--purge", action="store_true", help="hard-delete items (see --status)")
    p.add_argument("--status", choices=ReviewStatus.values, help="list or purge only this status")
    p.add_argument("--yes", action="store_true", help="do not ask before purging")
    p = verbs.add_parser(
        "crystallize", parents=[common], help="queue proposals from a JSON file of messages"
    )
    p.add_argument("file", help='JSON list of {"role": ..., "content": ...} messages ("-" = stdin)')
    p.add_argument("--session", default=None, help="session id to record as the source")
    return {"review": do_review, "crystallize": do_crystallize}


def do_review(cmd, options) -> None:
    """List the queue, or approve / reject one item, or purge (confirmed)."""
    mm = cmd.manager(options)
    if options["approve"]:
        memory = mm.approve_review_item(options["approve"], actor=cli_actor(options))
        if memory is None:
            raise CommandError(f"No pending review item {options['approve']!r} in this namespace.")
        cmd.stdout.write(f"Approved: saved memory {memory.key_normalized} ({memory.id}).")
        return
    if options["reject"]:
        if not mm.reject_review_item(options["reject"], actor=cli_actor(options)):
            raise CommandError(f"No pending review item {options['reject']!r} in this namespace.")
        cmd.stdout.write(f"Rejected {options['reject']}.")
        return
    if options["purge"]:
        which = f"{options['status']} " if options["status"] else ""
        question = f"Permanently delete every {which}review item of {mm.project!r}?"
        if not cmd.confirm(question, options):
            return
        count = mm.purge_review_queue(options["status"], actor=cli_actor(options))
        cmd.stdout.write(f"Purged {plural(count, 'review item', 'review items')}.")
        return
    items = mm.list_review_items(options["status"] if options["status"] else "pending")
    for item in items:
        cmd.stdout.write(
            f"{item.id}  [{item.status}] x{item.occurrences}  {item.title}  ({item.confidence})"
        )
        cmd.stdout.write(f"    evidence: {item.evidence}")
    cmd.stdout.write(f"{plural(len(items), 'review item', 'review items')} in {mm.project!r}.")


def do_crystallize(cmd, options) -> None:
    """Run the crystallizer over messages read from a JSON file."""
    import sys

    source = options["file"]
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        messages = json.loads(text)
    except OSError as exc:
        raise CommandError(f"cannot read {source}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise CommandError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(messages, list):
        raise CommandError("the file must hold a JSON list of messages")
    mm = cmd.manager(options)
    if options["session"]:
        mm.archive_session(options["session"])
    items = mm.crystallize_user_messages(messages)
    for item in items:
        cmd.stdout.write(f"{item.id}  x{item.occurrences}  {item.title}")
    cmd.stdout.write(f"{len(items)} proposal(s) queued for review.")
