"""What a new operator hit in ``manage.py memory``: clean errors, honest words, all namespaces."""

from __future__ import annotations

import getpass
import io
import json

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("memory", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_export_to_a_missing_directory_is_a_clean_error_before_any_work(tmp_path):
    MemoryManager(project="acme/web").upsert("editor", "vim")
    target = tmp_path / "missing" / "x.json"
    with pytest.raises(CommandError, match="does not exist"):
        run("export", "--namespace", "acme/web", "-o", str(target))
    assert not target.exists()
    ok = tmp_path / "x.json"
    out, _ = run("export", "--namespace", "acme/web", "-o", str(ok))
    assert "Wrote" in out and json.loads(ok.read_text())["counts"]["memories"] == 1


def test_every_cli_receipt_names_who_asked():
    mm = MemoryManager(project="acme/web")
    mm.crystallize_user_messages([{"role": "user", "content": "I prefer dark mode."}])
    run("review", "--project", "acme/web", "--purge", "--yes")
    receipt = ErasureReceipt.objects.get()
    assert receipt.actor == f"cli:{getpass.getuser()}"


def test_declining_exits_with_an_error(monkeypatch):
    MemoryManager(project="acme/web").upsert("editor", "vim")
    monkeypatch.setattr("builtins.input", lambda prompt="": "no")
    with pytest.raises(CommandError, match="Aborted"):
        run("wipe", "--project", "acme/web")
    assert Memory.objects.live().count() == 1


def test_listings_say_where_they_read_and_can_read_everywhere():
    MemoryManager(project="acme/web").upsert("editor", "vim")
    MemoryManager(project="globex/api").upsert("editor", "emacs")
    MemoryManager(project="", user="acme/bob").upsert("user_lang", "English")
    out, _ = run("list")
    assert "0 memories in project '' (default)." in out
    out, _ = run("list", "--all-namespaces")
    assert "3 memories in 3 namespaces." in out
    assert "'acme/web'" in out and "'globex/api'" in out and "'acme/bob'" in out
    out, _ = run("search", "emacs", "--all-namespaces")
    assert "1 memory in 1 namespace." in out and "globex/api" in out
    out, _ = run("tag", "nothing", "--all-namespaces")
    assert "0 memories in 0 namespaces." in out


def test_long_contents_are_cut_unless_full():
    MemoryManager(project="p").upsert("long", "word " * 300)
    out, _ = run("list", "--project", "p")
    assert "…" in out and len(max(out.splitlines(), key=len)) < 220
    out, _ = run("list", "--project", "p", "--full")
    assert "…" not in out and len(max(out.splitlines(), key=len)) > 1400


def test_import_progress_is_one_line_that_ends(tmp_path):
    lines = [json.dumps({"key": f"k{i}", "value": f"v{i}"}) for i in range(10_000)]
    source = tmp_path / "m.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out, err = run("import", str(source), "--project", "p")
    # Not a terminal here: plain lines, the last one complete and ended.
    assert err.endswith("\n") and "\r" not in err
    assert err.splitlines()[-1].startswith("importing [########################] 10,000/10,000")
    assert out.strip() == "Imported 10,000 memories (10,000 new, 0 updated)."
    out, err = run("import", str(source), "--project", "p", "--quiet")
    assert err == "" and "Imported 10,000 memories" in out


def test_a_review_items_dry_run_shows_the_count():
    mm = MemoryManager(project="acme/web")
    mm.crystallize_user_messages([{"role": "user", "content": "I prefer dark mode."}])
    out, _ = run("erase", "--review-items", "--namespace", "acme/web", "--dry-run")
    assert out.strip() == "Would erase 1 review item (namespace=acme/web); nothing done."
    out, _ = run("erase", "--review-items", "--namespace", "other", "--dry-run")
    assert "Would erase 0 review items" in out
