"""The benchmark's worlds and cells: scenarios x links (x a second axis) x policies.

A *scenario* (``analysis/scenarios/<name>.toml``) fixes one world: every world setting is
written in its ``[world]`` table and passed explicitly to every run, so that no policy's
declarations (``defaults``) can change the map, mobility, radius, contact rule, link, data,
partition, net, local training or test set. A *column* is a scenario at one link
(``_links.toml``) and, where the scenario has an ``[axes]`` table, one value of its second
axis (the UAVs' mobility in DAM/DCM's world). A *cell* is a column and a policy: the
column's world, the policy and its own settings at its paper's values (``_policies.toml``),
or the one-line reason :class:`mobidfl.model.config.Config` refuses the pair (MoFeL without routes,
a policy that ignores the link under 802.11p).
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config import (
    KINDS,
    Config,
    canonical_name,
    flatten,
    required_world,
    setting_role,
)
from mobidfl.plugins import POLICIES

__all__ = [
    "Cell",
    "Column",
    "SCALES",
    "Scenario",
    "build_cells",
    "columns",
    "link_axis",
    "load_scenario",
    "policy_names",
    "policy_settings",
    "scenario_names",
    "world_values",
]

PACKAGE = "mobidfl.analysis.scenarios"
SCALES = ("ci", "small", "full")

def world_values(config: Config) -> dict[str, Any]:
    """Every world setting of a resolved config, by public name.

    The identity checked across the policies of a column.
    """
    return {
        name: value for name, value in flatten(config.to_dict()) if setting_role(name) == "world"
    }


# --- files -------------------------------------------------------------------------------------
def _read(name: str) -> dict[str, Any]:
    text = resources.files(PACKAGE).joinpath(f"{name}.toml").read_text()
    return tomllib.loads(text)


def scenario_names() -> list[str]:
    """The scenarios shipped with MobiDFL, in the set's order (by file name)."""
    files = resources.files(PACKAGE).iterdir()
    return sorted(
        f.name[: -len(".toml")] for f in files
        if f.name.endswith(".toml") and not f.name.startswith("_")
    )


@dataclass(frozen=True)
class About:
    """What a scenario or a study says of itself in ``[about]`` (the manifest's provenance)."""

    name: str
    version: int
    title: str
    regime: str
    provenance: str
    why: str


@dataclass(frozen=True)
class Scenario(About):
    """One standard world: its provenance, settings, second axis and scale departures."""

    world: dict[str, Any]
    axes: dict[str, list[Any]] = field(default_factory=dict)
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    sha256: str = ""

    def settings(self, scale: str) -> dict[str, Any]:
        """The world at ``scale``: ``[world]`` with the scale's departures on top."""
        return {**self.world, **self.scales.get(scale, {})}


USER_SCENARIOS: dict[str, str] = {}
"""``[about].name -> path`` of the user's own scenario files read so far (``--scenarios
./my_world.toml``): later look-ups by name (the manifest's provenance) find the same file."""


def _scenario_text(name: str) -> tuple[str, str]:
    """``(text, where)`` of a bundled scenario or a user's scenario file (``*.toml``)."""
    if name.endswith(".toml") or name in USER_SCENARIOS:
        path = Path(USER_SCENARIOS.get(name, name)).expanduser()
        try:
            return path.read_text(encoding="utf-8"), f"scenario file {path}"
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            raise ConfigError("--scenarios", str(path), f"a readable TOML scenario file "
                              f"({why})") from None
    if name not in scenario_names():
        raise ConfigError("--scenarios", name, "one of " + ", ".join(scenario_names())
                          + ", or a scenario file ending in .toml")
    return resources.files(PACKAGE).joinpath(f"{name}.toml").read_text(), f"scenario {name}"


