"""The configuration is one folder of modules, one job each: each module stays short and the
modules import each other in one direction only (no cycle), so a module reads on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mobidfl.model.config as config_package

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "model" / "config"
NAME = "mobidfl.model.config"
MAX_LINES = 500


def modules() -> dict[str, Path]:
    """Module name (``mobidfl.model.config.names``; the package itself for ``__init__``) -> file."""
    return {
        NAME if path.stem == "__init__" else f"{NAME}.{path.stem}": path
        for path in sorted(PACKAGE.glob("*.py"))
    }


def package_imports(module: str, source: str, known: set[str]) -> set[str]:
    """The modules of the package that ``source`` imports anywhere (top level or in a function;
    ``from mobidfl.model.config import X`` is the package itself unless X is a module)."""
    is_package = module == NAME
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}"
                     in known] or [base]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def import_graph() -> dict[str, set[str]]:
    files = modules()
    known = set(files)
    return {m: package_imports(m, path.read_text(), known) for m, path in files.items()}


def test_the_configuration_is_a_package_of_several_modules():
    # Assert: the package imported is this folder, split into its jobs
    assert Path(config_package.__file__).resolve() == (PACKAGE / "__init__.py").resolve()
    assert not (ROOT / "model" / "config.py").exists()
    assert len(modules()) >= 6


@pytest.mark.parametrize("name", sorted(modules()))
def test_each_module_of_the_configuration_is_under_500_lines(name):
    # Execute
    lines = len(modules()[name].read_text().splitlines())
    # Assert
    assert lines < MAX_LINES, f"{name}: {lines} lines"


def test_the_modules_of_the_configuration_import_each_other_without_a_cycle():
    # Prepare
    graph = import_graph()
    # Execute
    found = cycle(graph)
    # Assert: a module importing the package back (its __init__) would close a cycle too
    assert found is None, " -> ".join(found or [])
    assert graph[NAME]  # the package's __init__ re-exports from its modules


def test_a_cycle_between_two_modules_is_found():
    # Prepare: the real graph with one module importing one that imports it
    graph = import_graph()
    graph[f"{NAME}.value"] = {*graph[f"{NAME}.value"], f"{NAME}.resolution"}
    # Execute
    found = cycle(graph)
    # Assert
    assert found is not None and found[0] == found[-1] and f"{NAME}.value" in found


def test_an_import_inside_a_function_counts():
    # Prepare
    known = set(modules())
    source = "def f():\n    from mobidfl.model.config.names import old_names\n"
    # Execute / Assert
    assert package_imports(f"{NAME}.value", source, known) == {f"{NAME}.names"}
    assert package_imports(f"{NAME}.value", "from . import names\n", known) == {f"{NAME}.names"}
