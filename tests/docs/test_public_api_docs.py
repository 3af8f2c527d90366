"""Every name of ``import mobidfl`` documents its parameters, returns and refusals (numpydoc).

The reference page (docs/reference/api.md, mkdocstrings) renders these docstrings; a user
or a plug-in author reads them there and in ``help()``. For each public callable:

* it takes parameters -> a ``Parameters`` section (``Attributes`` for a dataclass that the
  model builds and a plug-in reads) naming exactly the parameters of its signature;
* it returns something -> a ``Returns`` section;
* its own code raises -> a ``Raises`` section.

Protocols (``WorldView``, ...) document their members instead and are not constructed by
users; registries are instances, not callables. Pure introspection (the time is importing
the names: torch, Mesa).
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

import mobidfl

PENDING: set[str] = set()
"""Public names whose modules (model/config/, model/links.py) another change owns at the
time this test was written; the lead empties this set after merging it. A listed name that
now passes fails the test, so the set only shrinks."""

HEADER = re.compile(r"^(\w[\w ]*)\n-{3,}\n", re.M)


def numpy_sections(doc: str) -> dict[str, str]:
    """Section title -> body of a numpydoc docstring (``inspect.getdoc`` text)."""
    heads = list(HEADER.finditer(doc))
    return {
        m.group(1).strip(): doc[m.end() : heads[i + 1].start() if i + 1 < len(heads) else None]
        for i, m in enumerate(heads)
    }


def entry_names(body: str) -> set[str]:
    """Names documented in a Parameters / Attributes body: its unindented lines, where
    ``a, b : int`` documents ``a`` and ``b`` and ``*args`` documents ``args``."""
    names: set[str] = set()
    for line in body.splitlines():
        if line and not line[0].isspace():
            for name in line.split(" : ")[0].split(","):
                names.add(name.strip().lstrip("*"))
    return names


def test_numpy_sections_read_titles_bodies_and_grouped_names() -> None:
    doc = "One line.\n\nParameters\n----------\na, b : int\n    Two.\n*rest\n    More.\n\n" \
        "Returns\n-------\nstr\n    Text.\n"  # fmt: skip
    sections = numpy_sections(doc)
    assert list(sections) == ["Parameters", "Returns"]
    assert entry_names(sections["Parameters"]) == {"a", "b", "rest"}
    assert numpy_sections("Args:\n    a: one.\n") == {}  # Google style does not count


def _public() -> list[str]:
    return [
        name for name in mobidfl.__all__
        if callable(getattr(mobidfl, name))
        and not getattr(getattr(mobidfl, name), "_is_protocol", False)
    ]  # fmt: skip


def problems(name: str) -> list[str]:
    obj = getattr(mobidfl, name)
    target = inspect.unwrap(obj)
    doc = inspect.getdoc(target) or ""
    sections = numpy_sections(doc)
    signature = inspect.signature(target)
    params = {p for p in signature.parameters if p not in ("self", "cls")}
    found: list[str] = []
    if params:
        allowed = ("Parameters", "Attributes") if dataclasses.is_dataclass(target) else (
            "Parameters",)  # fmt: skip
        body = next((sections[s] for s in allowed if s in sections), None)
        if body is None:
            found.append(f"no {' or '.join(allowed)} section")
        elif entry_names(body) != params:
            found.append(f"documents {sorted(entry_names(body))}, takes {sorted(params)}")
    if inspect.isclass(target):
        try:  # a dataclass's generated __init__ has no source (and raises nothing itself)
            code = inspect.getsource(target.__init__) if "__init__" in vars(target) else ""
        except OSError:
            code = ""
    else:
        returns = signature.return_annotation
        if returns not in (None, "None", inspect.Signature.empty) and "Returns" not in sections:
            found.append("no Returns section")
        code = inspect.getsource(target)
    if re.search(r"^\s+raise \w", code, re.M) and "Raises" not in sections:
        found.append("raises but has no Raises section")
    return found


@pytest.mark.parametrize("name", _public())
def test_public_callable_has_numpydoc_sections(name: str) -> None:
    found = problems(name)
    if name in PENDING:
        assert found, f"mobidfl.{name} is documented now: remove it from PENDING"
    else:
        assert not found, f"mobidfl.{name}: " + "; ".join(found)
