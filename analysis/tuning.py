"""Declared recipe and policy tuning of a study (``mobidfl bench --study S --tune ...``).

A study's ``[tuning]`` table (``analysis/scenarios/studies/<name>.toml``) declares, before any
tuning run, on which seeds and columns and by which rule two things are chosen:

* ``--tune recipe``: the one recipe (the learning rate) every world and policy of the study
  uses, chosen on ``central_fedavg`` (the oracle every policy approaches, so no exchange
  policy picks its own recipe): the grid value with the best mean final accuracy over the
  tuning seeds and the declared columns, ties (within ``tie``) to the smaller value;
* ``--tune policies``: each tuned policy's main knob, the same number of grid points for
  every policy (equal budget), chosen per policy and column by the best mean final accuracy
  over the tuning seeds, ties to the paper's value (when it is a grid point) then to the
  earlier grid point; then the chosen value and the paper's value run on the results seeds
  (``--seeds``/``--first-seed``, refused when they overlap the tuning seeds), so that the
  tuned accuracy is not measured on the seeds it was chosen on.

The choice is :func:`choose` (pure, tested on numbers worked by hand); runs go through the
bench's sweep machinery (one resumable folder, one cell per grid point and stage). The page
(:func:`tuning_page`) is generated from the published per-run data only
(``python -m mobidfl.analysis.tuning publish`` / ``--page``), and ``tests/test_published_tuning.py``
fails when it drifts from them.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.errors import ConfigError

__all__ = [
    "Knob",
    "Tuning",
    "choose",
    "knob_choices",
    "last_finite",
    "load_tuning",
    "point_label",
    "recipe_choice",
    "run_tuning",
    "seed_means",
    "sigma_per_sample",
    "tuning_page",
]

PLAN = "tuning.json"
KINDS = ("recipe", "policies")
STAGES = ("recipe", "tune", "result")
"""``recipe``: the lr grid on tuning seeds; ``tune``: a knob's grid (and the paper's value)
on tuning seeds; ``result``: the paper's and the chosen value on the results seeds."""


# --- the declaration ------------------------------------------------------------------------
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


# --- pure maths -----------------------------------------------------------------------------
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


# --- planning and running -------------------------------------------------------------------
@dataclass(frozen=True)
class TuneCell:
    """One grid point (or the paper's value) of one policy on one column, at one stage."""

    stage: str
    variant: str
    policy: str
    label: str
    point: dict[str, Any]
    settings: dict[str, Any]
    paper: bool
    refusal: str = ""

    @property
    def key(self) -> str:
        return f"{self.stage}__{self.variant}__{self.policy}__{self.label.replace(', ', '+')}"


def _cell(stage: str, column: Any, policy: str, point: dict[str, Any], *, paper: bool
          ) -> TuneCell:
    from mobidfl.analysis.bench_scenarios import cell_settings
    from mobidfl.model.config import Config

    settings = {**cell_settings(column, policy), **point}
    refusal = ""
    try:
        Config.from_settings(settings)
    except ConfigError as exc:
        refusal = " ".join(str(exc).split())
    return TuneCell(stage=stage, variant=column.variant, policy=policy,
                    label=point_label(point), point=dict(point), settings=settings,
                    paper=paper, refusal=refusal)


def paper_point(policy: str, knob: Knob) -> dict[str, Any]:
    """The policy's paper values of the knob's settings.

    From ``_policies.toml``, else the policy's defaults.
    """
    from mobidfl.analysis.bench_scenarios import policy_settings
    from mobidfl.plugins import POLICIES

    _, own = policy_settings(policy)
    defaults = POLICIES[policy].settings_class()
    out = {}
    for name in sorted({k for point in knob.grid for k in point}):
        attr = name.split(".", 1)[1]
        out[name] = own.get(name, getattr(defaults, attr))
    return out


def _columns(tuning: Tuning, scale: str) -> dict[str, Any]:
    from mobidfl.analysis.study import load_study

    return {c.variant: c for c in load_study(tuning.study).columns(scale)}


def recipe_cells(tuning: Tuning, scale: str) -> list[TuneCell]:
    """The lr grid of ``central_fedavg`` on the recipe's columns (tuning seeds)."""
    cols = _columns(tuning, scale)
    return [_cell("recipe", cols[v], tuning.recipe_policy, {tuning.recipe_setting: value},
                  paper=value == cols[v].settings[tuning.recipe_setting])
            for v in tuning.recipe_columns for value in tuning.recipe_grid]


def tune_cells(tuning: Tuning, scale: str, policies: Sequence[str]) -> list[TuneCell]:
    """Each tuned policy's grid and paper value on its columns (tuning seeds)."""
    cols = _columns(tuning, scale)
    out = []
    for policy in policies:
        knob = tuning.knobs[policy]
        paper = paper_point(policy, knob)
        points = list(knob.grid) + ([] if paper in knob.grid else [paper])
        out += [_cell("tune", cols[v], policy, p, paper=p == paper)
                for v in knob.columns for p in points]
    return out


