"""Controlled studies: one base world, one factor changed per column (``mobidfl bench --study``).

A paper world of the bench changes mobility, label skew, recipe and fleet at once, so a
ranking that differs between two of them has no single cause. A study
(``analysis/scenarios/studies/<name>.toml``) writes one base world whole and, per factor,
levels that each say what they change from it. Its columns are: the base; the base with one
factor at one non-base level; and, per ``[crosses]`` entry, the base with two factors at
non-base levels (their interaction). ``[heldout]`` worlds are run beside them but never used
to draw the decision rule (:mod:`mobidfl.analysis.regime_map`), only to check it.

:func:`changed_settings` is what ``tests/analysis/test_study.py`` checks: a column differs from the
base in exactly the settings of the levels it names.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from mobidfl.analysis.bench_scenarios import SCALES, About, Column, link_axis
from mobidfl.errors import ConfigError
from mobidfl.model.config import (  # the names a scenario reader needs (as bench_scenarios.py)
    KINDS,
    canonical_name,
    check_one_name_each,
    flatten,
    required_world,
    setting_role,
    warn_old_names,
)

__all__ = [
    "BASE",
    "Study",
    "changed_settings",
    "load_study",
    "study_names",
]

PACKAGE = "mobidfl.analysis.scenarios.studies"
BASE = "base"
"""The variant name of the base column."""
HELDOUT_PREFIX = "heldout:"
"""Variant names of held-out columns start with this."""


@dataclass(frozen=True)
class Factor:
    """One factor: its base level and what each level changes from the base world."""

    name: str
    base: str
    levels: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Study(About):
    """A controlled study, read whole and checked (:func:`load_study`)."""

    base: dict[str, Any]
    factors: dict[str, Factor]
    crosses: dict[str, dict[str, list[str]]]
    heldout: dict[str, dict[str, Any]]
    heldout_about: dict[str, str]
    grid: tuple[str, ...] = ()
    """Factors crossed in full (``[grid] factors``): every combination of their levels is a
    column, so a descriptor can be read across the others' levels (version 3's design)."""
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per policy, the study's reading of its settings over the paper values
    (``[policies.NAME]``: settings and a ``why``), applied to every column alike."""
    policies_why: dict[str, str] = field(default_factory=dict)
    design: dict[str, Any] = field(default_factory=dict)
    """The pre-registered analysis (``[design]``) as written: metric, families, seeds plan,
    gates; read by :mod:`mobidfl.analysis.answer`."""
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    tuning: dict[str, Any] = field(default_factory=dict)
    """The ``[tuning]`` table as written (checked by
    :func:`mobidfl.analysis.tuning.load_tuning`)."""
    sha256: str = ""

    def base_world(self, scale: str) -> dict[str, Any]:
        """The base world at ``scale``, every kind's partition explicit.

        The scale's departures on top; partitions explicit as in the bench's scenarios.
        """
        world = {**self.base, **self.scales.get(scale, {})}
        for kind in KINDS:
            world.setdefault(f"{kind}.partition", world["partition"])
        return world

    def variants(self) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
        """``(variant, named levels, settings changed)`` of every column, base first.

        One factor at a time, then the crosses, then the held-out worlds (named levels empty).
        """
        out: list[tuple[str, dict[str, str], dict[str, Any]]] = [(BASE, {}, {})]
        if self.grid:  # every combination; a variant names its non-base levels only
            chosen = [self.factors[f] for f in self.grid]
            for combo in itertools.product(*(list(f.levels) for f in chosen)):
                named = {f.name: lv for f, lv in zip(chosen, combo, strict=True)
                         if lv != f.base}
                if not named:
                    continue
                changes: dict[str, Any] = {}
                for f, lv in zip(chosen, combo, strict=True):
                    changes.update(f.levels[lv])
                out.append(("+".join(f"{f}={lv}" for f, lv in named.items()), named, changes))
        for factor in ([] if self.grid else self.factors.values()):
            for level, changes in factor.levels.items():
                if level != factor.base:
                    out.append((f"{factor.name}={level}", {factor.name: level}, dict(changes)))
        for cross in self.crosses.values():
            (fa, levels_a), (fb, levels_b) = cross.items()
            for la, lb in itertools.product(levels_a, levels_b):
                changes = {**self.factors[fa].levels[la], **self.factors[fb].levels[lb]}
                out.append((f"{fa}={la}+{fb}={lb}", {fa: la, fb: lb}, changes))
        for name, changes in self.heldout.items():
            out.append((f"{HELDOUT_PREFIX}{name}", {}, dict(changes)))
        return out

    def columns(self, scale: str) -> list[Column]:
        """Every column at ``scale`` on the ideal link (one radio for the whole study)."""
        if scale not in SCALES:
            raise ConfigError("--scale", scale, "one of " + ", ".join(SCALES))
        label, _, link_settings = link_axis()["ideal"]
        base = self.base_world(scale)
        out = []
        for variant, _, changes in self.variants():
            world = {**base, **changes}
            if "partition" in changes:  # the kinds' explicit partitions follow the level's
                for kind in KINDS:
                    world[f"{kind}.partition"] = changes["partition"]
            out.append(Column(scenario=self.name, variant=variant, link="ideal",
                              link_label=label, settings={**world, **link_settings}))
        return out


