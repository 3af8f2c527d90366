"""One floor per layer: no module imports a module on a higher floor, and no import cycles.

Every import counts: top-level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("literal")``. The floors are in docs/reference/layout.md.

Two grains: modules (:data:`FLOORS`, an import goes to the same or a lower floor, no cycles)
and top-level packages (:data:`PACKAGE_FLOORS`, an import between two packages goes strictly
down, so packages never import each other in a circle). ``tests/`` and ``benchmarks/`` are
checked the same way: benchmarks may use the tests' oracles, tests never import a benchmark.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("mobidfl", "model", "agents", "maps", "analysis")
"""The project's package folders; all but ``mobidfl/`` install as ``mobidfl.<folder>``."""
SUBPACKAGES = FOLDERS[1:]

type Floors = tuple[tuple[int, str, tuple[str, ...]], ...]

FLOORS: Floors = (
    (0, "ground: errors, settings, registries, config and presets, io", (
        "mobidfl.*", "mobidfl.model.config.*", "mobidfl.model.checkpoint",
        "mobidfl.model.ray_local",
    )),
    (1, "maps, pure maths, the typed views plug-ins read", (
        "mobidfl.maps.*", "mobidfl.model.maths.*", "mobidfl.model.contacts", "mobidfl.agents.views",
    )),
    (2, "learning, policies, mobility", (
        "mobidfl.model.learning.*", "mobidfl.model.policies.*", "mobidfl.agents.mobility.*",
        "mobidfl.model.bounds", "mobidfl.model.links", "mobidfl.model.links_ns3",
    )),
    (3, "the Mesa model", (
        "mobidfl.model", "mobidfl.model.world", "mobidfl.model.world_view",
        "mobidfl.model.reporters", "mobidfl.model.regime", "mobidfl.model.outputs",
        "mobidfl.model.world_state",
        "mobidfl.model.learning.session", "mobidfl.agents", "mobidfl.agents.kinds",
    )),
    (4, "analysis and the app", ("mobidfl.analysis.*", "app")),
    (5, "the public front door", ("mobidfl",)),
)
"""(floor, role, modules): ``pkg.*`` is the package and everything in it that lives in its
folder (``mobidfl.*``, the ground, is not ``mobidfl.model``, which lives in ``model/``); the
most specific entry wins (``mobidfl.model.learning.session`` over ``mobidfl.model.learning.*``)."""


def folder_of(module: str) -> str:
    """The folder (or ``app``) that holds ``module``: ``model`` for ``mobidfl.model.world``."""
    parts = module.split(".")
    if parts[0] == "mobidfl" and len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return parts[0]


def floor_of(module: str, floors: Floors | None = None) -> int | None:
    """The floor of ``module`` by the most specific matching entry of ``floors``
    (:data:`FLOORS` by default)."""
    best: tuple[int, int] | None = None  # (specificity, floor)
    for floor, _, patterns in FLOORS if floors is None else floors:
        for pattern in patterns:
            if pattern.endswith(".*"):
                package = pattern[:-2]
                hit = module == package or (module.startswith(package + ".")
                                            and folder_of(module) == folder_of(package))
                score = len(package)
            else:
                hit, score = module == pattern, len(pattern) + 1000
            if hit and (best is None or score > best[0]):
                best = (score, floor)
    return None if best is None else best[1]


PACKAGE_FLOORS: Floors = (
    (0, "ground: errors, settings, registries", ("mobidfl.*",)),
    (1, "street maps", ("mobidfl.maps.*",)),
    (2, "agents, their mobility models and the views plug-ins read", ("mobidfl.agents.*",)),
    (3, "the Mesa model, learning, policies, links", ("mobidfl.model.*",)),
    (4, "CLI, sweeps, reports, the app's parts", ("mobidfl.analysis.*",)),
    (5, "the app page and the public front door", ("app", "mobidfl")),
)
"""Top-level packages from the bottom up (``mobidfl`` is two: its modules are the ground, its
``__init__`` the lazy front door). An import from one package into another goes strictly
down; inside a package, :data:`FLOORS` orders the modules."""

