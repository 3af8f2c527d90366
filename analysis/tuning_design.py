"""A study's declared tuning and the rules that choose from its runs (pure, no runs here).

:func:`load_tuning` reads a study's ``[tuning]`` table; :func:`choose`, :func:`recipe_choice`
and :func:`knob_choices` pick a value from the runs' final accuracies by the declared rule.
The runs and the command are :mod:`mobidfl.analysis.tuning`; the page is
:mod:`mobidfl.analysis.tuning_page`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.errors import ConfigError

PLAN = "tuning.json"


KINDS = ("recipe", "policies")


STAGES = ("recipe", "tune", "result")
"""``recipe``: the lr grid on tuning seeds; ``tune``: a knob's grid (and the paper's value)
on tuning seeds; ``result``: the paper's and the chosen value on the results seeds."""


@dataclass(frozen=True)
class Knob:
    """One policy's tuned knob: what it is, its grid and the columns it is tuned on."""

    policy: str
    about: str
    grid: tuple[dict[str, Any], ...]
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Tuning:
    """A study's ``[tuning]`` table, checked whole (:func:`load_tuning`)."""

    study: str
    seeds: tuple[int, ...]
    scale: str
    tie: float
    recipe_policy: str
    recipe_setting: str
    recipe_grid: tuple[float, ...]
    recipe_columns: tuple[str, ...]
    points: int
    knobs: dict[str, Knob]
    untuned: dict[str, str] = field(default_factory=dict)

    def declaration(self) -> dict[str, Any]:
        """What the manifest and the page record of the declaration."""
        return {
            "seeds": list(self.seeds), "scale": self.scale, "tie": self.tie,
            "recipe": {"policy": self.recipe_policy, "setting": self.recipe_setting,
                       "grid": list(self.recipe_grid), "columns": list(self.recipe_columns)},
            "points": self.points,
            "knobs": {p: {"about": k.about, "grid": [dict(g) for g in k.grid],
                          "columns": list(k.columns)} for p, k in self.knobs.items()},
            "untuned": dict(self.untuned),
        }


