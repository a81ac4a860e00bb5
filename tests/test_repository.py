"""The repository stands alone: nothing in it reads files from outside the clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
