"""``manage.py memory``: the seed's /memory verbs."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.models import Memory, MemoryEvent, ReviewItem, SessionSummary

pytestmark = pytest.mark.django_db


def run(*args, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("builtins.input", lambda prompt="": stdin)
    call_command("memory", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def seeded():
    mm = MemoryManager(project="p", user="u")
    mm.upsert("Markup [bold]x[/bold]", "<b>literal</b> [red]text[/red] \\n", ["ci"])
    mm.upsert("user_lang", "English")
    MemoryManager(project="other").upsert("secret plan", "other tenant")
    mm.save_session_summary("summary of session")
    return mm


def test_list_prints_markup_literally(seeded):
    out = run("list", "--project", "p", "--user", "u")
    assert "Markup [bold]x[/bold]" in out
    assert "<b>literal</b> [red]text[/red] \\n" in out
    assert "other tenant" not in out
    assert "2 memories in project 'p' and user 'u'." in out


def test_list_by_scope_search_and_tag(seeded):
    assert "English" in run("list", "--project", "p", "--user", "u", "--scope", "user")
    assert "Markup" not in run("list", "--project", "p", "--user", "u", "--scope", "user")
    assert "1 memory in project 'p'." in run("search", "literal", "--project", "p")
    assert "Markup" in run("tag", "CI", "--project", "p")


def test_delete_asks_and_respects_no(seeded, monkeypatch):
    with pytest.raises(CommandError, match="Aborted"):  # exit status 1, not 0
        run("delete", "Markup [bold]x[/bold]", "--project", "p", stdin="n", monkeypatch=monkeypatch)
    assert Memory.objects.live().filter(namespace="p").count() == 1
    out = run(
        "delete", "markup [BOLD]x[/bold]", "--project", "p", stdin="y", monkeypatch=monkeypatch
    )
    assert "Deleted 1" in out
    assert Memory.objects.live().filter(namespace="p").count() == 0


def test_delete_unknown_title_is_an_error(seeded):
    with pytest.raises(CommandError, match="No live memory"):
        run("delete", "nope", "--project", "p", "--yes")


def test_clear_needs_confirmation(seeded, monkeypatch):
    with pytest.raises(CommandError, match="Aborted"):
        run("clear", "--project", "p", "--user", "u", stdin="", monkeypatch=monkeypatch)
    out = run("clear", "--project", "p", "--user", "u", "--scope", "user", "--yes")
    assert "Cleared 1" in out
    assert Memory.objects.live().filter(namespace="u").count() == 0
    assert Memory.objects.live().filter(namespace="p").count() == 1


def test_wipe(seeded):
    out = run("wipe", "--project", "p", "--user", "u", "--yes")
    assert "memories cleared: 2; summaries cleared: 1; ok: True" in out
    assert SessionSummary.objects.filter(namespace="p").count() == 0
    assert Memory.objects.live().filter(namespace="other").count() == 1


def test_session_lists_summaries(seeded):
    out = run("session", seeded.session_id, "--project", "p")
    assert "summary of session" in out and "1 summary." in out
    assert "0 summaries." in run("session", "nope", "--project", "p")


def test_stats(seeded):
    out = run("stats", "--project", "p")
    assert "live memories by namespace / scope / type, project 'p':" in out
    assert "p  project  note: 1" in out
    assert "other" not in out and "  u  " not in out  # the project asked for, only
    assert "memories_change (every namespace):" in out
    assert "store problems: none" in out
    out = run("stats", "--project", "p", "--user", "u")
    assert "p  project  note: 1" in out and "u  user  note: 1" in out
    assert "other" not in out
    out = run("stats")  # no namespace named: every namespace, said so
    assert "every namespace (--project NS for one)" in out
    assert "p  project  note: 1" in out and "other  project  note: 1" in out


def test_stats_counts_deleted_and_pending_of_the_project_only(seeded):
    MemoryManager(project="other").crystallize_user_messages(
        [{"role": "user", "content": "Never use tabs for indentation"}]
    )
    MemoryManager(project="other").delete_by_title("secret plan")
    out = run("stats", "--project", "p")
    assert "soft-deleted memories: 0" in out and "pending review items: 0" in out
    out = run("stats", "--project", "other")
    assert "soft-deleted memories: 1" in out and "pending review items: 1" in out


def test_an_empty_list_points_at_the_namespaces_that_hold_memories(seeded):
    out = run("list")
    assert "0 memories in project '' (default)." in out
    assert (
        "3 live memories are in 3 other namespaces: name one with --project (and --user), "
        "or read them all with --all-namespaces." in out
    )
    assert "other namespace" in run("search", "nothing like it", "--project", "p")
    assert "other namespace" not in run("list", "--project", "p")  # not empty: no hint
    Memory.objects.all().delete()
    assert "other namespace" not in run("list")  # nothing anywhere: nothing to point at


def test_add_saves_one_memory_through_the_guard(seeded):
    out = run(
        "add", "Deploy window", "Never deploy on Fridays", "--tag", "ops", "--tag", "release",
        "--project", "p", "--scope", "project", "--actor", "ops-team",
    )  # fmt: skip
    m = Memory.objects.get(namespace="p", key_normalized="deploy_window")
    assert out.strip() == f"Saved new memory {m.id}  [project/{m.type}]  Deploy window  in 'p'."
    assert (m.content, m.tags, m.source) == (
        "Never deploy on Fridays",
        ["ops", "release"],
        "explicit",
    )
    assert MemoryEvent.objects.get(memory_id=m.id, event_type="create").actor == "ops-team"
    out = run("add", "Deploy window", "Fridays are fine now", "--project", "p")
    assert out.startswith(f"Updated memory {m.id}")
    assert Memory.objects.get(pk=m.id).content == "Fridays are fine now"
    out = run("add", "user_lang", "French", "--project", "p", "--user", "u", "--scope", "user")
    assert "[user/" in out and "in 'u'." in out


def test_add_refuses_what_the_guard_refuses_without_echoing_it(seeded):
    secret = "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    with pytest.raises(CommandError) as refused:
        run("add", "creds", secret, "--project", "p")
    assert "ghp_" not in str(refused.value)
    with pytest.raises(CommandError, match="empty"):
        run("add", "blank", "   ", "--project", "p")
    with pytest.raises(CommandError):
        run("add", "t", "c", "--type", "gossip")
    assert not Memory.objects.filter(key_normalized__in=["creds", "blank"]).exists()


def test_bad_scope_is_a_usage_error(seeded):
    with pytest.raises(CommandError):
        run("list", "--scope", "global")


# ----------------------------------------------------------------- review
def test_crystallize_and_review_verbs(tmp_path, monkeypatch):
    msgs = tmp_path / "m.json"
    msgs.write_text(
        json.dumps(
            [
                {"role": "user", "content": "Never use tabs for indentation"},
                {"role": "user", "content": "I prefer [dark] mode"},
                {"role": "assistant", "content": "I prefer nothing"},
            ]
        )
    )
    out = run("crystallize", str(msgs), "--project", "p", "--user", "u")
    assert "2 proposal(s) queued" in out
    listing = run("review", "--project", "p")
    assert "Preference: [dark] mode" in listing and "2 review items in 'p'." in listing
    item = ReviewItem.objects.get(key_normalized="constraint_not_use_tabs_for_indentation")
    out = run("review", "--project", "p", "--user", "u", "--approve", item.id)
    assert "Approved" in out
    assert Memory.objects.get(key_normalized=item.key_normalized).source == "crystallized"
    with pytest.raises(CommandError, match="No pending"):
        run("review", "--project", "p", "--approve", item.id)
    other = ReviewItem.objects.get(key_normalized__startswith="preference_")
    assert "Rejected" in run("review", "--project", "p", "--reject", other.id)
    with pytest.raises(CommandError, match="Aborted"):
        run("review", "--project", "p", "--purge", stdin="n", monkeypatch=monkeypatch)
    assert ReviewItem.objects.count() == 2
    out = run("review", "--project", "p", "--purge", "--status", "rejected", "--yes")
    assert "Purged 1" in out
    assert list(ReviewItem.objects.values_list("status", flat=True)) == ["approved"]


def test_crystallize_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        run("crystallize", str(bad))
    with pytest.raises(CommandError, match="cannot read"):
        run("crystallize", str(tmp_path / "missing.json"))
