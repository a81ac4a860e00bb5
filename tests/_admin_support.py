"""Helpers shared by the admin tests (test client) and the browser tests."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from memoryapp import MemoryManager
from memoryapp.rules.errors import SensitiveMemoryError
from memoryapp.rules.guard import MemoryGuard

PROJECT = "acme/web"
ALICE = "acme/alice"
BOB = "acme/bob"
PASSWORD = "correct-horse-battery-staple"

MEMORIES = "/admin/memoryapp/memory/"
REVIEW = "/admin/memoryapp/reviewitem/"
SUMMARIES = "/admin/memoryapp/sessionsummary/"
EVENTS = "/admin/memoryapp/memoryevent/"
SCHEMA = "/admin/memoryapp/schemameta/"
RECEIPTS = "/admin/memoryapp/erasurereceipt/"
ERASE_SUBJECT = RECEIPTS + "erase-subject/"
WIPE = RECEIPTS + "wipe-namespace/"
EXPORT = RECEIPTS + "export/"
PURGE_REVIEW = REVIEW + "purge/"

OPERATOR_PERMS = (
    "view_memory",
    "change_memory",
    "delete_memory",
    "add_memory",
    "view_reviewitem",
    "change_reviewitem",
    "view_sessionsummary",
    "delete_sessionsummary",
    "view_memoryevent",
    "view_schemameta",
)
"""A day-to-day operator: everything but erasure, purge, wipe and export."""

REQUEST_HANDLER_PERMS = ("view_subjectrequest", "add_subjectrequest", "change_subjectrequest")
"""Someone who records and answers subject requests, without export or erasure."""

DESK_PERMS = (
    *REQUEST_HANDLER_PERMS,
    "export_memory",
    "erase_memory",
    "view_erasurereceipt",
    "view_exportrecord",
)
"""A compliance officer at the desk: requests, exports, erasures and their proofs."""

COMPLIANCE_PERMS = ("erase_memory", "wipe_memory", "export_memory", "purge_reviewitem")


class StrictGuard(MemoryGuard):
    """A host's stricter guard (``MEMORYAPP_GUARD``): also refuses anything marked confidential."""

    def detect_sensitive(self, content: str) -> None:
        super().detect_sensitive(content)
        if "confidential" in content.lower():
            raise SensitiveMemoryError()


def make_staff(username: str, perms=(), *, superuser: bool = False, password: str | None = None):
    """A staff user with the given ``memoryapp`` permission codenames.

    Without ``password`` the account can only be logged in with ``force_login``
    (no password hashing: the test-client suites stay fast).
    """
    model = get_user_model()
    if superuser:
        return model.objects.create_superuser(username, f"{username}@example.com", password)
    user = model.objects.create_user(username, f"{username}@example.com", password, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="memoryapp", codename__in=list(perms))
    )
    return user


def client_for(user) -> Client:
    """A test client logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def act(client: Client, url: str, action: str, ids, *, confirm: bool = False, **extra):
    """POST an admin action as the changelist (and its confirmation page) would."""
    data = {"action": action, "_selected_action": list(ids), **extra}
    if confirm:
        data["post"] = "yes"
    return client.post(url, data)


def messages_of(response) -> list[str]:
    """The texts of the messages shown after a (followed) response."""
    return [str(m) for m in response.context["messages"]] if response.context else []


def corrupt_sqlite_file(path) -> None:
    """A file with a valid SQLite header and garbage pages: it opens, then every query fails."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE memories (id TEXT)")
    conn.executemany("INSERT INTO memories VALUES (?)", [(str(i) * 50,) for i in range(500)])
    conn.commit()
    conn.close()
    data = bytearray(path.read_bytes())
    for i in range(100, len(data)):
        data[i] = (i * 7 + 13) % 256
    path.write_bytes(bytes(data))


def seed_tenant() -> dict:
    """A small, realistic store: two users of one project, a soft-deleted row, a summary,
    review items. Returns the interesting rows by name."""
    alice = MemoryManager(project=PROJECT, user=ALICE, session_id="sess-alice-1")
    bob = MemoryManager(project=PROJECT, user=BOB, session_id="sess-bob-1")
    rows = {
        "editor": alice.upsert(
            "Preferred editor", "Alice edits in vim with relative numbers", tags=["preference"]
        ),
        "deploy": alice.upsert(
            "Deploy target",
            "We deploy to fly.io with make deploy; 100% of builds go through CI",
            tags=["workflow", "ops"],
            scope="project",
        ),
        "city": alice.upsert("user_city", "Alice lives in Lisbon", scope="user"),
        "bob_editor": bob.upsert("Preferred editor", "Bob uses emacs", tags=["preference"]),
    }
    old = alice.upsert("Old laptop", "Alice used a ThinkPad X220", scope="user")
    alice.delete(old.id)
    rows["old"] = old
    alice.save_session_summary("Alice and the agent set up vim and a deploy pipeline", 900, 12)
    bob.save_session_summary("Bob asked about emacs packages", 300, 4)
    rows["review"] = alice.crystallize_user_messages(
        [
            {"role": "user", "content": "I prefer dark themes for every editor."},
            {"role": "user", "content": "Never use tabs for indentation, please."},
        ]
    )
    return rows