def package_problems(sources: dict[str, str]) -> list[str]:
    """Every import from one top-level package into another that is not strictly down."""
    known = set(sources)
    problems = []
    for module, source in sorted(sources.items()):
        for target in sorted(imports_of(module, source, known)):
            here, there = floor_of(module, PACKAGE_FLOORS), floor_of(target, PACKAGE_FLOORS)
            if here is None or there is None or _package(module) == _package(target):
                continue
            if there >= here:
                problems.append(f"{module} (package floor {here}) imports {target} "
                                f"(package floor {there})")
    return problems


def _package(module: str) -> str:
    """The unit of :data:`PACKAGE_FLOORS` that ``module`` belongs to."""
    return "mobidfl (front door)" if module == "mobidfl" else folder_of(module)


def project_sources() -> dict[str, str]:
    """Module name -> source of every module of the project (tests and benchmarks excluded)."""
    sources = {"app": (ROOT / "app.py").read_text()}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if folder in SUBPACKAGES:
                parts.insert(0, "mobidfl")  # installed as mobidfl.<folder> (pyproject.toml)
            sources[".".join(parts)] = path.read_text()
    return sources


def imports_of(module: str, source: str, known: set[str]) -> set[str]:
    """The project modules ``module`` imports anywhere in ``source``."""
    is_package = f"{module}.__init__" in known or any(k.startswith(module + ".") for k in known)
    found: set[str] = set()
    for names, from_import in _import_names(module, is_package, source):
        for name in names:
            if name.split(".")[0] not in ("mobidfl", "app"):
                continue
            while name and name not in known:  # ``from pkg import name`` of a non-module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
                if from_import:
                    break  # the first name that is a module is what this import loads
    return found


type Statements = tuple[tuple[tuple[str, ...], bool], ...]


@functools.cache
def _import_names(module: str, is_package: bool, source: str) -> Statements:
    """Per import statement of ``source``: the absolute names it may load, and whether it is
    a ``from`` import. Parsed once per source: every test here walks the whole project."""
    statements: list[tuple[tuple[str, ...], bool]] = []
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
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        if names:
            statements.append((tuple(names), isinstance(node, ast.ImportFrom)))
    return tuple(statements)


def layer_problems(sources: dict[str, str]) -> list[str]:
    """Every module without a floor, every import to a higher floor, every import cycle."""
    known = set(sources)
    graph = {m: imports_of(m, src, known) for m, src in sources.items()}
    problems = [f"{m}: no floor in FLOORS" for m in sorted(graph) if floor_of(m) is None]
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = floor_of(module), floor_of(target)
            if here is not None and there is not None and there > here:
                problems.append(f"{module} (floor {here}) imports {target} (floor {there})")
    problems += [" -> ".join(cycle) for cycle in _cycles(graph)]
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component) + [min(component)])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_every_import_goes_to_the_same_or_a_lower_floor_without_cycles():
    # Prepare
    sources = project_sources()
    # Execute
    problems = layer_problems(sources)
    # Assert
    assert len(sources) > 80  # the whole project was read
    assert problems == []


