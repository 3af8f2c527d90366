"""Mesa idioms: agents are created in bulk per kind and are thin views onto the model's arrays,
and the library uses Mesa and mesa-geo through their public API only.

The second half is a pure scan of the library's source (``ast``): an attribute whose name is
private to Mesa or mesa-geo (``_recreate_rtree``, ``_default_schedule``, ``_do_step``, ...)
read or written on any object, or on ``self`` in a class that derives from theirs, fails
unless :data:`ALLOWED` names it with the upstream issue that asks for a public way.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path

import mesa
import mesa_geo
import numpy as np

from mobidfl.agents.kinds import UAV, Pedestrian, Sensor, Vehicle
from mobidfl.model.world import MobiDFLModel
from tests.conftest import FOLDERS

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("mobidfl", "model", "agents", "maps", "analysis", "app.py")
UPSTREAM = (mesa, mesa_geo)

ALLOWED: dict[tuple[str, str], str] = {}
"""``(file, expression)`` -> the upstream issue (a full address) that asks for a public way,
or the docs section with the text of one not filed yet. Empty: no private use remains. An
entry that no longer occurs fails the test, so the set only shrinks."""


def test_agents_by_type_and_ids_follow_the_arrays():
    # Prepare
    model = MobiDFLModel(map="nyc_uws", vehicles=4, pedestrians=3, sensors=2, uavs=1,
                         learning=False, steps=1, seed=3)
    # Execute
    model.step()
    # Assert: one AgentSet per kind, agent_id = row of the arrays = unique_id - 1
    counts = {cls: len(model.agents_by_type[cls]) for cls in (Vehicle, Pedestrian, Sensor, UAV)}
    assert counts == {Vehicle: 4, Pedestrian: 3, Sensor: 2, UAV: 1}
    for agent in model.device_agents:
        assert agent.unique_id == agent.index + 1
        assert model.kind_of[agent.index] == agent.kind
        np.testing.assert_array_equal(agent.position_m, model.position[agent.index])
    speeds = model.agents_by_type[Vehicle].get("speed")
    np.testing.assert_allclose(speeds, model.speed[:4])



def test_sync_geometries_moves_the_geoagents_their_index_and_bounds():
    # Prepare: a run whose agents have moved since they were added to the GeoSpace
    model = MobiDFLModel(map="grid:3x3:100", vehicles=8, pedestrians=0, sensors=0, uavs=0,
                         learning=False, steps=4, seed=0)
    first = model.space.total_bounds.copy()
    for _ in range(2):  # twice: the second time a spatial index already exists
        model.run(steps=2)
        # Execute
        model.sync_geometries()
        # Assert: geometries are the WGS84 positions, bounds and spatial queries follow them
        lonlat = model.world_map.to_wgs84(model.position)
        moved = np.array([[a.geometry.x, a.geometry.y] for a in model.device_agents])
        np.testing.assert_array_equal(moved, lonlat)
        assert model.space.agents == model.device_agents
        np.testing.assert_array_equal(model.space.total_bounds, [*lonlat.min(0), *lonlat.max(0)])
        for agent in model.device_agents:
            area = agent.geometry.buffer(0.001)
            near = model.space.get_neighbors_within_distance(agent, 0.001)
            expected = [b.index for b in model.device_agents if area.intersects(b.geometry)]
            assert sorted(b.index for b in near) == expected
    assert np.abs(model.space.total_bounds - first).max() > 1e-6  # not the first places


# --- the model's __init__ as Mesa's examples write it -----------------------------------------
def init_problems(source: str) -> list[str]:
    """How a model's ``__init__`` (its source) departs from Mesa's idiom, or ``[]``.

    Settings are keyword arguments (no positional parameter but ``self``), and
    ``super().__init__(rng=...)`` comes before any statement that touches ``self``: the
    model's generator exists before any agent, space or draw.
    """
    init = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(init, ast.FunctionDef)
    found: list[str] = []
    if [a.arg for a in init.args.posonlyargs + init.args.args] != ["self"] or init.args.vararg:
        found.append("positional parameters (settings are keyword arguments)")
    for stmt in init.body:
        calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
                 and isinstance(n.func.value, ast.Call)
                 and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"]
        if calls:
            if "rng" not in {k.arg for k in calls[0].keywords}:
                found.append("super().__init__ without rng=")
            return found
        if any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(stmt)):
            found.append(f"line {stmt.lineno} uses self before super().__init__(rng=...)")
            return found
    return [*found, "no super().__init__ call"]


def test_init_problems_finds_each_departure() -> None:
    # Prepare
    good = "def __init__(self, *, rng=None, **settings):\n    c = f(rng)\n" \
        "    super().__init__(rng=c.seed)\n    self.a = 1\n"
    early = "def __init__(self, *, rng=None):\n    self.a = 1\n    super().__init__(rng=rng)\n"
    positional = "def __init__(self, n, rng=None):\n    super().__init__(seed=rng)\n"
    # Execute / Assert
    assert init_problems(good) == []
    assert init_problems(early) == ["line 2 uses self before super().__init__(rng=...)"]
    assert init_problems(positional) == ["positional parameters (settings are keyword "
                                         "arguments)", "super().__init__ without rng="]
    assert init_problems("def __init__(self):\n    pass\n") == ["no super().__init__ call"]


def test_the_model_init_starts_mesa_with_rng_and_takes_keyword_settings() -> None:
    # Execute / Assert
    assert init_problems(inspect.getsource(MobiDFLModel.__init__)) == []
    model = MobiDFLModel(map="grid:3x3:100", vehicles=2, pedestrians=0, sensors=0, uavs=0,
                         learning=False, steps=1, rng=5)
    assert model.config.seed == 5  # Mesa's rng argument is the seed setting
    mesa_own = mesa.Model(rng=5).rng.bit_generator.seed_seq  # the generator Mesa makes of 5
    assert model.rng.bit_generator.seed_seq.entropy == mesa_own.entropy


# --- no private Mesa or mesa-geo attributes ---------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def upstream_privates() -> tuple[dict[str, set[str]], set[str]]:
    """Private names of Mesa and mesa-geo, read from their installed source: per class
    (``module.QualName`` -> methods, class attributes and ``self._x`` it sets) and at module
    level (functions, classes and constants)."""
    per_class: dict[str, set[str]] = {}
    module_level: set[str] = set()
    for package in UPSTREAM:
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            if "examples" in parts or "tests" in parts:
                continue
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                names = _defined_names(node)
                module_level.update(n for n in names if _private(n))
            _collect_classes(tree, module, "", per_class)
    return per_class, module_level


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _collect_classes(node: ast.AST, module: str, prefix: str, out: dict[str, set[str]]) -> None:
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.ClassDef):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                _collect_classes(child, module, prefix, out)
            continue
        qualname = f"{prefix}{child.name}"
        names = {n for stmt in child.body for n in _defined_names(stmt) if _private(n)}
        for sub in ast.walk(child):
            if (
                isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                and isinstance(sub.value, ast.Name) and sub.value.id == "self"
                and _private(sub.attr)
            ):  # fmt: skip
                names.add(sub.attr)
        out[f"{module}.{qualname}"] = names
        _collect_classes(child, module, f"{qualname}.", out)


PER_CLASS, MODULE_LEVEL = upstream_privates()
ANY_PRIVATE = set(MODULE_LEVEL).union(*PER_CLASS.values())


def inherited_privates(cls: type) -> set[str]:
    """The private names ``cls`` gets from the Mesa and mesa-geo classes it derives from."""
    found: set[str] = set()
    for base in cls.__mro__:
        found |= PER_CLASS.get(f"{base.__module__}.{base.__qualname__}", set())
    return found


def private_uses(source: str, resolve: Callable[[str], type | None]) -> list[tuple[int, str]]:
    """``(line, expression)`` of each use of a Mesa or mesa-geo private name in ``source``.

    ``obj._x`` counts when ``_x`` is private to Mesa or mesa-geo; ``self._x`` and ``cls._x``
    only inside a class (found by ``resolve(qualname)``) that inherits ``_x`` from them, so
    one's own ``self._rng`` is not theirs. Also ``getattr(obj, "_x")`` and the like, and
    imports of their private names or modules.
    """
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        if isinstance(node, ast.ClassDef):
            owner = node.name if owner is None else f"{owner}.{node.name}"
        elif isinstance(node, ast.Attribute) and node.attr in ANY_PRIVATE:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own:
                found.append((node.lineno, ast.unparse(node)))
            else:
                cls = resolve(owner) if owner is not None else None
                if cls is not None and node.attr in inherited_privates(cls):
                    found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in ANY_PRIVATE
        ):  # fmt: skip
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "mesa", "mesa_geo"
        ):
            names = [a.name for a in node.names]
            if any(_private(p) for p in (node.module or "").split(".") + names):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in ("mesa", "mesa_geo") and any(_private(p) for p in parts):
                    found.append((node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, owner)

    visit(ast.parse(source), None)
    return found


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in FOLDERS.values() and parts[0] != "mobidfl":
        parts.insert(0, "mobidfl")
    return ".".join(parts)


def _resolver(path: Path) -> Callable[[str], type | None]:
    """Finds a class of ``path``'s module by qualified name (imported only when asked)."""

    def resolve(qualname: str) -> type | None:
        if path.name == "app.py" and path.parent == ROOT:
            return None  # a script (solara's entry point), not an importable module
        found: object = importlib.import_module(_module_name(path))
        for part in qualname.split("."):
            found = getattr(found, part, None)
        return found if isinstance(found, type) else None

    return resolve


