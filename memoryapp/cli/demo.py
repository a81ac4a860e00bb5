"""``manage.py memory demo``: a few realistic tenants to try the admin, the API and recall on.

Everything goes through the facade with its guard, as an agent would write it:
memories (``upsert``), session summaries, and review items proposed by the
crystallizer from user messages. Running it again changes nothing; it refuses a
database that holds anything but its own rows unless ``--force``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.management.base import CommandError

from memoryapp.cli import cli_actor
from memoryapp.facade import MemoryManager
from memoryapp.models import Memory, ReviewItem, SessionSummary
from memoryapp.rules.validation import normalize_key
from memoryapp.rules.wording import plural


@dataclass(frozen=True)
class Person:
    """A user of a tenant, with what the agent remembers about them and their session."""

    namespace: str
    session_id: str
    memories: tuple[tuple[str, str, tuple[str, ...]], ...]  # (title, content, tags): user scope
    summary: str
    messages: tuple[str, ...]  # what they said: the crystallizer's input


@dataclass(frozen=True)
class Tenant:
    """A project namespace: its shared memories and its people."""

    project: str
    memories: tuple[tuple[str, str, tuple[str, ...]], ...]  # project scope
    people: tuple[Person, ...] = field(default=())


TENANTS: tuple[Tenant, ...] = (
    Tenant(
        project="acme/web",
        memories=(
            (
                "Deploy target",
                "Production runs on fly.io; deploy with `make deploy` "
                "from main only, after CI is green.",
                ("ops", "deploy"),
            ),
            (
                "Release cadence",
                "We release every Tuesday and Thursday morning; no deploys on Fridays.",
                ("process",),
            ),
            (
                "Frontend stack",
                "React 18 with TypeScript and Vite; CSS modules, no Tailwind.",
                ("frontend",),
            ),
            (
                "Database",
                "PostgreSQL 16 on a managed instance; migrations with Alembic, reviewed in the PR.",
                ("backend", "database"),
            ),
            (
                "Error tracking",
                "Sentry for the web app and the API; alerts go to #web-alerts.",
                ("ops",),
            ),
            (
                "Code review",
                "Every PR needs one approval and a passing CI; squash-merge into main.",
                ("process",),
            ),
        ),
        people=(
            Person(
                namespace="acme/alice",
                session_id="demo-acme-alice-1",
                memories=(
                    (
                        "Preferred editor",
                        "Alice edits in vim with relative line numbers.",
                        ("preference",),
                    ),
                    (
                        "Working hours",
                        "Alice works 08:00-16:00 CET and prefers async updates after that.",
                        ("preference",),
                    ),
                    (
                        "user_language",
                        "Alice prefers answers in English, with code comments in English too.",
                        (),
                    ),
                ),
                summary=(
                    "Alice and the agent moved the staging deploy to fly.io "
                    "and wrote the runbook for rollbacks."
                ),
                messages=(
                    "I prefer short answers with the command first.",
                    "Never deploy on Fridays, please.",
                ),
            ),
            Person(
                namespace="acme/bob",
                session_id="demo-acme-bob-1",
                memories=(
                    (
                        "Preferred editor",
                        "Bob uses Emacs with the LSP mode for TypeScript.",
                        ("preference",),
                    ),
                    ("Focus area", "Bob owns the checkout flow and its A/B tests.", ()),
                ),
                summary=(
                    "Bob profiled the checkout page; the agent suggested "
                    "code-splitting the payment widget."
                ),
                messages=("We decided to use Stripe Elements for the payment form.",),
            ),
        ),
    ),
    Tenant(
        project="globex/support",
        memories=(
            (
                "Ticket priorities",
                "P1 answers within 1 hour around the clock; P2 within one business day.",
                ("support", "sla"),
            ),
            (
                "Escalation path",
                "Escalate billing issues to the finance queue, outages to the on-call engineer.",
                ("support",),
            ),
            (
                "Tone of voice",
                "Friendly and concise; no jargon; sign with the first name only.",
                ("style",),
            ),
            (
                "Refund policy",
                "Refunds within 30 days without questions; after that, a team lead decides.",
                ("billing",),
            ),
        ),
        people=(
            Person(
                namespace="globex/carol",
                session_id="demo-globex-carol-1",
                memories=(
                    ("Languages", "Carol answers tickets in English and Portuguese.", ("profile",)),
                    ("Shift", "Carol covers the early shift, 06:00-14:00 UTC.", ()),
                ),
                summary=(
                    "Carol triaged the overnight queue; the agent drafted "
                    "replies for three billing tickets."
                ),
                messages=(
                    "I prefer drafts that quote the customer's question first.",
                    "Always attach the order number to a refund ticket.",
                ),
            ),
        ),
    ),
    Tenant(
        project="initech/payroll",
        memories=(
            (
                "Pay dates",
                "Salaries are paid on the 25th; when it falls on a weekend, the Friday before.",
                ("payroll",),
            ),
            (
                "Approval rule",
                "Any payroll change over 5,000 EUR needs the CFO's approval in writing.",
                ("policy",),
            ),
            ("Data retention", "Payslips are kept for 10 years, then erased.", ("compliance",)),
        ),
        people=(
            Person(
                namespace="initech/dave",
                session_id="demo-initech-dave-1",
                memories=(
                    (
                        "Report format",
                        "Dave wants monthly reports as CSV with a summary line on top.",
                        ("preference",),
                    ),
                ),
                summary=(
                    "Dave reconciled the November payroll run; two overtime entries were corrected."
                ),
                messages=("We decided to close the payroll run on the 20th of each month.",),
            ),
        ),
    ),
)


def demo_namespaces() -> set[str]:
    """Every namespace the demo writes."""
    return {t.project for t in TENANTS} | {p.namespace for t in TENANTS for p in t.people}


def register(verbs, common) -> dict:
    """Add ``demo`` to the parser; return its handler."""
    p = verbs.add_parser(
        "demo",
        parents=[common],
        help="fill a few demo tenants (memories, summaries, review items); safe to run again",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write the demo data even into a database that holds other data",
    )
    p.add_argument("--actor", help="who writes, on the audit events (default cli:<login>)")
    return {"demo": do_demo}


def _foreign_rows(using: str) -> int:
    """Rows that are not the demo's: in other namespaces, or memories of keys it does not write."""
    spaces = demo_namespaces()
    keys = {
        ns: {normalize_key(title) for title, _, _ in memories}
        for ns, memories in _memories_by_namespace()
    }
    count = 0
    for model in (Memory, SessionSummary, ReviewItem):
        count += model.objects.using(using).exclude(namespace__in=spaces).count()
    for ns, wanted in keys.items():
        count += (
            Memory.objects.using(using)
            .filter(namespace=ns)
            .exclude(key_normalized__in=wanted)
            .count()
        )
    return count


