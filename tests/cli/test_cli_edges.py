"""``manage.py memory``'s argument edges: a CommandError with a plain message, never a
traceback or a codec's message (issue #26, Low)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memoryapp import MemoryManager
from memoryapp.models import ErasureReceipt, Memory
from tests._processes import database_url

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
NS = "cli/edges"


def run(*args) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.parametrize(
    "verb",
    [
        ["list"],
        ["stats"],
        ["search", "x"],
        ["erase", "--subject", "acme/x", "--dry-run"],
        ["export", "--subject", "acme/x"],
        ["review"],
        ["import", "-"],
    ],
)
def test_an_unknown_database_alias_is_a_command_error_naming_the_known_ones(verb):
    with pytest.raises(
        CommandError, match=r"unknown database alias; the known ones are: .*default"
    ):
        run(*verb, "--database", "nosuchalias")


@pytest.mark.parametrize(
    "args",
    [
        ["search", "caf\udce9"],
        ["list", "--project", "acme/\udcff"],
        ["erase", "--subject", "acme/\udcff", "--dry-run"],
        ["erase", "--show", "\udcff"],
        ["tag", "\udcff"],
    ],
)
def test_an_argument_that_is_not_utf8_is_a_plain_refusal(args):
    with pytest.raises(CommandError) as exc:
        run(*args)
    assert str(exc.value).endswith("argument is not valid UTF-8 text")
    assert "codec" not in str(exc.value)


def test_the_refusal_names_the_option_as_typed():
    with pytest.raises(CommandError, match="^--id argument is not valid UTF-8 text$"):
        run("erase", "--id", "ab\udcff", "--dry-run")


@pytest.mark.django_db(transaction=True)
def test_a_real_argv_that_is_not_utf8_is_a_plain_refusal(tmp_path):
    """The shell's bytes, through Python's own argv decoding (surrogateescape)."""
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url(), "SECRET_KEY": settings.SECRET_KEY}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "memory", "search", b"caf\xe9"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert b"the query argument is not valid UTF-8 text" in done.stderr
    assert b"Traceback" not in done.stderr and b"codec" not in done.stderr


@pytest.fixture
def mixed_file(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        b'{"key": "bad bytes", "value": "caf\xe9 latte"}\n'
        b'{"key": "good one", "value": "a valid line"}\n'
        b'{"key": "good two", "value": "another valid line"}\n'
    )
    return str(path)


def test_import_reports_a_line_that_is_not_utf8_by_number(mixed_file):
    with pytest.raises(CommandError, match="1 invalid line; nothing was written"):
        run("import", mixed_file, "--project", NS)
    assert not Memory.objects.exists()
    out = run("import", mixed_file, "--project", NS, "--skip-invalid")
    assert "line 1: not valid UTF-8 text" in out
    assert "Imported 2 memories (2 new, 0 updated); skipped 1 invalid line." in out


def test_import_dry_run_says_what_the_import_would_do(mixed_file, tmp_path):
    out = run("import", mixed_file, "--project", NS, "--skip-invalid", "--dry-run")
    assert (
        "Dry run: it would import 2 memories (2 new, 0 updated), and skip 1 invalid line. "
        "Nothing was written." in out
    )
    with pytest.raises(CommandError, match="Dry run: 1 invalid line; the import would write"):
        run("import", mixed_file, "--project", NS, "--dry-run")
    good = tmp_path / "good.jsonl"
    good.write_text('{"key": "k", "value": "v"}\n{"key": "j", "value": "w"}\n')
    out = run("import", str(good), "--project", NS, "--dry-run")
    assert "Dry run: every line is valid; it would import 2 memories (2 new, 0 updated)." in out
    assert not Memory.objects.exists()


def test_crystallize_a_file_that_is_not_utf8_is_a_plain_refusal(tmp_path):
    path = tmp_path / "messages.json"
    path.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    with pytest.raises(CommandError) as exc:
        run("crystallize", str(path), "--project", NS)
    assert "not valid UTF-8 text" in str(exc.value) and "codec" not in str(exc.value)


@pytest.mark.parametrize("value", ["", "   "])
def test_erase_refuses_an_empty_id(value):
    MemoryManager(project=NS).upsert("kept", "still here")
    with pytest.raises(CommandError, match="an id is never empty"):
        run("erase", "--id", value, "--yes")
    with pytest.raises(CommandError, match="an id is never empty"):
        run("erase", "--id", "x", "--id", value, "--dry-run")
    assert Memory.objects.count() == 1 and not ErasureReceipt.objects.exists()
