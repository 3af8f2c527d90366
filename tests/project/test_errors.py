"""Errors mean what they say and have one import home each (issue 43, item 5).

* ``ConfigError`` ("setting X = Y is not allowed") is for what a user typed or wrote in a
  file; the pure maths under ``model/maths/`` raises ``ValueError`` or ``TypeError`` for
  its own invariants, so it never names ``ConfigError``.
* Every import of an exception class of ours names the module that defines it (no
  re-export is imported, e.g. ``ConfigError`` only from ``mobidfl.errors``). The public
  front door (``mobidfl.ConfigError``) is attribute access, not an import, and stays.

A pure ``ast`` scan of the repository's Python files: nothing is imported.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("mobidfl", "model", "agents", "maps", "analysis")
"""Packages that define errors (``app.py`` defines none)."""
MOVED = ("model", "agents", "maps", "analysis")
"""Folders that install as ``mobidfl.<folder>``."""
SCANNED = tuple(sorted(
    p.name for p in ROOT.iterdir()
    if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.py"))
))
"""Folders whose imports are checked, besides ``app.py``: every top-level folder holding
Python files (the library, the tests, the scripts)."""
BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


def module_name(path: Path) -> str:
    """``model/maths/psfl.py`` -> ``mobidfl.model.maths.psfl`` (a package's ``__init__`` is the
    package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in MOVED:  # installed under the one namespace (pyproject.toml, package-dir)
        parts.insert(0, "mobidfl")
    return ".".join(parts)


def sources(folders: tuple[str, ...]) -> dict[str, str]:
    """Module name -> source of every ``.py`` file under ``folders`` (and ``app.py``)."""
    found = {"app": (ROOT / "app.py").read_text()}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = path.read_text()
    return found


def _base_name(node: ast.expr) -> str:
    """``ValueError`` of ``ValueError`` and of ``errors.ValueError``; ``""`` otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def error_homes(library: dict[str, str]) -> dict[str, set[str]]:
    """Exception class name -> the modules of ``library`` that define a class of that name.

    A class is an exception when one of its bases is a builtin exception or, transitively,
    one of ours (by name: the bases are read, not imported)."""
    classes = [(module, node) for module, source in library.items()
               for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)]
    exceptions: set[str] = set(BUILTIN_EXCEPTIONS)
    homes: dict[str, set[str]] = {}
    grew = True
    while grew:  # a subclass may be defined before (or in another module than) its base
        grew = False
        for module, node in classes:
            if module in homes.get(node.name, set()):
                continue
            if any(_base_name(base) in exceptions for base in node.bases):
                homes.setdefault(node.name, set()).add(module)
                exceptions.add(node.name)
                grew = True
    return _with_package_fronts(homes, library)


def _with_package_fronts(homes: dict[str, set[str]], library: dict[str, str]
                         ) -> dict[str, set[str]]:
    """Add a package as a home of an error its ``__init__`` imports from its own module.

    A package split into modules (``mobidfl.model.config``) is the import path its users
    know; the module that defines the class stays a home for the package's own modules."""
    for name, modules in homes.items():
        for module in list(modules):
            package = module.rpartition(".")[0]
            tree = ast.parse(library.get(package, ""))
            if any(isinstance(node, ast.ImportFrom) and node.module == module
                   and any(alias.name == name for alias in node.names)
                   for node in ast.walk(tree)):
                modules.add(package)
    return homes


def misplaced_imports(scanned: dict[str, str], homes: dict[str, set[str]]) -> list[str]:
    """``module imports Name from M (home: H)`` for every import of an error of ours from a
    module that does not define it."""
    problems = []
    for module, source in sorted(scanned.items()):
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                continue
            for alias in node.names:
                home = homes.get(alias.name)
                if home is not None and node.module not in home:
                    problems.append(f"{module} imports {alias.name} from {node.module} "
                                    f"(home: {', '.join(sorted(home))})")
    return problems


def test_every_error_is_imported_from_the_module_that_defines_it():
    # Prepare
    homes = error_homes(sources(LIBRARY))
    # Execute
    problems = misplaced_imports(sources(SCANNED), homes)
    # Assert: the scan saw the errors of every floor and the scripts' folders, and no
    # re-export is imported
    assert {*LIBRARY, "tests", "validation", "examples"} < set(SCANNED)
    assert homes["ConfigError"] == {"mobidfl.errors"}
    assert {"DatasetDamaged", "MapDataError", "OutputFailed", "SweepStopped"} <= set(homes)
    assert problems == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("from mobidfl.model.learning.data import DatasetUnavailable\n",
         "imports DatasetUnavailable from mobidfl.model.learning.data (home: mobidfl.errors)"),
        ("def f():\n    from mobidfl import ConfigError\n",
         "imports ConfigError from mobidfl (home: mobidfl.errors)"),
        ("from mobidfl.maps.sources import MapDataError, street_grid\n",
         "imports MapDataError from mobidfl.maps.sources (home: mobidfl.maps.edges)"),
    ],
)
def test_an_error_imported_from_a_re_export_is_found(source, problem):
    # Prepare: the real project plus one test module importing an error from elsewhere
    homes = error_homes(sources(LIBRARY))
    # Execute
    problems = misplaced_imports({"tests.test_new": source}, homes)
    # Assert
    assert problems == [f"tests.test_new {problem}"]


def test_the_pure_maths_never_names_config_error():
    # Prepare
    maths = {name: text for name, text in sources(("model",)).items()
             if name.startswith("mobidfl.model.maths")}
    # Execute
    named = sorted(name for name, text in maths.items()
                   if any(isinstance(node, ast.Name | ast.alias | ast.Attribute)
                          and "ConfigError" in (getattr(node, "id", None),
                                                getattr(node, "name", None),
                                                getattr(node, "attr", None))
                          for node in ast.walk(ast.parse(text))))
    # Assert: the modules were read (psfl, mixing, cache, the MoFeL package), none names it
    assert {"mobidfl.model.maths.psfl", "mobidfl.model.maths.mixing", "mobidfl.model.maths.cache",
            "mobidfl.model.maths.mofel.selection"} <= set(maths)
    assert named == []