def result_cells(tuning: Tuning, scale: str, choices: pd.DataFrame) -> list[TuneCell]:
    """The paper's and the chosen value of every (policy, column) on the results seeds."""
    cols = _columns(tuning, scale)
    out = []
    for row in choices.to_dict("records"):
        knob = tuning.knobs[row["policy"]]
        paper = paper_point(row["policy"], knob)
        out.append(_cell("result", cols[row["column"]], row["policy"], paper, paper=True))
        chosen = next((p for p in knob.grid if point_label(p) == row["chosen"]), None)
        if chosen is not None and chosen != paper:
            out.append(_cell("result", cols[row["column"]], row["policy"], chosen,
                             paper=False))
    return out


def _check_folder(out: Path, *, kind: str, study: str, scale: str) -> dict[str, Any]:
    """``out`` is new or empty, or this same tuning's folder; returns its plan (or {})."""
    from mobidfl.analysis.runner import folder_entries

    entries = folder_entries(out)
    if not entries:
        return {}
    if PLAN not in entries:
        raise ConfigError("--out", str(out), f"an empty or new folder, or a tuning folder with "
                          f"{PLAN} (this one holds {', '.join(entries[:3])})")
    try:
        plan = json.loads((out / PLAN).read_text())
    except (OSError, ValueError):
        raise ConfigError("--out", str(out), f"a whole {PLAN} (it is damaged: give another "
                          "--out)") from None
    if (plan.get("kind"), plan.get("study"), plan.get("scale")) != (kind, study, scale):
        raise ConfigError("--out", str(out), f"the folder of this same tuning (it holds --tune "
                          f"{plan.get('kind')} of {plan.get('study')} at {plan.get('scale')})")
    return plan


def _cpu_s() -> float:
    """CPU seconds of this process and its waited-for children.

    With ``--processes 0`` the runs are here; with worker processes each run's own CPU is in
    ``cpu_s_runs``.
    """
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed_run(spec: Any) -> tuple[Any, float]:
    """One run and the CPU seconds its process spent on it (all its threads)."""
    from mobidfl.analysis.executors import execute_run

    started = time.process_time()
    result = execute_run(spec)
    return result, time.process_time() - started


def _execute_cells(out: Path, cells: Sequence[TuneCell], seeds: Sequence[int], *,
                   processes: int | None, progress: bool, cpu: dict[str, float],
                   before: Any = None) -> dict[str, list[Any]]:
    """Run every cell's runs not finished yet; returns the plan.

    The bench's cells and manifests; each run's CPU seconds go into ``cpu`` (run id -> s);
    ``before(plan)`` is called before the first run (to write the folder's plan).
    """
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    from mobidfl.analysis.executors import worker_context
    from mobidfl.analysis.runner import open_cells, plan_runs

    plan = plan_runs(cells, seeds, extra={})
    if before is not None:  # the folder says whose cells these are before any run
        before(plan)
    manifests, owner, todo = open_cells(out, cells, plan, backend="local", retry_errors=False)
    with tqdm(total=len(todo), desc="tuning runs", unit="run", disable=not progress) as bar:
        def record(result: Any, seconds: float) -> None:
            manifests[owner[result.run_id]].record(result)
            cpu[result.run_id] = round(seconds, 2)
            bar.update(1)

        if not processes:
            for spec in todo:
                record(*_timed_run(spec))
        elif todo:
            with ProcessPoolExecutor(max_workers=min(processes, len(todo)),
                                     mp_context=worker_context()) as pool:
                for done in as_completed([pool.submit(_timed_run, s) for s in todo]):
                    record(*done.result())
    return plan


def _cell_record(cell: TuneCell, seeds: Sequence[int], plan: dict[str, list[Any]]
                 ) -> dict[str, Any]:
    from mobidfl.analysis.runner import CELLS, agent_count, safe_name

    return {"key": cell.key, "stage": cell.stage, "variant": cell.variant,
            "policy": cell.policy, "label": cell.label, "point": cell.point,
            "paper": cell.paper, "refusal": cell.refusal, "seeds": list(seeds),
            "folder": f"{CELLS}/{safe_name(cell.key)}", "agents": agent_count(cell.settings),
            "runs": [s.run_id for s in plan.get(cell.key, [])]}


def load_tuning_runs(out: Path) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """``(plan, runs, curves)`` of a tuning folder.

    One row per planned run (final numbers, PSFL's own-area accuracy and federations where the run
    recorded them).
    """
    from mobidfl.analysis.bench_results import planned_records
    from mobidfl.analysis.bench_stats import run_numbers

    plan = json.loads((out / PLAN).read_text())
    rows, curves = [], []
    for cell, record, path in planned_records(out, plan):
        base = {"run_id": record["run_id"], "kind": plan["kind"], "stage": cell["stage"],
                "variant": cell["variant"], "policy": cell["policy"],
                "label": cell["label"], "paper": bool(cell["paper"]),
                "seed": int(record["seed"]), "status": record["status"],
                "error": record.get("error", ""), "wall_s": float(record["wall_s"] or "nan")
                if str(record.get("wall_s", "")) else math.nan}
        if path is None:
            rows.append(base)
            continue
        table = pd.read_parquet(path)
        rows.append({**base, **run_numbers(table, agents=cell["agents"]),
                     "area_acc": last_finite(table, "area_acc_mean"),
                     "federations": last_finite(table, "federations"),
                     "cache_models": last_finite(table, "cache_size_mean"),
                     "cache_age": last_finite(table, "cache_age_mean")})
        evaluated = table[np.isfinite(pd.to_numeric(table["acc_mean"], errors="coerce"))]
        curves.append(pd.DataFrame({
            "run_id": record["run_id"], "time_s": evaluated["time_s"].to_numpy(float),
            "acc_mean": evaluated["acc_mean"].to_numpy(float)}))
    runs = pd.DataFrame(rows)
    curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
        columns=["run_id", "time_s", "acc_mean"])
    return plan, runs, curve