def _memories_by_namespace():
    for tenant in TENANTS:
        yield tenant.project, tenant.memories
        for person in tenant.people:
            yield person.namespace, person.memories


@dataclass
class _Tally:
    written: int = 0
    kept: int = 0
    summaries: int = 0
    review: int = 0


def _write_memory(mm: MemoryManager, namespace, scope, title, content, tags, actor, tally) -> None:
    """Upsert unless the same live memory is already there (a second run writes nothing)."""
    alias = mm.user_using if scope == "user" else mm.using
    current = (
        Memory.objects.using(alias)
        .live()
        .filter(namespace=namespace, scope=scope, key_normalized=normalize_key(title))
        .values_list("content", flat=True)
        .first()
    )
    if current == content:
        tally.kept += 1
        return
    mm.upsert(title, content, list(tags), scope=scope, actor=actor)
    tally.written += 1


def do_demo(cmd, options) -> None:
    """Write the demo tenants through the facade; refuse a database with other data."""
    using = options["database"]
    foreign = _foreign_rows(using)
    if foreign and not options["force"]:
        raise CommandError(
            f"this database holds {plural(foreign, 'row that is', 'rows that are')} not demo data; "
            "the demo is for an empty database (pass --force to add it anyway)."
        )
    actor = cli_actor(options)
    tally = _Tally()
    for tenant in TENANTS:
        project = MemoryManager(project=tenant.project, using=using)
        for title, content, tags in tenant.memories:
            _write_memory(project, tenant.project, "project", title, content, tags, actor, tally)
        for person in tenant.people:
            mm = MemoryManager(
                project=tenant.project, user=person.namespace, using=using,
                session_id=person.session_id,
            )  # fmt: skip
            for title, content, tags in person.memories:
                _write_memory(mm, person.namespace, "user", title, content, tags, actor, tally)
            summaries = SessionSummary.objects.using(using).filter(
                namespace=tenant.project, session_id=person.session_id
            )
            if not summaries.exists() and mm.save_session_summary(
                person.summary, tokens_before=4_200, messages_summarized=18
            ):
                tally.summaries += 1
            proposed = ReviewItem.objects.using(using).filter(
                namespace=tenant.project, source_session=person.session_id
            )
            if not proposed.exists():  # proposing again would count the same items twice
                tally.review += len(
                    mm.crystallize_user_messages(
                        [{"role": "user", "content": text} for text in person.messages]
                    )
                )
    people = sum(len(t.people) for t in TENANTS)
    cmd.stdout.write(
        f"Demo data in {plural(len(TENANTS), 'tenant', 'tenants')} "
        f"({plural(people, 'user', 'users')}): "
        f"{plural(tally.written, 'memory', 'memories')} written, "
        f"{tally.kept:,} already there; "
        f"{plural(tally.summaries, 'session summary', 'session summaries')} and "
        f"{plural(tally.review, 'review item', 'review items')} added."
    )
    cmd.stdout.write(
        "Try: the admin (Memories, Review items), "
        "'manage.py memory list --project acme/web --user acme/alice', "
        "or 'manage.py memory search deploy --all-namespaces'."
    )
