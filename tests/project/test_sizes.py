"""Sizes a reader can hold: no library module over 1,000 lines, no function over 100.

WHY: a module or a function past these sizes is read in pieces and changed by guesswork;
Mesa's own examples keep ``Model.__init__`` to creating agents and the collector. The
library is every ``.py`` file under ``mobidfl/``, ``model/``, ``agents/``, ``maps/``,
``analysis/`` and ``app.py``; a function is every ``def`` (methods and nested functions
included), measured from its first decorator to its last line, docstring included. Pure
``ast`` scan: no import of the library.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("mobidfl", "model", "agents", "maps", "analysis")
MODULE_LINES = 1000
FUNCTION_LINES = 100


def library_files(root: Path = ROOT) -> list[Path]:
    """Every library module of the checkout at ``root``, sorted."""
    files = [p for folder in LIBRARY for p in (root / folder).rglob("*.py")]
    if (root / "app.py").is_file():
        files.append(root / "app.py")
    return sorted(files)


def function_sizes(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, lines)`` of every function in ``source``.

    A function starts at its first decorator; methods are named ``Class.method`` and nested
    functions ``outer.inner``.
    """
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                assert child.end_lineno is not None
                found.append((prefix + child.name, first, child.end_lineno - first + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def oversized(path: Path, *, root: Path = ROOT) -> list[str]:
    """One line per size limit ``path`` breaks: the module's length, each long function."""
    source = path.read_text(encoding="utf-8")
    name = path.relative_to(root).as_posix()
    found: list[str] = []
    lines = len(source.splitlines())
    if lines > MODULE_LINES:
        found.append(f"{name}: {lines} lines (module limit {MODULE_LINES})")
    for qualname, first, size in function_sizes(source):
        if size > FUNCTION_LINES:
            found.append(f"{name}:{first} {qualname}: {size} lines (function limit "
                         f"{FUNCTION_LINES})")
    return found


def test_sizes_count_decorators_docstrings_methods_and_nested_functions(tmp_path):
    # Prepare: a decorated method of 101 lines (decorator + def + docstring + 98 statements),
    # a nested function of 3 lines, and a module of 1,001 lines
    body = "".join(f"        x{i} = {i}\n" for i in range(98))
    source = ("class A:\n    @staticmethod\n    def long():\n        \"\"\"Doc.\"\"\"\n" + body
              + "\n\ndef outer():\n    def inner():\n        pass\n        return 1\n"
              "    return inner\n")
    source += "\n" * (1001 - len(source.splitlines()))
    (tmp_path / "model").mkdir()
    module = tmp_path / "model" / "big.py"
    module.write_text(source)
    # Execute
    sizes = {name: (first, size) for name, first, size in function_sizes(source)}
    found = oversized(module, root=tmp_path)
    # Assert
    assert sizes["A.long"] == (2, 101)
    assert sizes["outer.inner"] == (106, 3)
    assert library_files(tmp_path) == [module]
    assert found == ["model/big.py: 1001 lines (module limit 1000)",
                     "model/big.py:2 A.long: 101 lines (function limit 100)"]


def test_the_library_scan_sees_every_package_folder_and_the_app():
    # Execute
    files = library_files()
    # Assert: the scan is not vacuous (a renamed folder would leave it checking nothing)
    tops = {p.relative_to(ROOT).parts[0] for p in files}
    assert tops == {*LIBRARY, "app.py"}
    assert len(files) > 50


def test_no_library_module_or_function_is_too_long_to_hold():
    # Execute
    found = [line for path in library_files() for line in oversized(path)]
    # Assert
    assert not found, "split these (a module into modules, a function into steps):\n" + \
        "\n".join(found)
