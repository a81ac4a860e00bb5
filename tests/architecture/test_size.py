"""Code sized for its reader: no module over 500 lines, no function over complexity 15.

The bounds cover the application (``memoryapp/``, migrations aside: they are frozen history)
and the project (``project/``). Complexity is radon's cyclomatic complexity, the measure the
house rules quote.
"""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
MAX_COMPLEXITY = 15


def sources() -> list[Path]:
    """Every Python module of the app and the project, migrations left out."""
    return sorted(
        path
        for folder in ("memoryapp", "project")
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_no_module_is_over_the_line_bound():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sources()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_function_is_over_the_complexity_bound():
    complex_ = {
        f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname}": block.complexity
        for path in sources()
        for block in cc_visit(path.read_text(encoding="utf-8"))
        if block.complexity > MAX_COMPLEXITY
    }
    assert complex_ == {}


def test_the_bounds_see_an_offender():
    """The measure is live: a generated function over the bound is reported."""
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(MAX_COMPLEXITY + 1))
    (block,) = cc_visit(f"def f(x):\n{branches}\n    return -1\n")
    assert block.complexity > MAX_COMPLEXITY