def _data_sizes(tuning: Tuning, scale: str, variants: Sequence[str], seeds: Sequence[int]
                ) -> dict[str, dict[str, list[int]]]:
    """Each car's number of training samples, per column and seed.

    The data split alone (learners built, never stepped), for the page's reading of PSFL's sigma.
    """
    import warnings

    from mobidfl.model.config import InertSettingWarning
    from mobidfl.model.world import MobiDFLModel

    cols = _columns(tuning, scale)
    out: dict[str, dict[str, list[int]]] = {}
    for variant in variants:
        out[variant] = {}
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InertSettingWarning)
                built = MobiDFLModel(**{**cols[variant].settings, "seed": int(seed),
                                        "steps": 1})
            out[variant][str(seed)] = [int(n) for n in built.learner.engine.data_sizes]
    return out


def run_tuning(*, study: str, kind: str, out: str | Path, scale: str,
               results_seeds: Sequence[int], policies: Sequence[str] | None = None,
               processes: int | None = 0, progress: bool = True, command: str = "",
               say: Any = None) -> Path:
    """Run ``--tune recipe`` or ``--tune policies`` of ``study`` into ``out`` (resumable).

    Then write its ``tuning.json`` and ``tuning.md``; returns the Markdown table's path.
    """
    from mobidfl.analysis.folders import check_output_folder
    from mobidfl.atomic import write_text_atomic
    from mobidfl.cores import machine_record, package_versions, source_commit

    if kind not in KINDS:
        raise ConfigError("--tune", kind, "one of " + ", ".join(KINDS))
    tuning = load_tuning(study)
    if scale not in (tuning.scale, "ci"):
        raise ConfigError("--scale", scale, f"{tuning.scale} (the declared tuning scale) or ci "
                          "(a test of the command)")
    overlap = sorted(set(results_seeds) & set(tuning.seeds))
    if kind == "policies" and overlap:
        raise ConfigError("--first-seed", overlap[0], "results seeds disjoint from the tuning "
                          f"seeds {list(tuning.seeds)}")
    chosen = list(tuning.knobs) if policies is None else list(policies)
    unknown = [p for p in chosen if p not in tuning.knobs]
    if kind == "policies" and not tuning.knobs:
        raise ConfigError("--tune", kind, f"recipe (study {study} declares no "
                          "[tuning.policies]: its policies run at their papers' values)")
    if kind == "policies" and (not chosen or unknown):
        raise ConfigError("--policies", ",".join(unknown or chosen), "tuned policies of the "
                          "study: " + ", ".join(tuning.knobs))
    out = Path(out)
    check_output_folder(out)
    previous = _check_folder(out, kind=kind, study=study, scale=scale)
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    clock, cpu = time.perf_counter(), _cpu_s()
    records: list[dict[str, Any]] = []
    cpu_runs: dict[str, float] = dict(previous.get("cpu_s_runs", {}))
    def stage(cells: list[TuneCell], seeds: Sequence[int]) -> None:
        done = list(records)

        def write_plan(plan: dict[str, list[Any]]) -> None:
            records[:] = done + [_cell_record(c, seeds, plan) for c in cells]
            _write(out, tuning, kind, scale, records, previous, results_seeds, command, None,
                   cpu_runs=cpu_runs)

        _execute_cells(out, cells, seeds, processes=processes, progress=progress,
                       cpu=cpu_runs, before=write_plan)

    if kind == "recipe":
        stage(recipe_cells(tuning, scale), tuning.seeds)
        sizes: dict[str, Any] = {}
    else:
        stage(tune_cells(tuning, scale, chosen), tuning.seeds)
        _write(out, tuning, kind, scale, records, previous, results_seeds, command, None,
               cpu_runs=cpu_runs)
        _, runs, _ = load_tuning_runs(out)
        stage(result_cells(tuning, scale, _policy_choices(tuning, runs)), results_seeds)
        psfl = [v for p, k in tuning.knobs.items() if p == "psfl" and p in chosen
                for v in k.columns]
        sizes = _data_sizes(tuning, scale, psfl, list(results_seeds)[:1]) if psfl else {}
    session = {"command": command, "started": started.isoformat(timespec="seconds"),
               "finished": datetime.now(UTC).isoformat(timespec="seconds"),
               "wall_s": round(time.perf_counter() - clock, 1),
               "cpu_s": round(_cpu_s() - cpu, 1), "processes": processes,
               "machine": machine_record(), "versions": package_versions(),
               "commit": source_commit()}
    _write(out, tuning, kind, scale, records, previous, results_seeds, command, session,
           data_sizes=sizes, cpu_runs=cpu_runs)
    _, runs, _ = load_tuning_runs(out)
    page = out / "tuning.md"
    write_text_atomic(page, _folder_summary(kind, tuning, runs) + "\n")
    return page


