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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config import (
    KINDS,
    Config,
    InertSettingWarning,
    UnknownSetting,
    canonical_name,
    check_one_name_each,
    flatten,
    required_world,
    setting_role,
    warn_old_names,
)
from mobidfl.plugins import POLICIES

__all__ = [
    "Cell",
    "Column",
    "SCALES",
    "Scenario",
    "build_cells",
    "check_columns",
    "check_world",
    "columns",
    "link_axis",
    "load_scenario",
    "policy_names",
    "policy_settings",
    "scenario_names",
    "source_of",
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


TABLES = ("about", "world", "axes", "scales")
"""The tables of a scenario file; any other is refused (a typo would be silently dropped)."""

ABOUT_KEYS = ("name", "version", "title", "regime", "provenance", "why")
"""The keys of ``[about]`` (``regime`` optional)."""


def _table(data: Mapping[str, Any], key: str, where: str, shown: str) -> dict[str, Any]:
    """``data[key]`` (``{}`` when absent), refused in one line unless it is a TOML table."""
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(where, f"{shown} = {value!r}", "a table")
    return value


def _settings(table: Mapping[str, Any], where: str, shown: str) -> dict[str, Any]:
    """Public name -> value of one table of settings, refused naming the file and the setting.

    WHY: an old flat name and its new dotted name in the same table (``turn_straight`` in
    ``[world]`` and ``turn_straight`` in ``[world.manhattan]``) would silently keep one of
    them; ``--set``, sweeps and settings files refuse the pair (:func:`check_one_name_each`).
    Old names are warned, as ``--set`` warns them.
    """
    given = list(flatten(table))
    try:
        check_one_name_each(given)
        public = {canonical_name(n): v for n, v in given}
    except UnknownSetting as exc:
        raise ConfigError(f"{where} {shown}", exc.setting, exc.allowed) from None
    except ConfigError as exc:
        raise ConfigError(f"{where} {shown}: {exc.setting}", exc.value, exc.allowed) from None
    warn_old_names(n for n, _ in given)
    return public


@functools.cache
def load_scenario(name: str) -> Scenario:
    """Read and check one scenario, bundled (by name) or the user's own (a ``.toml`` path).

    The user's own has the same schema; a bad one is one :class:`ConfigError` naming it. The
    values themselves are checked by :func:`check_columns` (the bench's up-front check).
    """
    raw_text, where = _scenario_text(name)
    try:
        data = tomllib.loads(raw_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(where, str(exc).splitlines()[0], "a TOML file") from None
    unknown = [k for k in data if k not in TABLES]
    if unknown:
        raise ConfigError(where, f"[{unknown[0]}]", "only the tables " + ", ".join(
            f"[{t}]" for t in TABLES))
    about = _table(data, "about", where, "[about]")
    for key in ("name", "version", "title", "provenance", "why"):
        if key not in about:
            raise ConfigError(where, f"[about].{key}", "a scenario file with name, version, "
                              "title, provenance and why in [about]")
    for key, value in about.items():
        if key not in ABOUT_KEYS:
            raise ConfigError(where, f"[about].{key}", "only " + ", ".join(ABOUT_KEYS)
                              + " in [about]")
        if key != "version" and not isinstance(value, str):
            raise ConfigError(where, f"[about].{key} = {value!r}", "a string")
    world = _settings(_table(data, "world", where, "[world]"), where, "[world]")
    missing = [n for n in required_world() if n not in world]
    if missing:
        raise ConfigError(where, ", ".join(missing), "every world setting written in [world]")
    foreign = [n for n in world if setting_role(n) != "world"]
    if foreign:
        raise ConfigError(where, ", ".join(foreign), "world settings only in [world] (policies "
                          "and run settings are the benchmark's)")
    axes = _settings(_table(data, "axes", where, "[axes]"), where, "[axes]")
    if len(axes) > 1 or any(not isinstance(v, list) or not v for v in axes.values()):
        raise ConfigError(where, "[axes] = " + ", ".join(axes), "one world setting and a "
                          "non-empty list of its values (a second axis)")
    foreign = [n for n in axes if setting_role(n) != "world"]
    if foreign:
        raise ConfigError(where, "[axes] " + ", ".join(foreign), "a world setting")
    scales: dict[str, dict[str, Any]] = {}
    notes: dict[str, str] = {}
    all_scales = _table(data, "scales", where, "[scales]")
    unknown = [k for k in all_scales if k not in SCALES]
    if unknown:
        raise ConfigError(where, f"[scales.{unknown[0]}]", "scales " + ", ".join(SCALES))
    for scale in SCALES:
        table = dict(_table(all_scales, scale, where, f"[scales.{scale}]"))
        note = table.pop("note", "")
        if not isinstance(note, str):
            raise ConfigError(where, f"[scales.{scale}].note = {note!r}", "a string")
        notes[scale] = note
        scales[scale] = _settings(table, where, f"[scales.{scale}]")
        foreign = [n for n in scales[scale] if setting_role(n) != "world"]
        if foreign:
            raise ConfigError(where, f"[scales.{scale}] " + ", ".join(foreign),
                              "world settings only")
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


def source_of(name: str) -> str:
    """How refusals name where a column's world is written: its file, scenario or study."""
    if name in USER_SCENARIOS:
        return f"scenario file {Path(USER_SCENARIOS[name]).expanduser()}"
    return f"scenario {name}" if name in scenario_names() else f"study {name}"


def check_world(column: Column, *, memory: bool = True) -> Config:
    """The column's world resolved, its map openable and (``memory``) its fleet within memory.

    WHY: the checks ``bench --describe`` fails early on, without running the mobility: a
    missing map file, 50 million vehicles or ``radius_m = -50`` would otherwise write a bench
    folder whose every run fails. Refused in one line naming the file (or scenario or study),
    the world and the setting. No inert-setting warnings: a scenario writes every world
    setting, read or not.
    """
    from mobidfl.maps.sources import check_spec
    from mobidfl.model.bounds import check_memory

    where = source_of(column.scenario) + (f" [{column.variant}]" if column.variant else "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InertSettingWarning)
            config = Config.from_settings(column.settings)
        check_spec(config.map)
        if memory:
            check_memory(config)
    except UnknownSetting as exc:
        raise ConfigError(where, exc.setting, exc.allowed) from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.setting}", exc.value, exc.allowed) from None
    return config


def check_columns(cols: Sequence[Column]) -> None:
    """:func:`check_world` for each distinct world of ``cols`` (before any folder is written)."""
    seen: set[str] = set()
    for column in cols:
        key = repr(sorted(column.settings.items(), key=lambda item: item[0]))
        if key not in seen:
            seen.add(key)
            check_world(column)


def check_scenario(name: str, *, scale: str) -> list[Column]:
    """A scenario (bundled or a file) checked whole: every scale resolves, ``scale`` fits.

    Every scale's worlds resolve (a broken ``[scales.full]`` is refused by a ``ci`` bench too);
    the map and the memory at ``scale``, the one that runs.
    """
    for other in SCALES:
        if other != scale:
            for column in columns([name], scale=other, links=["ideal"]):
                check_world(column, memory=False)
    cols = columns([name], scale=scale)
    check_columns(cols)
    return cols


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
    named: dict[str, tuple[str, Scenario]] = {}
    for given in scenarios:
        scenario = load_scenario(given)
        name = scenario.name  # a user's file: its [about].name, not its path
        if given.endswith(".toml"):  # load_scenario is cached: this call's file is the one
            USER_SCENARIOS[name] = given
        first, seen = named.setdefault(name, (given, scenario))
        if first != given:
            if seen.sha256 == scenario.sha256:
                continue  # the same file twice (./a.toml and a.toml): one world
            # WHY: the leaderboard keys worlds by name: two worlds under one name would
            # show every run of each in both columns
            raise ConfigError("--scenarios", f"{first},{given}", "scenario files with "
                              f"different [about].name (both are named {name!r})")
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