def study_names() -> list[str]:
    """The studies shipped with MobiDFL, by file name."""
    files = resources.files(PACKAGE).iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


def _names(table: Mapping[str, Any]) -> dict[str, Any]:
    """Public name -> value; one name per setting, old names warned (as ``--set`` does)."""
    given = list(flatten(table))
    check_one_name_each(given)
    warn_old_names(n for n, _ in given)
    return {canonical_name(n): v for n, v in given}


@functools.cache
def load_study(name: str) -> Study:
    """Read and check one study file; a bad file is one :class:`ConfigError` naming it."""
    if name not in study_names():
        raise ConfigError("--study", name, "one of " + ", ".join(study_names()))
    raw = resources.files(PACKAGE).joinpath(f"{name}.toml").read_text()
    where = f"study {name}"
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(where, str(exc), "a TOML file") from None
    about = data.get("about", {})
    for key in ("name", "version", "title", "provenance", "why"):
        if key not in about:
            raise ConfigError(where, f"[about].{key}", "name, version, title, provenance and "
                              "why in [about]")
    base = _names(data.get("base", {}))
    missing = [n for n in required_world() if n not in base]
    if missing:
        raise ConfigError(where, ", ".join(missing), "every world setting written in [base]")
    factors = _factors(data, base, where=where)
    crosses = _crosses(data, factors, where=where)
    grid = _grid(data, factors, crosses, where=where)
    policies, policies_why = _policies(data, where=where)
    heldout, heldout_about = {}, {}
    for hname, table in data.get("heldout", {}).items():
        table = dict(table)
        heldout_about[hname] = str(table.pop("about", ""))
        heldout[hname] = _world_only(_names(table), f"heldout.{hname}", where=where)
    scales, notes = {}, {}
    for scale in SCALES:
        table = dict(data.get("scales", {}).get(scale, {}))
        notes[scale] = str(table.pop("note", ""))
        scales[scale] = _world_only(_names(table), f"scales.{scale}", where=where)
    return Study(
        name=str(about["name"]), version=int(about["version"]), title=str(about["title"]),
        regime=str(about.get("regime", "")), provenance=str(about["provenance"]),
        why=str(about["why"]), base=base, factors=factors, crosses=crosses, heldout=heldout,
        heldout_about=heldout_about, grid=grid, policies=policies,
        policies_why=policies_why, design=dict(data.get("design", {})),
        scales=scales, notes=notes,
        tuning=dict(data.get("tuning", {})),
        sha256=hashlib.sha256(raw.encode()).hexdigest(),
    )


def _world_only(changes: dict[str, Any], what: str, *, where: str) -> dict[str, Any]:
    """``changes`` when it sets world settings only (the benchmark sets the rest)."""
    foreign = [n for n in changes if setting_role(n) != "world"]
    if foreign:
        raise ConfigError(where, f"{what}: {', '.join(foreign)}", "world settings only "
                          "(policies and run settings are the benchmark's)")
    return changes


