"""The floors of docs/design.md hold: no import cycle, no arrow up, vendor SQL only in db/."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

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


def imports_of(path: Path, name: str, modules: set[str], source: str | None = None) -> list[Import]:
    """The memoryapp modules one file imports, wherever the statement sits (see the test).

    ``source``, when given, is read in place of the file (the planted-import tests).
    """
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

    visit(ast.parse(path.read_text(encoding="utf-8") if source is None else source))
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


# ------------------------------------------------------------------------------------ floors
# docs/design.md, "Layers": the floors of memoryapp, ground to roof. A module may import its
# own floor or a lower one, never a higher one: every import statement counts, at module
# level or in a function (only ``if TYPE_CHECKING:`` ones do not: they never run). A module
# lives on the floor of the longest pattern its path matches (``recall/core/*`` before
# ``recall/*``). The ground floor is plain Python: none of its modules imports Django.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground: pure rules and instruments, no Django", (
        "memoryapp/rules/*", "memoryapp/recall/core/*", "memoryapp/metrics.py",
        "memoryapp/clients/*",
    )),
    ("settings", ("memoryapp/conf.py", "memoryapp/permissions.py")),
    ("vendor SQL", ("memoryapp/db/*",)),
    ("models", ("memoryapp/fields.py", "memoryapp/querysets.py", "memoryapp/models/*")),
    ("database services", (
        "memoryapp/writes/*", "memoryapp/recall/*", "memoryapp/compliance/*",
        "memoryapp/migrations/*",
    )),
    ("services", ("memoryapp/services/*",)),
    ("facade", ("memoryapp/facade/*",)),
    ("interfaces", (
        "memoryapp/api/*", "memoryapp/admin/*", "memoryapp/cli/*", "memoryapp/interop/*",
        "memoryapp/ops/*", "memoryapp/management/*", "memoryapp/templatetags/*",
        "memoryapp/agentao.py", "memoryapp/apps.py", "memoryapp/__init__.py",
    )),
)  # fmt: skip
GROUND = 0

# The only calls from a floor to a higher one, made at run time through a value handed down
# (no import, so the graph cannot see them): (receiver, the file that hands it down, the
# statement that does, why).
BACK_DOORS = (
    ("memoryapp/querysets.py", "memoryapp/services/queryset_methods.py",
     "querysets.install(upsert=upsert, recall=recall)",
     "Memory.objects.upsert/.recall run the services' write and recall, which import the "
     "models: the querysets, below them, are given the two functions at ready()"),
    ("memoryapp/facade/core.py", "memoryapp/facade/__init__.py",
     "MemoryManager._child_class = ChildManager",
     "MemoryManager.child() makes ChildManagers, a subclass defined in facade/children.py "
     "which imports core.py: the package, which imports both, hands the class down"),
)  # fmt: skip


def floor_of(path: str) -> int:
    """The floor of a repository-relative path: that of the longest pattern it matches."""
    matches = [
        (len(pattern), number)
        for number, (_, patterns) in enumerate(FLOORS)
        for pattern in patterns
        if fnmatch.fnmatch(path, pattern)
    ]
    if not matches:
        raise LookupError(f"{path} is on no floor of FLOORS")
    return max(matches)[1]


def module_path(module: str) -> str:
    """``memoryapp.recall.core`` -> its file, relative to the repository."""
    base = ROOT / module.replace(".", "/")
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    return path.relative_to(ROOT).as_posix()


def upward_arrows(graph: dict[str, list[Import]]) -> list[str]:
    """Every import of ``graph`` pointing to a higher floor, as ``"path:line: a -> b"``."""
    arrows = []
    for module, imports in sorted(graph.items()):
        own = floor_of(module_path(module))
        for target, where in imports:
            if floor_of(module_path(target)) > own:
                arrows.append(
                    f"{where}: {module} ({FLOORS[own][0]}) -> {target}"
                    f" ({FLOORS[floor_of(module_path(target))][0]})"
                )
    return arrows


def django_imports(path: Path, source: str | None = None) -> list[str]:
    """The Django or DRF imports of one file that run (not those under TYPE_CHECKING)."""
    found = []
    text = path.read_text(encoding="utf-8") if source is None else source

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_only(child):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]))
                continue
            names = (
                [alias.name for alias in child.names]
                if isinstance(child, ast.Import)
                else [child.module or ""]
                if isinstance(child, ast.ImportFrom) and not child.level
                else []
            )
            found.extend(
                f"{path.relative_to(ROOT)}:{child.lineno}: {name}"
                for name in names
                if name.split(".")[0] in {"django", "rest_framework"}
            )
            visit(child)

    visit(ast.parse(text))
    return found


def test_every_module_is_on_one_floor():
    for path in (ROOT / "memoryapp").rglob("*.py"):
        floor_of(path.relative_to(ROOT).as_posix())  # raises for a module of no floor


def test_no_import_points_to_a_higher_floor():
    """0 arrows back up: every import, function-level ones included, stays on its floor or below."""
    assert upward_arrows(import_graph()) == []


def test_the_ground_floor_imports_no_django():
    """The ground floor imports only itself (the test above), so no Django even indirectly."""
    offenders = []
    for path in (ROOT / "memoryapp").rglob("*.py"):
        if floor_of(path.relative_to(ROOT).as_posix()) == GROUND:
            offenders += django_imports(path)
    assert offenders == []


def _planted(relative: str, source: str) -> dict[str, list[Import]]:
    """The graph of one module planted at ``relative`` with ``source`` (not written to disk)."""
    modules = {module_name(p) for p in (ROOT / "memoryapp").rglob("*.py")}
    name = module_name(ROOT / relative)
    return {name: imports_of(ROOT / relative, name, modules | {name}, source)}


def test_the_floor_check_reports_a_planted_upward_import():
    """An import of the services from a pure rule, hidden in a function, is an arrow up."""
    graph = _planted(
        "memoryapp/rules/guard.py",
        "def late():\n    from memoryapp.services import memories\n    return memories\n",
    )
    assert upward_arrows(graph) == [
        "memoryapp/rules/guard.py:2: memoryapp.rules.guard"
        " (ground: pure rules and instruments, no Django) -> memoryapp.services.memories"
        " (services)"
    ]
    # The same import one floor up from the services is allowed.
    assert upward_arrows(_planted("memoryapp/facade/core.py", "import memoryapp.services\n")) == []


def test_the_ground_floor_check_reports_a_planted_django_import():
    path = ROOT / "memoryapp/recall/core/tokens.py"
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import django\n"
    assert django_imports(path, source) == []  # never runs
    assert django_imports(path, source + "def f():\n    from django.db import models\n") == [
        "memoryapp/recall/core/tokens.py:5: django.db"
    ]


def test_a_path_of_no_floor_is_refused_and_the_longest_pattern_wins():
    assert floor_of("memoryapp/recall/core/hybrid.py") == GROUND
    assert FLOORS[floor_of("memoryapp/recall/cache.py")][0] == "database services"
    with pytest.raises(LookupError):
        floor_of("memoryapp/attic/new.py")


def test_the_back_doors_are_where_the_table_says():
    """Each named exception is handed down where said, to a receiver no higher than its giver."""
    for receiver, giver, statement, reason in BACK_DOORS:
        assert statement in (ROOT / giver).read_text(encoding="utf-8"), reason
        assert floor_of(receiver) <= floor_of(giver)