def load_tuning(name: str) -> Tuning:
    """The ``[tuning]`` table of study ``name``, checked.

    Every column a variant of the study, every grid point the policy's own settings (never the
    world's), the same number of points for every knob (equal budget); a bad table is one
    :class:`ConfigError`.
    """
    from mobidfl.analysis.bench_scenarios import SCALES
    from mobidfl.analysis.study import load_study
    from mobidfl.model.config import canonical_name, setting_role
    from mobidfl.plugins import POLICIES

    study = load_study(name)
    table = study.tuning
    where = f"study {name} [tuning]"
    if not table:
        raise ConfigError("--tune", name, "a study with a [tuning] table")
    variants = {v for v, _, _ in study.variants()}

    def columns(value: Any, what: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or any(v not in variants for v in value):
            raise ConfigError(where, f"{what} = {value!r}", "a list of the study's columns ("
                              + ", ".join(sorted(variants)) + ")")
        return tuple(str(v) for v in value)

    seeds = table.get("seeds")
    if (not isinstance(seeds, list) or len(seeds) < 2 or len(set(seeds)) != len(seeds)
            or any(not isinstance(s, int) or s < 0 for s in seeds)):
        raise ConfigError(where, f"seeds = {seeds!r}", "two or more distinct integers >= 0")
    scale = table.get("scale", "small")
    if scale not in SCALES:
        raise ConfigError(where, f"scale = {scale!r}", "one of " + ", ".join(SCALES))
    tie = table.get("tie")
    if not isinstance(tie, int | float) or not (math.isfinite(tie) and tie >= 0):
        raise ConfigError(where, f"tie = {tie!r}", "a number >= 0 (accuracy)")
    recipe = table.get("recipe", {})
    setting = canonical_name(str(recipe.get("setting", "")))
    if not setting or setting_role(setting) != "world" or setting not in study.base:
        raise ConfigError(where, f"recipe.setting = {recipe.get('setting')!r}",
                          "a setting of the study's [base] (the recipe is the world's)")
    grid = recipe.get("grid")
    if (not isinstance(grid, list) or len(grid) < 2
            or any(not isinstance(v, int | float) or not math.isfinite(v) for v in grid)
            or len(set(grid)) != len(grid)):
        raise ConfigError(where, f"recipe.grid = {grid!r}", "two or more distinct numbers")
    if str(recipe.get("policy", "")) not in POLICIES:
        raise ConfigError(where, f"recipe.policy = {recipe.get('policy')!r}",
                          "a registered policy")
    policies = table.get("policies", {})
    points = policies.get("points", 0 if not policies else None)
    if policies and (not isinstance(points, int) or points < 2):
        raise ConfigError(where, f"policies.points = {points!r}", "an integer >= 2")
    default_columns = columns(policies.get("columns"), "policies.columns") if policies else ()
    knobs: dict[str, Knob] = {}
    for policy, about in policies.get("knobs", {}).items():
        if policy not in POLICIES:
            raise ConfigError(where, f"policies.knobs.{policy}", "a registered policy")
        points_of = about.get("grid")
        if not isinstance(points_of, list) or len(points_of) != points:
            raise ConfigError(where, f"policies.knobs.{policy}.grid",
                              f"{points} points (policies.points: the same budget for every "
                              "policy)")
        own = POLICIES[policy].settings_class
        namespace = getattr(own, "namespace", None)
        grid_points = []
        for point in points_of:
            named = {canonical_name(k): v for k, v in dict(point).items()}
            foreign = [k for k in named if setting_role(k) == "world"
                       or k.split(".")[0] != namespace]
            if not named or foreign:
                raise ConfigError(where, f"policies.knobs.{policy}.grid: {', '.join(foreign)}",
                                  f"the policy's own settings ({namespace}.*), never the world's")
            grid_points.append(named)
        if len({point_label(p) for p in grid_points}) != points:
            raise ConfigError(where, f"policies.knobs.{policy}.grid", "distinct points")
        knobs[policy] = Knob(
            policy=policy, about=str(about.get("knob", "")), grid=tuple(grid_points),
            columns=columns(about["columns"], f"policies.knobs.{policy}.columns")
            if "columns" in about else default_columns,
        )
    if policies and not knobs:
        raise ConfigError(where, "policies.knobs", "at least one tuned policy (or no "
                          "[tuning.policies] table: the policies run at their papers' values)")
    return Tuning(
        study=name, seeds=tuple(int(s) for s in seeds), scale=str(scale), tie=float(tie),
        recipe_policy=str(recipe["policy"]), recipe_setting=setting,
        recipe_grid=tuple(float(v) for v in grid),
        recipe_columns=columns(recipe.get("columns"), "recipe.columns"), points=points,
        knobs=knobs, untuned={str(k): str(v) for k, v in policies.get("untuned", {}).items()},
    )


def point_label(point: Mapping[str, Any]) -> str:
    """A grid point as text, its settings in name order (``cached.size=10, ...``)."""
    return ", ".join(f"{k}={_value(v)}" for k, v in sorted(point.items()))


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def seed_means(frame: pd.DataFrame, *, by: Sequence[str], seeds: Sequence[int],
               metric: str = "final_acc") -> pd.Series:
    """Mean of ``metric`` over ``seeds`` per group of ``by``.

    NaN for a group that lacks a finite value on any of the seeds (a candidate is compared on every
    seed or not at all: a mean over fewer seeds would favour the candidate whose bad seed failed).
    """
    wanted = set(int(s) for s in seeds)

    def mean(group: pd.DataFrame) -> float:
        values = group.set_index("seed")[metric].astype(float)
        have = {int(s) for s, v in values.items() if math.isfinite(v)}
        return float(values.loc[sorted(wanted)].mean()) if wanted <= have else math.nan

    mine = frame[frame["seed"].astype(int).isin(wanted)]
    if mine.empty:
        return pd.Series(dtype=float)
    return mine.groupby(list(by), sort=False)[["seed", metric]].apply(mean)


def choose(means: Mapping[Hashable, float], *, prefer: Sequence[Hashable],
           tie: float) -> Hashable:
    """The declared rule.

    The candidate with the highest mean; every candidate within ``tie`` of that highest mean is
    tied, and the first of them in ``prefer`` wins.

    Candidates with a non-finite mean (a failed seed) are out; ``prefer`` must name every
    finite one. Raises ``ValueError`` when none is finite.
    """
    finite = {k: float(v) for k, v in means.items() if math.isfinite(float(v))}
    if not finite:
        raise ValueError("no candidate has a finite mean")
    missing = [k for k in finite if k not in prefer]
    if missing:
        raise ValueError(f"prefer does not order {missing[0]!r}")
    best = max(finite.values())
    return next(k for k in prefer if k in finite and finite[k] >= best - tie)


def recipe_choice(frame: pd.DataFrame, *, seeds: Sequence[int], tie: float
                  ) -> tuple[float, pd.Series]:
    """``(chosen value, mean final accuracy per value)``.

    Each value's mean over the tuning seeds in each column, then over the columns (each column
    counts once); ties to the smaller value. ``frame``: ``value``, ``column``, ``seed``,
    ``final_acc`` per run.
    """
    per_column = seed_means(frame, by=["value", "column"], seeds=seeds)
    columns = frame["column"].unique()
    overall = per_column.groupby(level="value").apply(
        lambda s: float(s.mean()) if len(s) == len(columns) and s.notna().all() else math.nan)
    chosen = choose(overall.to_dict(), prefer=sorted(overall.index), tie=tie)
    return float(chosen), overall


def knob_choices(frame: pd.DataFrame, *, grids: Mapping[str, Sequence[str]],
                 paper: Mapping[str, str], seeds: Sequence[int], tie: float) -> pd.DataFrame:
    """The chosen grid point per policy and column.

    ``policy``, ``column``, ``chosen``, ``chosen_mean``, ``paper``, ``paper_mean``. Candidates are
    the grid's points (labels, in grid order) only; ties go to the paper's point when it is one of
    them, then to the earlier point. ``frame``: ``policy``, ``column``, ``label``, ``seed``,
    ``final_acc``.
    """
    means = seed_means(frame, by=["policy", "column", "label"], seeds=seeds)
    rows = []
    for (policy, column), group in means.groupby(level=["policy", "column"], sort=False):
        by_label = {lab: float(v) for (_, _, lab), v in group.items()}
        grid = list(grids[policy])
        prefer = ([paper[policy]] if paper[policy] in grid else []) + [
            g for g in grid if g != paper[policy]]
        candidates = {g: by_label.get(g, math.nan) for g in grid}
        try:
            chosen = choose(candidates, prefer=prefer, tie=tie)
        except ValueError:
            chosen = ""
        rows.append({"policy": policy, "column": column, "chosen": chosen,
                     "chosen_mean": candidates.get(chosen, math.nan), "paper": paper[policy],
                     "paper_mean": by_label.get(paper[policy], math.nan)})
    return pd.DataFrame(rows, columns=["policy", "column", "chosen", "chosen_mean", "paper",
                                       "paper_mean"])


def last_finite(table: pd.DataFrame, column: str) -> float:
    """The last finite value of ``column`` in a run's table (NaN when it has none).

    A metric a policy records only at evaluation steps, e.g. PSFL's ``area_acc_mean``.
    """
    if column not in table:
        return math.nan
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(float)
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else math.nan


def sigma_per_sample(sigma: float, sizes: Sequence[int] | np.ndarray, *, batch: int,
                     batches: float) -> np.ndarray:
    """What PSFL's bound ``sigma`` is in per-sample mean loss, car by car.

    eq. 3's L(D_i, nn_j) at ``psfl.loss = batch_sum`` is about the per-sample mean times
    the number of batch terms (:func:`mobidfl.model.maths.psfl.eq3_loss`): ``ceil(n_i / batch)``
    for ``batches = 0`` (the car's own data), else ``batches``. ``sigma`` divided by that
    count is the per-sample loss it tolerates: the same for every car only when
    ``batches > 0``.
    """
    n = np.asarray(sizes, dtype=float)
    terms = np.ceil(n / float(batch)) if batches == 0 else np.full(n.shape, float(batches))
    return float(sigma) / terms