@pytest.mark.parametrize(
    "module, source",
    [
        ("mobidfl.maps.sources", "from mobidfl.model.world import MobiDFLModel\n"),
        ("mobidfl.model.config",
         "def f():\n    from mobidfl.agents.mobility import MOBILITY_MODELS\n"),
        ("mobidfl.agents.kinds", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from mobidfl.analysis.cli import main\n"),
        ("mobidfl.model.checkpoint",
         "import importlib\nimportlib.import_module('mobidfl.model.policies')\n"),
        ("mobidfl.model.maths.cache", "from mobidfl.model import world\n"),
    ],
)
def test_an_upward_import_is_found_wherever_it_hides(module, source):
    # Prepare: the real project with one module replaced by an upward import
    sources = {**project_sources(), module: source}
    # Execute
    problems = layer_problems(sources)
    # Assert: the upward import, and at most the cycle it closes through the module
    assert problems[0].startswith(f"{module} (floor ")
    assert all(f" {module} ->" in p or p.startswith(f"{module} ->") for p in problems[1:])


def test_a_cycle_on_one_floor_and_a_module_without_floor_are_found():
    # Prepare: two ground modules importing each other, and a new module nobody placed
    sources = {
        **project_sources(),
        "mobidfl.model.checkpoint": "from mobidfl.model.ray_local import start\n",
        "mobidfl.model.ray_local": "from mobidfl.model.checkpoint import save\n",
        "mobidfl.model.newthing": "x = 1\n",
    }
    # Execute
    problems = layer_problems(sources)
    # Assert
    assert problems == [
        "mobidfl.model.newthing: no floor in FLOORS",
        "mobidfl.model.checkpoint -> mobidfl.model.ray_local -> mobidfl.model.checkpoint",
    ]


def test_the_front_door_does_not_import_the_mesa_model_for_lower_floors():
    # Prepare / Execute: a fresh interpreter importing a ground module through the package
    import os
    import subprocess
    import sys

    code = (
        "import sys, mobidfl.errors, mobidfl.model.config; "
        "print('mobidfl.model.world' in sys.modules, 'mobidfl.agents' in sys.modules); "
        "from mobidfl.model import MobiDFLModel, Config; "
        "print(MobiDFLModel.__module__, Config.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout.split()
    # Assert
    assert out == ["False", "False", "mobidfl.model.world", "mobidfl.model.config.resolution"]


def test_packages_import_each_other_only_downwards():
    # Prepare
    sources = project_sources()
    # Execute
    problems = package_problems(sources)
    # Assert
    assert problems == []


@pytest.mark.parametrize(
    "module, source, culprit",
    [
        ("mobidfl.maps.sources", "from mobidfl.model.config import Config\n",
         "mobidfl.model.config"),
        ("mobidfl.maps.world", "def f():\n    from mobidfl.agents.kinds import Vehicle\n",
         "mobidfl.agents.kinds"),
        ("mobidfl.agents.mobility.base", "from mobidfl.model.config import one_report\n",
         "mobidfl.model.config"),
        ("mobidfl.errors", "from mobidfl.maps.network import StreetNetwork\n",
         "mobidfl.maps.network"),
        ("mobidfl.model.world", "from mobidfl.analysis.cli import main\n",
         "mobidfl.analysis.cli"),
        ("app", "import mobidfl\n", "mobidfl"),
    ],
)
def test_an_import_up_or_across_packages_is_found(module, source, culprit):
    # Prepare: the real project with one module importing up (or across) the packages
    sources = {**project_sources(), module: source}
    # Execute
    problems = package_problems(sources)
    # Assert
    assert problems == [f"{module} (package floor {floor_of(module, PACKAGE_FLOORS)}) imports "
                        f"{culprit} (package floor {floor_of(culprit, PACKAGE_FLOORS)})"]


BENCHMARK_SELF_TESTS = {"test_gpu_script.py", "test_yardsticks.py"}
"""Tests whose subject is a benchmark script itself (its arguments and outputs, checked
without the hardware it measures): they load that one script, nothing else of benchmarks/."""


def test_tests_never_import_a_benchmark():
    # Prepare: every module name benchmarks/ offers, and every import of every test file
    offered = {"benchmarks", *(p.stem for p in (ROOT / "benchmarks").glob("*.py"))}
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == Path(__file__).name or path.name in BENCHMARK_SELF_TESTS:
            continue  # this file names the folder to look for it; a script's own tests
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            # Execute: imports, and a benchmarks/ folder put on sys.path
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and node.value == "benchmarks":
                names = ["benchmarks"]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in offered]
    # Assert: test oracles live under tests/ (benchmarks may import them), studies in analysis/
    assert found == []