@functools.cache
def load_scenario(name: str) -> Scenario:
    """Read and check one scenario, bundled (by name) or the user's own (a ``.toml`` path).

    The user's own has the same schema; a bad one is one :class:`ConfigError` naming it.
    """
    raw_text, where = _scenario_text(name)
    try:
        data = tomllib.loads(raw_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(where, str(exc).splitlines()[0], "a TOML file") from None
    about = data.get("about", {})
    for key in ("name", "version", "title", "provenance", "why"):
        if key not in about:
            raise ConfigError(where, f"[about].{key}", "a scenario file with name, version, "
                              "title, provenance and why in [about]")
    world = {canonical_name(n): v for n, v in flatten(data.get("world", {}))}
    missing = [n for n in required_world() if n not in world]
    if missing:
        raise ConfigError(where, ", ".join(missing), "every world setting written in [world]")
    foreign = [n for n in world if setting_role(n) != "world"]
    if foreign:
        raise ConfigError(where, ", ".join(foreign), "world settings only in [world] (policies "
                          "and run settings are the benchmark's)")
    axes = {canonical_name(n): list(v) for n, v in flatten(data.get("axes", {}))}
    scales: dict[str, dict[str, Any]] = {}
    notes: dict[str, str] = {}
    for scale in SCALES:
        table = dict(data.get("scales", {}).get(scale, {}))
        notes[scale] = str(table.pop("note", ""))
        scales[scale] = {canonical_name(n): v for n, v in flatten(table)}
    if not isinstance(about["version"], int) or isinstance(about["version"], bool):
        raise ConfigError(where, f"[about].version = {about['version']!r}", "an integer")
    if name.endswith(".toml"):
        own = str(about["name"])
        if own in scenario_names() or not re.fullmatch(r"[A-Za-z0-9_\-]+", own):
            raise ConfigError(where, f"[about].name = {own!r}", "a name of letters, digits, "
                              "_ or - that no bundled scenario has")
        USER_SCENARIOS[own] = name
    return Scenario(
        name=str(about["name"]), version=int(about["version"]), title=str(about["title"]),
        regime=str(about.get("regime", "")), provenance=str(about["provenance"]),
        why=str(about["why"]), world=world, axes=axes, scales=scales, notes=notes,
        sha256=hashlib.sha256(raw_text.encode()).hexdigest(),
    )


@functools.cache
def link_axis() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """``key -> (label, about, settings)`` of ``_links.toml``: the links every scenario runs at."""
    out = {}
    for key, table in _read("_links").items():
        table = dict(table)
        label, about = str(table.pop("label", key)), str(table.pop("about", ""))
        out[key] = (label, about, {canonical_name(n): v for n, v in table.items()})
    return out


@functools.cache
def _policy_table() -> dict[str, tuple[str, dict[str, Any]]]:
    out = {}
    for name, table in _read("_policies").items():
        table = dict(table)
        about = str(table.pop("about", ""))
        out[name] = (about, dict(table))
    return out


def policy_settings(policy: str) -> tuple[str, dict[str, Any]]:
    """``(source, settings)`` of a policy's own settings at its paper's values.

    Plug-ins and policies without settings of their own get their defaults, ``({}, "")``.
    """
    about, settings = _policy_table().get(policy, ("", {}))
    return about, dict(settings)


REFERENCES = {"local": 0, "central_fedavg": 1}
"""The score's 0 and 1: first in ``all``, then the other policies by name."""


def policy_names(spec: str | Sequence[str] | None = None) -> list[str]:
    """Policies to benchmark.

    ``all`` (every registered one, entry-point plug-ins included: ``local`` and ``central_fedavg``
    first) or a comma list of registered names, in the order given.
    """
    items = [spec] if isinstance(spec, str) else list(spec or ["all"])
    names: list[str] = []
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            chosen = sorted(POLICIES.names(), key=lambda n: (REFERENCES.get(n, 2), n)) \
                if part == "all" else [part]
            for name in chosen:
                if name not in POLICIES:
                    raise ConfigError("--policies", name, "all, or registered policies: "
                                      + ", ".join(POLICIES.names()))
                if name not in names:
                    names.append(name)
    if not names:
        raise ConfigError("--policies", spec, "at least one policy")
    return names


# --- columns and cells ---------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """A scenario at one link and one value of its second axis: one column of the table."""

    scenario: str
    variant: str  # the axis value ("" without an axis)
    link: str  # key in _links.toml
    link_label: str
    settings: dict[str, Any]  # the world, explicit, at the bench's scale

    @property
    def world_name(self) -> str:
        """``scenario[variant]``, or the scenario alone when it has no variant."""
        return f"{self.scenario}[{self.variant}]" if self.variant else self.scenario

    @property
    def key(self) -> str:
        """Folder- and CSV-safe identifier."""
        return f"{self.scenario}{'-' + self.variant if self.variant else ''}@{self.link}"

    @property
    def label(self) -> str:
        """``world / link`` for tables and plots."""
        return f"{self.world_name} / {self.link_label}"


def columns(scenarios: Sequence[str], *, scale: str,
            links: Sequence[str] | None = None) -> list[Column]:
    """Every column of ``scenarios`` at ``scale``: each link, each value of the axis."""
    if scale not in SCALES:
        raise ConfigError("--scale", scale, "one of " + ", ".join(SCALES))
    axis = link_axis()
    chosen = list(links) if links else list(axis)
    for link in chosen:
        if link not in axis:
            raise ConfigError("--links", link, "one of " + ", ".join(axis))
    out = []
    for given in scenarios:
        scenario = load_scenario(given)
        name = scenario.name  # a user's file: its [about].name, not its path
        world = scenario.settings(scale)
        # every kind's partition and policy explicit: no kind inherits a policy's choice
        for kind in KINDS:
            world.setdefault(f"{kind}.partition", world["partition"])
        variants = [("", {})]
        if scenario.axes:
            (setting, values), = scenario.axes.items()
            variants = [(str(v), {setting: v}) for v in values]
        for variant, extra in variants:
            for link in chosen:
                label, _, link_settings = axis[link]
                out.append(Column(
                    scenario=name, variant=variant, link=link, link_label=label,
                    settings={**world, **extra, **link_settings},
                ))
    return out


@dataclass(frozen=True)
class Cell:
    """A column and a policy: the settings of its runs, or why the pair cannot run."""

    column: Column
    policy: str
    settings: dict[str, Any]
    refusal: str = ""
    config: Config | None = None

    @property
    def key(self) -> str:
        """``<column key>__<policy>``, folder- and CSV-safe."""
        return f"{self.column.key}__{self.policy}"


def cell_settings(column: Column, policy: str, *,
                  readings: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The explicit settings of a cell's runs.

    The column's world, the policy for every kind and its own settings at its paper's values,
    with a study's declared reading of them on top (``readings``: policy -> settings; a study's
    ``[policies]`` table, the same for every column).
    """
    _, own = policy_settings(policy)
    own.update((readings or {}).get(policy, {}))
    kinds = {f"{kind}.policy": None for kind in KINDS}
    return {**column.settings, **kinds, "policy": policy, **own}


def build_cells(cols: Sequence[Column], policies: Sequence[str], *,
                readings: Mapping[str, Mapping[str, Any]] | None = None) -> list[Cell]:
    """Resolve every column x policy pair (``Config`` only: fast).

    ``readings``: a study's reading of some policies' settings (:func:`cell_settings`).

    A refused pair keeps the one-line reason. Raises when a policy changed the world of its column
    (it cannot: every world setting is explicit, which this checks).
    """
    cells = []
    for column in cols:
        reference: dict[str, Any] | None = None
        for policy in policies:
            settings = cell_settings(column, policy, readings=readings)
            try:
                config = Config.from_settings(settings)
            except ConfigError as exc:
                cells.append(Cell(column, policy, settings, refusal=" ".join(str(exc).split())))
                continue
            world = world_values(config)
            if reference is None:
                reference = world
            elif world != reference:
                changed = sorted(n for n in world if world[n] != reference.get(n))
                raise ConfigError(
                    f"scenario {column.scenario}", ", ".join(changed),
                    f"the same world for every policy (policy {policy} changed it)",
                )
            cells.append(Cell(column, policy, settings, config=config))
    return cells
