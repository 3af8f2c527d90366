"""Every exception the library defines survives pickle with its message, and a
multiprocessing.Pool worker that raises ConfigError hands it back (issue 52: it could not
be unpickled, so a user's pool waited forever)."""

from __future__ import annotations

import ast
import importlib
import inspect
import multiprocessing
import pickle
from pathlib import Path

import pytest

from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"mobidfl": "mobidfl", "model": "mobidfl.model", "agents": "mobidfl.agents",
            "maps": "mobidfl.maps", "analysis": "mobidfl.analysis"}


def _library_exceptions() -> list[tuple[str, str]]:
    """``(module, class)`` of every class in the library whose bases name an Error or
    Exception (read from the source, so a new one is found the day it is written)."""
    found = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception"))
                                                     or b.id in {"ConfigError", "EOFError"})
                        or isinstance(b, ast.Attribute) and b.attr.endswith("Error")
                        for b in node.bases):
                    parts = path.relative_to(ROOT / folder).with_suffix("").parts
                    module = ".".join([package, *[p for p in parts if p != "__init__"]])
                    found.append((module, node.name))
    return found


def _make(cls: type[BaseException]) -> BaseException:
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
              and p.default is p.empty]
    if not params:
        return cls("a message")
    return cls(*(f"value-{p.name}" for p in params))


def test_the_scan_finds_the_library_s_exceptions():
    names = {name for _, name in _library_exceptions()}
    assert {"ConfigError", "UnknownSetting", "BenchDamaged", "SweepStopped"} <= names


@pytest.mark.parametrize(("module", "name"), _library_exceptions())
def test_every_library_exception_round_trips_through_pickle(module, name):
    # Prepare
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        pytest.skip(f"{name} is not an exception class")
    error = _make(cls)
    # Execute
    again = pickle.loads(pickle.dumps(error))
    # Assert: the same class, message and attributes
    assert type(again) is cls and str(again) == str(error)
    assert again.__dict__ == error.__dict__


def _raise_config_error(value: int) -> int:
    raise ConfigError("vehicles", value, "an integer >= 0")


def test_a_pool_worker_raising_config_error_gives_it_back():
    # Execute: the worker's exception crosses the process boundary (the result's get() is
    # capped only so that a regression fails instead of hanging the suite)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pending = pool.apply_async(_raise_config_error, (-3,))
        with pytest.raises(ConfigError) as info:
            pending.get(timeout=120)
    # Assert
    assert info.value.setting == "vehicles" and info.value.value == -3
    assert str(info.value) == "setting 'vehicles' = -3 is not allowed: an integer >= 0"