def library_uses() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for name in LIBRARY:
        path = ROOT / name
        for f in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for line, expression in private_uses(f.read_text(encoding="utf-8"), _resolver(f)):
                found.setdefault((f.relative_to(ROOT).as_posix(), expression), []).append(line)
    return found


class _Subclass(mesa.Model):
    def own(self) -> None:
        self._mine = 1


def test_the_scan_finds_private_uses() -> None:
    # Prepare: what the library did before it used only public calls
    source = """
from mesa.time.events import _create_callable_reference
import mesa_geo.geospace
class _Subclass:
    def own(self):
        self._mine = self._rng = 1
        self._default_schedule.stop()
def restart(model, space):
    model._default_schedule = EventGenerator(model, model._do_step, Schedule())
    space._recreate_rtree()
    getattr(space, "_agent_layer")
"""
    # Execute
    found = private_uses(source, lambda name: _Subclass if name == "_Subclass" else None)
    # Assert: a Model subclass's own self._mine is its own; Model sets self._rng itself
    expressions = [e for _, e in found]
    assert "from mesa.time.events import _create_callable_reference" in expressions
    assert "self._default_schedule" in expressions
    assert "model._default_schedule" in expressions and "model._do_step" in expressions
    assert "space._recreate_rtree" in expressions
    assert "getattr(space, '_agent_layer')" in expressions
    assert "self._mine" not in expressions and "import mesa_geo.geospace" not in expressions
    assert "self._rng" in expressions


def test_the_scan_spares_a_class_of_ours_that_mesa_does_not_own() -> None:
    # Prepare: a policy's own random generator shares a name with Mesa's Model._rng
    source = "class Policy:\n    def f(self):\n        self._rng = 1\n"
    # Execute / Assert
    assert private_uses(source, lambda name: object) == []


def test_the_library_uses_no_private_mesa_or_mesa_geo_attribute() -> None:
    # Execute
    found = library_uses()
    # Assert: each remaining use is allowed by name, with its upstream reference
    unexpected = {f"{f}:{lines} {e}" for (f, e), lines in found.items() if (f, e) not in ALLOWED}
    assert not unexpected, (
        "library code touches Mesa/mesa-geo private attributes (use a public call, or add "
        f"the case to ALLOWED with the upstream issue that asks for one): {sorted(unexpected)}"
    )
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"{stale} no longer occur: remove them from ALLOWED"
    for key, reference in ALLOWED.items():
        assert reference.startswith(("https://github.com/", "docs/")), (key, reference)
