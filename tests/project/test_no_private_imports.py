"""No module in ``analysis/`` reaches into a sibling's private (underscore) names.

A name another module needs is public, with a docstring: a private name is free to change
without a look at its callers, and an import of one hides a dependency. Three forms count,
anywhere in a file (top level or inside a function): ``from .x import _y``,
``from mobidfl.analysis.x import _y``, and ``x._y`` where ``x`` was imported as a sibling
module (``from mobidfl.analysis import x`` or ``import mobidfl.analysis.x as x``).
Dunder names (``__all__``, ``__version__``) are not private.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS = ROOT / "analysis"
PACKAGE = "mobidfl.analysis"


def private(name: str) -> bool:
    """A single-underscore name, not a dunder."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> str:
    """``mobidfl.analysis.app.look`` for ``analysis/app/look.py``."""
    parts = path.relative_to(ANALYSIS).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The module an ImportFrom names, relative imports resolved against ``here``."""
    if not node.level:
        return node.module or ""
    base = here.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def sibling(module: str) -> bool:
    """True for a module inside ``mobidfl.analysis``."""
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def offences(path: Path) -> list[str]:
    """Each private import or private attribute use of a sibling module in one file."""
    return scan(path.read_text(encoding="utf-8"), here=module_name(path),
                is_package=path.name == "__init__.py", where=str(path.relative_to(ROOT)))


def scan(text: str, *, here: str, is_package: bool, where: str) -> list[str]:
    """The offences in one module's source ``text``, the module named ``here``."""
    tree = ast.parse(text, filename=where)
    found: list[str] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = absolute(node, here, is_package)
            if not sibling(source):
                continue
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {source} import {alias.name}")
                else:
                    aliases[alias.asname or alias.name] = source + "." + alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if sibling(alias.name) and alias.asname:
                    aliases[alias.asname] = alias.name
                if any(private(part) for part in alias.name.split(".")[2:]):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_scanner_catches_each_form() -> None:
    """The scan finds all three forms and passes public names, dunders and other packages."""
    text = (
        "from . import look\n"
        "from .look import _hidden, shown\n"
        "from ..bench import _relative\n"
        "from mobidfl.analysis.bench import _secret, __all__\n"
        "from mobidfl.model.config import _fine\n"
        "import mobidfl.analysis.sweep as sweep\n"
        "import numpy as np\n"
        "def f():\n"
        "    return look._inner, sweep._other, look.public, shown, np._core\n"
    )
    found = scan(text, here="mobidfl.analysis.app.probe", is_package=False, where="probe.py")
    names = sorted(line.rsplit(" ", 1)[-1] for line in found)
    assert names == ["_hidden", "_relative", "_secret", "look._inner", "sweep._other"], found


def test_no_private_imports_in_analysis() -> None:
    """Every module under analysis/ (the app's too) uses only siblings' public names."""
    found = [line for path in sorted(ANALYSIS.rglob("*.py")) for line in offences(path)]
    assert not found, "private names used across modules:\n" + "\n".join(found)