def _factors(data: Mapping[str, Any], base: Mapping[str, Any], *, where: str
             ) -> dict[str, Factor]:
    """The study's factors: each level a change of world settings, the base level empty."""
    factors: dict[str, Factor] = {}
    for fname, table in data.get("factors", {}).items():
        levels = {str(k): _world_only(_names(v), f"{fname}.{k}", where=where)
                  for k, v in table.get("levels", {}).items()}
        base_level = str(table.get("base", ""))
        if base_level not in levels or levels[base_level]:
            raise ConfigError(where, f"factors.{fname}.base = {base_level!r}",
                              "the name of an empty level (the base's own)")
        for level, changes in levels.items():
            same = [n for n, v in changes.items() if base.get(n) == v]
            if same:
                raise ConfigError(where, f"factors.{fname}.levels.{level}: {', '.join(same)}",
                                  "a change from the base (this is the base's value)")
        factors[fname] = Factor(name=fname, base=base_level, levels=levels)
    return factors


def _crosses(data: Mapping[str, Any], factors: Mapping[str, Factor], *, where: str
             ) -> dict[str, dict[str, list[str]]]:
    """Crosses of two factors, by their non-base levels; the two change different settings."""
    crosses: dict[str, dict[str, list[str]]] = {}
    for cname, table in data.get("crosses", {}).items():
        if len(table) != 2 or any(f not in factors for f in table):
            raise ConfigError(where, f"crosses.{cname}", "two factors of [factors]")
        for fname, levels in table.items():
            bad = [lv for lv in levels if lv not in factors[fname].levels
                   or lv == factors[fname].base]
            if bad:
                raise ConfigError(where, f"crosses.{cname}.{fname}: {bad[0]}",
                                  f"non-base levels of factor {fname}")
        a, b = table
        overlap = set().union(*(factors[a].levels[lv] for lv in table[a])) & set().union(
            *(factors[b].levels[lv] for lv in table[b]))
        if overlap:
            raise ConfigError(where, f"crosses.{cname}: {', '.join(sorted(overlap))}",
                              "two factors that change different settings")
        crosses[cname] = {str(f): [str(v) for v in lv] for f, lv in table.items()}
    return crosses


def _grid(data: Mapping[str, Any], factors: Mapping[str, Factor],
          crosses: Mapping[str, Any], *, where: str) -> tuple[str, ...]:
    """The factors of a full grid (empty: none); every factor, each its own settings."""
    grid = tuple(str(f) for f in data.get("grid", {}).get("factors", []))
    if grid:
        unknown = [f for f in grid if f not in factors]
        if unknown or len(set(grid)) != len(grid) or len(grid) < 2:
            raise ConfigError(where, f"grid.factors = {list(grid)}",
                              "two or more distinct factors of [factors]")
        if crosses or set(factors) - set(grid):
            raise ConfigError(where, "grid", "a grid of every factor, without [crosses]")
        seen: dict[str, str] = {}
        for fname in grid:
            for changes in factors[fname].levels.values():
                for n in changes:
                    if seen.setdefault(n, fname) != fname:
                        raise ConfigError(where, f"grid: {n}", "factors that change "
                                          "different settings")
    return grid


def _policies(data: Mapping[str, Any], *, where: str
              ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each policy's own settings in this study, and why the study reads it so."""
    policies: dict[str, dict[str, Any]] = {}
    policies_why: dict[str, str] = {}
    for pname, table in data.get("policies", {}).items():
        table = dict(table)
        why = str(table.pop("why", ""))
        if not why:
            raise ConfigError(where, f"policies.{pname}", "a why for the study's reading")
        settings_of = _names(table)
        foreign = [n for n in settings_of if setting_role(n) != "policy"]
        if foreign:
            raise ConfigError(where, f"policies.{pname}: {', '.join(foreign)}",
                              "the policy's own settings only (the world is the study's)")
        policies[str(pname)], policies_why[str(pname)] = settings_of, why
    return policies, policies_why


def changed_settings(column: Column, base: Column) -> dict[str, tuple[Any, Any]]:
    """``name -> (base value, column value)`` for every setting where ``column`` differs.

    Differs from ``base``: the one-factor check.
    """
    names = set(column.settings) | set(base.settings)
    return {n: (base.settings.get(n), column.settings.get(n)) for n in sorted(names)
            if base.settings.get(n) != column.settings.get(n)}
