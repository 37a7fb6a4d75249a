"""The package's floors: a module imports only from floors below its own, or from its own
package, and no modules import each other in a circle. Every import counts, those inside
functions and under TYPE_CHECKING too (docs/architecture.md draws the same floors)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

PACKAGE = ROOT / "tuner"
# Lowest first; a module may import from its own package and any package of a lower floor.
FLOORS = (("words", "version", "errors", "files"), ("domain",), ("data", "runtime"),
          ("render", "trial"), ("use", "launch"), ("study", "check", "__init__"), ("cli",),
          ("fake", "__main__", "examples"))
FLOOR = {name: n for n, names in enumerate(FLOORS) for name in names}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tuner.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            if base == "tuner":
                found |= {f"tuner.{a.name}" for a in node.names}
            elif base.startswith("tuner."):
                found.add(base)
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path):
            while imported not in modules and "." in imported:  # a name from a module
                imported = imported.rpartition(".")[0]
            if imported in modules and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def test_every_package_has_a_floor():
    rooms = {_room(_module(p)) for p in PACKAGE.rglob("*.py")}
    assert rooms <= set(FLOOR), f"add {sorted(rooms - set(FLOOR))} to FLOORS"


def test_no_module_imports_from_a_floor_above_its_own():
    up = sorted(f"{a} -> {b}" for a, targets in _graph().items() for b in targets
                if _room(a) != _room(b) and FLOOR[_room(b)] >= FLOOR[_room(a)]
                and _room(a) != "__init__")
    assert not up


def test_no_modules_import_each_other_in_a_circle():
    graph, state, circles = _graph(), {}, []

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles
