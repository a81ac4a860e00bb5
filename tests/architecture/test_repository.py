"""The repository stands alone: nothing reads files outside the clone or cites docs not in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("memoryapp", "project", "bench", "tests", "scripts", ".ci")
# A path that climbs out of the clone or names the planning folder beside it.
OUTSIDE = re.compile(
    r"/work/shared|parents\[2\]\s*/\s*[\"']shared|\.\./shared|parent\s*/\s*[\"']shared"
)


def test_no_code_reads_outside_the_repository():
    offenders = []
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*"):
            if (
                path.suffix not in {".py", ".sh", ""}
                or not path.is_file()
                or path == Path(__file__)
            ):
                continue
            if ".venv" in path.parts or "__pycache__" in path.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert offenders == []


def tracked_files() -> list[Path]:
    """The files of the clone: ``git ls-files`` when it is a checkout, else a walk of the tree."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode("utf-8", "surrogateescape")
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "var", "__pycache__", ".pytest_cache", ".ruff_cache", "out"}
        return [
            p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
        ]
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file (an image)."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


# What cites a document that does not ship with the clone: the planning specification and
# design notes (by their old names), or a path beside the repository.
FOREIGN_DOCUMENT = re.compile(r"\bSPEC\b|\bDESIGN\.md|/notes/recall-index")


def test_no_tracked_file_cites_documents_outside_the_clone():
    """The behaviour is documented in docs/behaviour.md, the design in docs/design.md."""
    offenders = []
    for path in tracked_files():
        if path == Path(__file__):
            continue
        text = text_of(path)
        if text is None:
            continue
        for pattern in (FOREIGN_DOCUMENT, OUTSIDE):
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    assert offenders == []


CITED_SECTION = re.compile(r"behaviour\.md §(\d+)(?:[–-]§(\d+))?((?:, §\d+)*)")


def test_every_cited_behaviour_section_exists():
    """Each ``docs/behaviour.md §n`` in the clone names a ``## §n`` heading of that file."""
    behaviour = (ROOT / "docs" / "behaviour.md").read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## §(\d+) ", behaviour, flags=re.MULTILINE)}
    assert sections == set(range(1, 14))
    cited: dict[int, str] = {}
    for path in tracked_files():
        text = text_of(path)
        if text is None:
            continue
        for match in CITED_SECTION.finditer(text):
            first, last, more = match.groups()
            numbers = [int(first), *map(int, re.findall(r"\d+", more))]
            if last:
                numbers += range(int(first), int(last) + 1)
            for number in numbers:
                cited.setdefault(number, str(path.relative_to(ROOT)))
    assert cited, "no file cites docs/behaviour.md"
    assert {n: where for n, where in cited.items() if n not in sections} == {}


def test_the_bench_corpus_is_deterministic_and_prefix_stable():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_corpus_repo", ROOT / "bench" / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    small, _, queries = module.make_corpus(200, seed=1234)
    large, _, _ = module.make_corpus(400, seed=1234)
    assert large[:200] == small
    assert len(queries) == 260
    assert module.make_corpus(200, seed=1234)[0] == small
    assert module.make_corpus(200, seed=1235)[0] != small