def _write(out: Path, tuning: Tuning, kind: str, scale: str, records: list[dict[str, Any]],
           previous: dict[str, Any], results_seeds: Sequence[int], command: str,
           session: dict[str, Any] | None, *, data_sizes: dict[str, Any] | None = None,
           cpu_runs: dict[str, float] | None = None) -> None:
    from mobidfl.atomic import write_text_atomic

    sessions = list(previous.get("sessions", []))
    if session is not None:
        sessions.append(session)
    data = {"kind": kind, "study": tuning.study, "scale": scale, "command": command,
            "tuning_seeds": list(tuning.seeds), "results_seeds": list(results_seeds),
            "declaration": tuning.declaration(), "cells": records,
            "data_sizes": data_sizes or previous.get("data_sizes", {}),
            "cpu_s_runs": cpu_runs if cpu_runs is not None else previous.get("cpu_s_runs", {}),
            "sessions": sessions}
    write_text_atomic(out / PLAN, json.dumps(data, indent=1, default=str) + "\n")


def _policy_choices(tuning: Tuning, runs: pd.DataFrame) -> pd.DataFrame:
    tune = runs[(runs["stage"] == "tune") & (runs["status"] == "ok")]
    tune = tune.assign(column=tune["variant"])
    grids = {p: [point_label(g) for g in k.grid] for p, k in tuning.knobs.items()}
    paper = {p: point_label(paper_point(p, k)) for p, k in tuning.knobs.items()}
    return knob_choices(tune, grids=grids, paper=paper, seeds=tuning.seeds, tie=tuning.tie)


def _folder_summary(kind: str, tuning: Tuning, runs: pd.DataFrame) -> str:
    """A short Markdown summary beside the runs (the published page is :func:`tuning_page`)."""
    ok = runs[runs["status"] == "ok"] if not runs.empty else runs
    if kind == "recipe":
        frame = ok.assign(value=ok["label"].str.split("=").str[1].astype(float),
                          column=ok["variant"])
        value, overall = recipe_choice(frame, seeds=tuning.seeds, tie=tuning.tie)
        lines = [f"# Recipe tuning of {tuning.study}", "", "| lr | mean final accuracy |",
                 "|---|---|"]
        lines += [f"| {v:g} | {m:.4f} |" for v, m in overall.items()]
        return "\n".join([*lines, "", f"Chosen: lr = {value:g}"])
    choices = _policy_choices(tuning, runs)
    lines = [f"# Policy tuning of {tuning.study}", "", "| policy | column | paper | chosen |",
             "|---|---|---|---|"]
    lines += [f"| {r['policy']} | {r['column']} | {r['paper']} | {r['chosen']} |"
              for r in choices.to_dict("records")]
    return "\n".join(lines)


# --- published data and the page ------------------------------------------------------------
RUNS = "runs.parquet"
CURVES = "curves.parquet"
MANIFEST = "manifest.json"


def publish_tuning(folders: Sequence[str | Path], dest: str | Path) -> list[Path]:
    """Write the runs of tuning folders (``--tune recipe`` and ``--tune policies``) to ``dest``.

    ``runs.parquet``, ``curves.parquet`` and ``manifest.json`` (each folder's plan: declaration,
    cells, data sizes, sessions).
    """
    from mobidfl.atomic import write_parquet, write_text_atomic

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    plans, runs, curves = {}, [], []
    for folder in folders:
        plan, r, c = load_tuning_runs(Path(folder))
        plans[plan["kind"]] = plan
        runs.append(r)
        curves.append(c)
    written = [write_parquet(pd.concat(runs, ignore_index=True), dest / RUNS, index=False),
               write_parquet(pd.concat(curves, ignore_index=True), dest / CURVES,
                             index=False)]
    write_text_atomic(dest / MANIFEST, json.dumps(plans, indent=1, default=str) + "\n")
    return [*written, dest / MANIFEST]


def _mean_ci(values: pd.Series) -> str:
    from mobidfl.analysis.bench_stats import t_interval

    return t_interval(values.to_numpy(float)).text(3)


def _range(values: Sequence[int]) -> str:
    values = sorted(values)
    return f"{values[0]}-{values[-1]}" if len(values) > 1 else str(values[0])


def _study_means(study_dest: Path, seeds: Sequence[int]) -> pd.DataFrame:
    """Mean final accuracy per (variant, policy) of the published study on ``seeds``."""
    plan = json.loads((study_dest / "manifest.json").read_text())
    variant = {c["key"]: c["variant"] for c in plan["columns"]}
    runs = pd.read_parquet(study_dest / "runs.parquet")
    runs = runs[(runs["status"] == "ok") & runs["seed"].isin(list(seeds))]
    runs = runs.assign(variant=runs["column"].map(variant))
    return runs.groupby(["variant", "policy"])["final_acc"].mean().rename("final_acc")


def winner(means: Mapping[str, float], *, reference: str = "central_fedavg") -> str:
    """The policy with the highest mean final accuracy, the oracle reference left out.

    As the bench's winner; ties by name.
    """
    finite = {p: float(v) for p, v in means.items() if p != reference and math.isfinite(v)}
    return min(finite, key=lambda p: (-finite[p], p)) if finite else ""


