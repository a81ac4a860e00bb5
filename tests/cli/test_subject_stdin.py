"""``--subject-stdin`` on memory export, erase and lookup: the key from one line of
standard input, never echoed; with ``--subject`` too, a refusal before any work."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.management import CommandError, call_command

from memoryapp.compliance import export
from memoryapp.models import ErasureReceipt, ExportRecord, Memory
from tests._erasure_support import ALICE, BOB, seed

# An erasure purges (VACUUM) outside a transaction: transactional test databases.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.MEMORYAPP_ERASURE_PURGE_TIMEOUT = 10
    settings.MEMORYAPP_ERASURE_LEDGER = str(tmp_path / "ledger.jsonl")


def run(monkeypatch, *args, stdin: str) -> tuple[str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out, err = io.StringIO(), io.StringIO()
    call_command("memory", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_export_reads_the_key_from_stdin(monkeypatch, tmp_path):
    seed(ALICE)
    seed(BOB)
    path = tmp_path / "alice.json"
    out, _ = run(monkeypatch, "export", "--subject-stdin", "-o", str(path), stdin=ALICE + "\n")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["query"] == {"subject": ALICE}
    assert document["counts"] == export(subject=ALICE)["counts"]
    assert ALICE not in out and ExportRecord.objects.count() == 2  # ours, and the comparison


def test_erase_reads_the_key_from_stdin(monkeypatch):
    seed(ALICE)
    seed(BOB)
    out, _ = run(monkeypatch, "erase", "--subject-stdin", "--yes", stdin=ALICE + "\n")
    assert "Erasure receipt" in out
    assert not Memory.objects.filter(namespace=ALICE).exists()
    assert Memory.objects.filter(namespace=BOB).exists()


def test_lookup_reads_the_key_from_stdin(monkeypatch):
    seed(ALICE)
    run(monkeypatch, "erase", "--subject-stdin", "--yes", stdin=ALICE + "\n")
    out, _ = run(monkeypatch, "lookup", "--subject-stdin", "--json", stdin=ALICE + "\n")
    body = json.loads(out)
    assert [r["id"] for r in body["receipts"]] == [ErasureReceipt.objects.get().pk]
    assert ALICE not in out


@pytest.mark.parametrize("verb", ["export", "erase", "lookup"])
def test_both_ways_at_once_or_an_empty_line_is_refused_before_any_work(monkeypatch, verb):
    seed(ALICE)
    with pytest.raises(CommandError, match="--subject or --subject-stdin, not both"):
        run(monkeypatch, verb, "--subject", ALICE, "--subject-stdin", stdin=ALICE + "\n")
    with pytest.raises(CommandError, match="a subject key is needed"):
        run(monkeypatch, verb, "--subject-stdin", stdin="\n")
    assert not ErasureReceipt.objects.exists() and not ExportRecord.objects.exists()
    assert Memory.objects.filter(namespace=ALICE).exists()


def test_erase_dry_run_with_the_key_from_stdin_does_not_print_it(monkeypatch):
    seed(ALICE)
    out, err = run(monkeypatch, "erase", "--subject-stdin", "--dry-run", stdin=ALICE + "\n")
    assert out.startswith("Would erase ") and "the subject read from standard input" in out
    assert ALICE not in out and ALICE not in err
    assert Memory.objects.filter(namespace=ALICE).exists() and not ErasureReceipt.objects.exists()


def test_erase_asks_without_naming_the_key_read_from_stdin(monkeypatch, capsys):
    seed(ALICE)
    # The key, then the answer to the question, both from standard input.
    with pytest.raises(CommandError, match="Aborted"):
        run(monkeypatch, "erase", "--subject-stdin", stdin=ALICE + "\nno\n")
    asked = capsys.readouterr().out  # input() writes its prompt to the real stdout
    assert "Permanently erase" in asked and ALICE not in asked
    assert Memory.objects.filter(namespace=ALICE).exists()


def test_erase_with_the_key_in_argv_still_names_it(monkeypatch):
    seed(ALICE)
    out, _ = run(monkeypatch, "erase", "--subject", ALICE, "--dry-run", stdin="")
    assert f"subject {ALICE!r}" in out


@pytest.mark.parametrize("existing", [False, True])
def test_export_writes_its_file_readable_by_its_owner_only(monkeypatch, tmp_path, existing):
    import os
    import stat

    seed(ALICE)
    path = tmp_path / "alice.json"
    if existing:  # an older, world-readable file of that name is replaced, not reused
        path.write_text("old\n")
        path.chmod(0o644)
    old_umask = os.umask(0o022)
    try:
        run(monkeypatch, "export", "--subject-stdin", "-o", str(path), stdin=ALICE + "\n")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text(encoding="utf-8"))["query"] == {"subject": ALICE}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".alice")) == []


def test_export_to_a_directory_that_does_not_exist_is_a_clean_error(monkeypatch, tmp_path):
    seed(ALICE)
    with pytest.raises(CommandError, match="does not exist"):
        run(
            monkeypatch, "export", "--subject-stdin", "-o", str(tmp_path / "no" / "f.json"),
            stdin=ALICE + "\n",
        )  # fmt: skip
