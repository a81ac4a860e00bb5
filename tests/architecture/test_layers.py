"""The layers of docs/design.md hold: no import cycle, pure rules, vendor SQL only in db/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

VENDOR_BRANCH = re.compile(r"\.vendor\s*(==|!=|in\b|not\s+in\b)|vendor\s*(==|!=)\s*[\"']")


def test_no_vendor_branch_outside_the_db_package():
    """Vendor differences are asked of ``memoryapp.db.vendor``, never compared elsewhere."""
    offenders = []
    for path in (ROOT / "memoryapp").rglob("*.py"):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] in (("memoryapp", "db"), ("memoryapp", "migrations")):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if VENDOR_BRANCH.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


# ----------------------------------------------------------------------------- import cycles
Import = tuple[str, str]  # (imported module, "path:line" of the statement)


def module_name(path: Path) -> str:
    """``memoryapp/compliance/engine.py`` -> ``memoryapp.compliance.engine``;
    a package: its __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str, modules: set[str]) -> list[Import]:
    """The memoryapp modules one file imports, wherever the statement sits (see the test)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def target_of(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            where = f"{path.relative_to(ROOT)}:{getattr(child, 'lineno', '?')}"
            if isinstance(child, ast.If) and _type_checking_only(child):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, where) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = target_of(child)
                for alias in child.names:
                    submodule = f"{target}.{alias.name}"
                    found.append((submodule if submodule in modules else target, where))
            else:
                visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    resolved = []
    for target, where in found:
        while target and target not in modules:  # "import a.b.c" of a name: the module holding it
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.append((target, where))
    return resolved


def import_graph() -> dict[str, list[Import]]:
    """Every module of ``memoryapp/`` and the memoryapp modules it imports."""
    paths = {module_name(p): p for p in (ROOT / "memoryapp").rglob("*.py")}
    return {name: imports_of(path, name, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, list[Import]]) -> list[tuple[str, str, str]] | None:
    """One cycle of the graph as ``(module, imported module, "path:line")`` steps, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[tuple[str, str, str]] = []

    def walk(module: str) -> list[tuple[str, str, str]] | None:
        state[module] = 1
        for target, where in graph[module]:
            if state.get(target) == 1:
                start = next(i for i, step in enumerate(path) if step[0] == target)
                return path[start:] + [(module, target, where)]
            if target not in state:
                path.append((module, target, where))
                cycle = walk(target)
                if cycle:
                    return cycle
                path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = walk(module)
            if cycle:
                return cycle
    return None


def test_find_cycle_reports_the_modules_and_statements_of_a_cycle():
    graph = {"a": [("b", "a.py:1")], "b": [("c", "b.py:2")], "c": [("a", "c.py:9")], "d": []}
    assert find_cycle(graph) == [("a", "b", "a.py:1"), ("b", "c", "b.py:2"), ("c", "a", "c.py:9")]
    assert find_cycle({"a": [("b", "a.py:1")], "b": []}) is None


def test_memoryapp_has_no_import_cycle():
    """No module of ``memoryapp/`` imports, however indirectly, a module that imports it.

    A cycle hidden in a function-level import is still a cycle: the two modules
    depend on each other and the layering of docs/design.md is broken, only the
    ``ImportError`` is postponed. So every import statement counts, at module
    level, in a function, a class or a ``try``; only those under
    ``if TYPE_CHECKING:`` do not (they never run; annotations may name any layer).

    Packages: ``from ..erasure import erase`` imports the package, so it is an edge
    to its ``__init__`` (whose re-exports are its own edges); ``from . import engine``
    is an edge to the submodule. The parent ``__init__`` that Python runs before any
    submodule is *not* counted as an edge of the submodule: a package that
    re-exports its modules (``erasure``, ``manager``) would otherwise be in a cycle
    with each of them, an order Python resolves by design (the ``__init__`` runs
    first and imports the submodules, which never name the package itself).
    """
    cycle = find_cycle(import_graph())
    report = " -> ".join(f"{module} ({where})" for module, _, where in cycle or [])
    assert cycle is None, f"import cycle: {report} -> {cycle[0][0] if cycle else ''}"


# docs/design.md: "Pure rules are plain Python over plain values ... None of them imports Django."
# Every module of ``memoryapp.rules`` is pure, and so is the core of recall (what a query
# matches, how it scores, the index and its bytes): workers and clients reuse them without Django.
RECALL_CORE = tuple(
    p.stem for p in (ROOT / "memoryapp" / "recall" / "core").glob("*.py") if p.stem != "__init__"
)
PURE_RULES = tuple(
    sorted(
        [
            f"rules.{p.stem}"
            for p in (ROOT / "memoryapp" / "rules").glob("*.py")
            if p.stem != "__init__"
        ]
        + [f"recall.core.{name}" for name in RECALL_CORE]
    )
)


def test_the_pure_rules_import_no_django_even_indirectly():
    graph = import_graph()
    offenders = []
    for name in PURE_RULES:
        seen, todo = set(), [f"memoryapp.{name}"]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            todo += [target for target, _ in graph[module]]
            path = ROOT / (module.replace(".", "/") + ".py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                offenders += [
                    f"memoryapp.{name} -> {module} imports {n}"
                    for n in names
                    if n.split(".")[0] in {"django", "rest_framework"}
                ]
    assert offenders == []