def tuning_page(dest: str | Path, *, study_dest: str | Path) -> str:
    """The tuning page, every number computed from the published tuning data ``dest``.

    And, for the ranking at the papers' values, from the published study ``study_dest``.
    """
    from mobidfl.analysis.bench_stats import holm, paired_difference

    dest, study_dest = Path(dest), Path(study_dest)
    plans = json.loads((dest / MANIFEST).read_text())
    runs = pd.read_parquet(dest / RUNS)
    ok = runs[runs["status"] == "ok"]
    sessions = [s for p in plans.values() for s in p.get("sessions", [])]
    machines = sorted({s["machine"].get("cpu", "") for s in sessions})
    commits = sorted({s.get("commit", "")[:7] for s in sessions if s.get("commit")})
    cpu_min = {k: sum(float(s.get("cpu_s", 0.0)) for s in p.get("sessions", [])) / 60
               for k, p in plans.items()}
    for kind, plan in plans.items():  # worker processes: each run's own CPU
        runs_cpu = sum(float(v) for v in plan.get("cpu_s_runs", {}).values()) / 60
        cpu_min[kind] = max(cpu_min[kind], runs_cpu)
    wall_min = {k: sum(float(s.get("wall_s", 0.0)) for s in p.get("sessions", [])) / 60
                for k, p in plans.items()}
    loads = [s["machine"].get("load_at_write", [None])[0] for s in sessions]
    loads = [x for x in loads if isinstance(x, int | float)]
    shown = _shown(dest)
    lines = [
        f"# Tuning: the {next(iter(plans.values()))['study']} study's recipe and its "
        "policies' knobs", "",
        "<!-- generated by `python -m mobidfl.analysis.tuning --page "
        f"{shown} {_shown(study_dest)} <this page>` from the published per-run data; "
        "tests/test_published_tuning.py fails when this page and the data disagree -->", "",
        f"Data: `{shown}/` ({len(ok)} finished runs of {len(runs)}; scale "
        f"`{next(iter(plans.values()))['scale']}`; commit(s) "
        f"{', '.join(f'`{c}`' for c in commits) or 'unknown'}; machine(s) "
        f"{', '.join(machines) or 'unknown'}; CPU time "
        + ", ".join(f"{k} {v:.1f} min" for k, v in cpu_min.items()) + ", wall time "
        + ", ".join(f"{k} {v:.1f} min" for k, v in wall_min.items())
        + (f", at a load of {min(loads):.1f}-{max(loads):.1f} on "
           f"{sessions[0]['machine'].get('cores', '?')} cores" if loads else "") + "). "
        "The protocol, declared before these runs: "
        "[Recipe and tuning protocol](controlled.md#recipe-and-tuning-protocol).", "",
    ]
    if "recipe" in plans:
        lines += _recipe_section(plans["recipe"], ok[ok["kind"] == "recipe"],
                                 study_value=study_setting(
                                     study_dest, plans["recipe"]["declaration"]["recipe"]
                                     ["setting"]))
    if "policies" in plans:
        plan = plans["policies"]
        mine = ok[ok["kind"] == "policies"]
        lines += _policies_section(plan, mine, study_dest, holm, paired_difference)
    return "\n".join(lines) + "\n"


def _shown(path: Path) -> str:
    path = path.resolve()
    try:
        return path.relative_to(Path(__file__).resolve().parents[1]).as_posix()
    except ValueError:
        return path.as_posix()


def same_worlds(study_dest: Path, run_ids: pd.Series) -> Path:
    """The published version of the study that holds most of ``run_ids``.

    ``study_dest`` or an earlier version under ``study_dest/v*/``; each run id is a hash of
    a run's settings and seed. A ranking that mixes tuning runs with study runs compares
    like with like only on the worlds, recipe included, that both ran. ``study_dest`` when
    none holds any.
    """
    best, most = study_dest, -1
    for folder in [study_dest, *sorted(study_dest.glob("v[0-9]*"))]:
        if not (folder / "runs.parquet").is_file():
            continue
        held = int(run_ids.isin(pd.read_parquet(folder / "runs.parquet", columns=["run_id"])
                                ["run_id"]).sum())
        if held > most:
            best, most = folder, held
    return best


def study_setting(study_dest: Path, setting: str) -> float:
    """The published study's value of a recipe ``setting`` (its base column's world).

    NaN where the study records none. The recipe verdict compares the protocol's choice
    with the study as published, not as it was when the tuning ran.
    """
    plan = json.loads((study_dest / "manifest.json").read_text())
    for column in plan.get("columns", []):
        if column.get("variant") == "base" and setting in column.get("world", {}):
            return float(column["world"][setting])
    return math.nan


def _recipe_section(plan: dict[str, Any], runs: pd.DataFrame, *,
                    study_value: float) -> list[str]:
    decl = plan["declaration"]
    seeds = plan["tuning_seeds"]
    setting = decl["recipe"]["setting"]
    frame = runs.assign(value=runs["label"].str.split("=").str[1].astype(float),
                        column=runs["variant"])
    value, overall = recipe_choice(frame, seeds=seeds, tie=decl["tie"])
    per_column = seed_means(frame, by=["value", "column"], seeds=seeds)
    columns = decl["recipe"]["columns"]
    tuned_at = float(runs.loc[runs["paper"], "label"].str.split("=").str[1].astype(float)
                     .iloc[0]) if runs["paper"].any() else math.nan
    if not math.isfinite(study_value):
        study_value = tuned_at
    grid = decl["recipe"]["grid"]
    lines = [
        "## The recipe", "",
        f"`{decl['recipe']['policy']}`, {setting} grid {', '.join(f'{v:g}' for v in grid)}, "
        f"seeds {', '.join(map(str, seeds))}; mean final accuracy per column (mean over the "
        "seeds) and over the columns; ties within "
        f"{decl['tie']:g} go to the smaller {setting}.", "",
        f"| {setting} | " + " | ".join(columns) + " | mean |",
        "|---|" + "---|" * (len(columns) + 1),
    ]
    for v in overall.index:
        cells = [_num(per_column.get((v, c), math.nan), 3) for c in columns]
        mark = " (chosen)" if v == value else ""
        lines.append(f"| {v:g}{mark} | " + " | ".join(cells) + f" | {_num(overall[v], 4)} |")
    lines.append("")
    edge = value in (min(grid), max(grid))
    if value == study_value == tuned_at:
        lines.append(f"**The protocol chooses {setting} = {value:g}, the study's recipe**: "
                     "the published study stands as run.")
    elif value == study_value:
        lines.append(
            f"**The published study runs the protocol's choice, {setting} = {value:g}** "
            f"(the study's recipe when these runs were made was {setting} = {tuned_at:g}, "
            f"{_num((overall[value] - overall.get(tuned_at, math.nan)) * 100, 1)} points "
            "lower on the tuning seeds; the study was re-run at the protocol's choice as its "
            "next version, as the protocol says). The policies' knobs below were tuned at "
            f"{setting} = {tuned_at:g}.")
    else:
        lines.append(
            f"**The study's recipe departs from the protocol's choice.** The protocol chooses "
            f"{setting} = {value:g} (mean final accuracy {_num(overall[value], 4)} over the "
            f"columns and tuning seeds); the study runs {setting} = {study_value:g} "
            f"({_num(overall.get(study_value, math.nan), 4)}), "
            f"{_num((overall[value] - overall.get(study_value, math.nan)) * 100, 1)} points "
            "lower. The published study was not re-run: its tables are at "
            f"{setting} = {study_value:g}, chosen before this protocol existed.")
    if edge:
        lines.append("The choice is at the edge of the declared grid: a larger grid was not "
                     "run (it would be a second, declared protocol).")
    return lines + [""]


def _num(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(float(value)) else \
        f"{float(value):.{digits}f}"


def _policies_section(plan: dict[str, Any], runs: pd.DataFrame, study_dest: Path,
                      holm: Any, paired_difference: Any) -> list[str]:
    decl = plan["declaration"]
    tseeds, rseeds = plan["tuning_seeds"], plan["results_seeds"]
    tune = runs[runs["stage"] == "tune"].assign(column=lambda f: f["variant"])
    grids = {p: [point_label(g) for g in k["grid"]] for p, k in decl["knobs"].items()}
    paper = {}
    for cell in plan["cells"]:
        if cell["paper"]:
            paper[cell["policy"]] = cell["label"]
    tuned = [p for p in decl["knobs"] if p in set(tune["policy"])]
    choices = knob_choices(tune[tune["policy"].isin(tuned)],
                           grids={p: grids[p] for p in tuned},
                           paper={p: paper[p] for p in tuned}, seeds=tseeds, tie=decl["tie"])
    lines = [
        "## Policies: their papers' values, and an equal-budget tuning of each one's knob", "",
        f"Every tuned policy gets {decl['points']} grid points, run on the tuning seeds "
        f"{', '.join(map(str, tseeds))}; per policy and column the point with the best mean "
        f"final accuracy is chosen (ties within {decl['tie']:g}: the paper's value when it "
        "is a grid point, then the earlier point), then the chosen and the paper's value run "
        f"on the results seeds {_range(rseeds)}, which chose nothing.", "",
        "| policy | knob | grid | columns |", "|---|---|---|---|",
    ]
    for policy, knob in decl["knobs"].items():
        lines.append(f"| {policy} | {knob['about']} | "
                     + "; ".join(point_label(g) for g in knob["grid"])
                     + f" | {', '.join(knob['columns'])} |")
    lines += ["", "Not tuned: " + "; ".join(f"{p} ({why})" for p, why in
                                             decl["untuned"].items()) + ".", ""]
    # table 1: the grid on the tuning seeds
    means = seed_means(tune, by=["policy", "column", "label"], seeds=tseeds)
    area = seed_means(tune, by=["policy", "column", "label"], seeds=tseeds, metric="area_acc")
    state = {m: seed_means(tune, by=["policy", "column", "label"], seeds=tseeds, metric=m)
             for m in ("federations", "cache_models", "cache_age")}
    lines += ["### The grid on the tuning seeds", "",
              "Mean final accuracy over the tuning seeds; PSFL's own-area accuracy (each car's "
              "model on the test images of its own labels) beside it; and what the knob acts "
              "on at the end of the run, mean over the seeds: PSFL's federations, the "
              "Cached-DFL caches' models per car and their mean age in steps (a cache that "
              "holds fewer models than C_max, or models younger than τ_max, is not bounded "
              "by that knob). ★ = chosen; (paper) = the value the study ran: its paper's "
              "(MoFeL's Δ: the bench's own, the paper gives none).", "",
              "| policy | column | value | final acc | own-area acc | at the end |",
              "|---|---|---|---|---|---|"]
    chosen_of = {(r["policy"], r["column"]): r["chosen"] for r in choices.to_dict("records")}
    for (policy, column, label), value in means.items():
        marks = (" ★" if chosen_of.get((policy, column)) == label else "") + (
            " (paper)" if paper.get(policy) == label else "")
        key = (policy, column, label)
        lines.append(f"| {policy} | {column} | {label}{marks} | {_num(value)} | "
                     f"{_num(area.get(key, math.nan))} | {_state(state, key)} |")
    # table 2: papers' values vs tuned on the results seeds
    result = runs[runs["stage"] == "result"]
    rows = []
    for r in choices.to_dict("records"):
        mine = result[(result["policy"] == r["policy"]) & (result["variant"] == r["column"])]
        at_paper = mine[mine["label"] == r["paper"]].set_index("seed")
        at_tuned = mine[mine["label"] == r["chosen"]].set_index("seed")
        test = paired_difference(at_tuned["final_acc"], at_paper["final_acc"])
        rows.append({**r, "paper_acc": at_paper["final_acc"], "tuned_acc": at_tuned["final_acc"],
                     "paper_area": at_paper["area_acc"], "tuned_area": at_tuned["area_acc"],
                     "test": test})
    adjusted, _ = holm([row["test"].p for row in rows]) if rows else ([], [])
    lines += ["", "### Papers' values and tuned values on the results seeds", "",
              f"Mean final accuracy ± 95 % half-width over seeds {_range(rseeds)}. tuned − "
              "paper: the paired difference seed by seed (points), its p Holm-adjusted over "
              "the rows of this table (a sign-flip p where the difference has no spread).",
              "", "| column | policy | paper's value | final acc | own-area acc | tuned value "
              "| final acc | own-area acc | tuned − paper (pp) | p (Holm) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for row, p in zip(rows, adjusted, strict=True):
        same = row["chosen"] == row["paper"]
        test = row["test"]
        lines.append(
            f"| {row['column']} | {row['policy']} | {row['paper']} | "
            f"{_mean_ci(row['paper_acc'])} | {_num(row['paper_area'].mean())} | "
            f"{'= paper' if same else row['chosen']} | "
            f"{'' if same else _mean_ci(row['tuned_acc'])} | "
            f"{'' if same else _num(row['tuned_area'].mean())} | "
            f"{'0' if same else _diff(test)} | {'' if same else _num(p)} |")
    # the ranking: papers' values (published study) vs tuned values substituted, against
    # the published version of the study that ran these worlds (its run ids)
    study_dest = same_worlds(study_dest, result.loc[result["paper"], "run_id"])
    shown_study = _shown(study_dest)
    study_plan = json.loads((study_dest / "manifest.json").read_text())
    if study_plan.get("scale") != plan["scale"]:  # another scale's runs: no ranking
        return lines + _sigma_section(plan, decl) + [""]
    study = _study_means(study_dest, rseeds)
    published = pd.read_parquet(study_dest / "runs.parquet").set_index("run_id")["final_acc"]
    again = result[result["paper"] & result["run_id"].isin(published.index)]
    if result["paper"].any() and again.empty:  # the study's worlds changed since (its recipe)
        return lines + [
            "", "None of the paper-value runs above is in the published study (no run id in "
            "common: its worlds have changed since these runs, e.g. its recipe). The ranking "
            "against the published study is left out, as it would compare two recipes; "
            "re-tuning at the published study's recipe (`mobidfl bench --study "
            f"{plan['study']} --tune policies`) gives it back."] + _sigma_section(plan, decl) + [
            ""]
    gap = (again["final_acc"].to_numpy(float)
           - published.loc[again["run_id"]].to_numpy(float)) if len(again) else np.empty(0)
    lines += ["", f"The paper-value runs above have the study's run ids (same settings and "
              f"seed): {len(again)} of {int(result['paper'].sum())} are in the published "
              f"study (`{shown_study}/`), {int((np.abs(gap) <= 1e-9).sum())} of them with the "
              "same final "
              "accuracy to 1e-9"
              + (f" (largest difference {np.abs(gap).max() * 100:.2f} points)"
                 if gap.size and np.abs(gap).max() > 1e-9 else "") + "."]
    lines += ["", "### Does tuning change a column's winner?", "",
              f"Mean final accuracy over seeds {_range(rseeds)} (central FedAvg left out): "
              "every policy at its paper's value (the published study's runs), then with each "
              "tuned policy at its chosen value (these runs) and the others as published. "
              "Means only: the study page says which differences its seeds resolve.", "",
              "| column | winner at papers' values | its acc | winner with tuned values "
              "| its acc |", "|---|---|---|---|---|"]
    for column in dict.fromkeys(choices["column"]):
        if column not in study.index.get_level_values("variant"):
            continue
        base = study.loc[column].to_dict()
        swapped = dict(base)
        for row in rows:
            if row["column"] == column and len(row["tuned_acc"]):
                swapped[row["policy"]] = float(row["tuned_acc"].mean())
        first, second = winner(base), winner(swapped)
        lines.append(f"| {column} | {first} | {_num(base.get(first, math.nan))} | {second} | "
                     f"{_num(swapped.get(second, math.nan))} |")
    lines += _sigma_section(plan, decl)
    return lines + [""]


def _state(state: dict[str, pd.Series], key: tuple[str, str, str]) -> str:
    """What the knob acts on at the end of a run (empty for a policy that records none)."""
    got = {m: float(v.get(key, math.nan)) for m, v in state.items()}
    parts = []
    if math.isfinite(got["federations"]):
        parts.append(f"{got['federations']:.1f} federations")
    if math.isfinite(got["cache_models"]):
        parts.append(f"{got['cache_models']:.1f} cached models, age "
                     f"{_num(got['cache_age'], 2)}")
    return "; ".join(parts)


def _diff(test: Any) -> str:
    if not math.isfinite(test.mean):
        return "n/a"
    half = f" ± {test.half * 100:.1f}" if math.isfinite(test.half) else ""
    return f"{test.mean * 100:+.1f}{half}"


def _sigma_section(plan: dict[str, Any], decl: dict[str, Any]) -> list[str]:
    """What PSFL's sigma means per sample, car by car, at two readings.

    The paper's reading and the scale-keeping one (:func:`sigma_per_sample`), from the cars'
    recorded data sizes.
    """
    sizes = plan.get("data_sizes", {})
    knob = decl["knobs"].get("psfl")
    if not sizes or knob is None:
        return []
    kept = float(knob["grid"][0].get("psfl.loss_batches", 0.0))
    lines = ["", "### PSFL's σ across data sizes", "",
             "eq. 3's loss at `psfl.loss = batch_sum` is about the per-sample mean loss times "
             "the number of batches of 64 summed: the car's own (`loss_batches = 0`, the "
             f"paper-value row) or a fixed {kept:g} (`loss_batches = {kept:g}`, the authors' "
             "4-5 batches per node, the tuned grid). σ = 40 in per-sample loss, car by car "
             "(the results' first seed):", "",
             "| column | samples per car (min / median / max) | batches (min-max) "
             f"| σ = 40 per sample, own batches | σ = 40 per sample, {kept:g} batches |",
             "|---|---|---|---|---|"]
    for variant, by_seed in sizes.items():
        n = np.asarray(next(iter(by_seed.values())), dtype=float)
        own = sigma_per_sample(40.0, n, batch=64, batches=0.0)
        fixed = sigma_per_sample(40.0, n, batch=64, batches=kept)
        terms = np.ceil(n / 64)
        lines.append(f"| {variant} | {n.min():.0f} / {np.median(n):.1f} / {n.max():.0f} | "
                     f"{terms.min():.0f}-{terms.max():.0f} | {own.min():.1f}-{own.max():.1f} "
                     f"| {fixed.min():.1f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    import sys

    from mobidfl.atomic import write_text_atomic

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 4 and args[0] == "--page":
        page = Path(args[3])
        write_text_atomic(page, tuning_page(args[1], study_dest=args[2]))
        print(page)
        return 0
    if len(args) >= 3 and args[0] == "publish":
        for path in publish_tuning(args[2:], args[1]):
            print(path)
        return 0
    print("usage: python -m mobidfl.analysis.tuning publish DEST FOLDER... | --page DEST "
          "STUDY_DEST PAGE", file=sys.stderr)
    return 2



def cmd_tune(args: argparse.Namespace) -> int:
    """``mobidfl bench --study S --tune recipe|policies``.

    The study's declared tuning (here, not in :mod:`mobidfl.analysis.bench_cli`, which this module
    builds on: no import cycle).
    """
    import sys

    from mobidfl.analysis.bench_cli import (
        bench_command,
        check_option_pairs,
        cmd_bench,
        comma_list,
    )
    from mobidfl.analysis.bench_run import check_flags

    check_option_pairs(args)  # an option given where it does nothing: one line, exit 2
    if args.tune is None or args.describe is not None:
        return cmd_bench(args)
    if args.rule is not None:
        raise ConfigError("--rule", args.rule, "only with --describe")
    if args.out is None:
        raise ConfigError("--out", None, "an output folder (required unless --describe)")
    out = Path(args.out)
    command = bench_command(args)

    if args.study is None:
        raise ConfigError("--tune", args.tune, "with --study (the tuning is a study's)")
    for flag, value in (("--scenarios", args.scenarios), ("--links", args.links),
                        ("--backend", None if args.backend == "local" else args.backend),
                        ("--batch-runs", args.batch_runs or None), ("--device", args.device)):
        if value is not None:
            raise ConfigError(flag, value, "not with --tune (it runs on this machine's "
                              "processes)")
    if args.processes is not None and args.processes < 0:
        raise ConfigError("--processes", args.processes, "an integer >= 0 (0 = this process)")
    check_flags(backend="local", batch_runs=False, seeds=args.seeds,
                first_seed=args.first_seed, processes=args.processes, cpus_per_run=1.0,
                gpus_per_run=0.0, device=None)
    import torch

    torch.set_num_threads(1)
    policies = None if args.policies == "all" else comma_list(args.policies)
    try:
        page = run_tuning(study=args.study, kind=args.tune, out=out, scale=args.scale,
                          results_seeds=range(args.first_seed, args.first_seed + args.seeds),
                          policies=policies,
                          processes=0 if args.processes is None else args.processes,
                          progress=not args.quiet, command=command)
    except KeyboardInterrupt:
        print(f"mobidfl: interrupted: the finished runs are saved in {out}; resume with: "
              f"{command}", file=sys.stderr)
        return 130
    print(page.read_text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
