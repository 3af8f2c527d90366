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
(``python -m mobidfl.analysis.tuning publish`` / ``--page``), and
``tests/published/test_published_tuning.py`` fails when it drifts from them.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.tuning_design import (
    KINDS,
    PLAN,
    STAGES,
    Knob,
    Tuning,
    choose,
    knob_choices,
    last_finite,
    load_tuning,
    point_label,
    recipe_choice,
    seed_means,
    sigma_per_sample,
)
from mobidfl.analysis.tuning_page import (
    CURVES,
    MANIFEST,
    RUNS,
    same_worlds,
    study_setting,
    tuning_page,
    winner,
)
from mobidfl.errors import ConfigError

__all__ = [
    "CURVES",
    "KINDS",
    "MANIFEST",
    "PLAN",
    "RUNS",
    "STAGES",
    "Knob",
    "Tuning",
    "choose",
    "knob_choices",
    "last_finite",
    "load_tuning",
    "point_label",
    "publish_tuning",
    "recipe_choice",
    "run_tuning",
    "same_worlds",
    "seed_means",
    "sigma_per_sample",
    "study_setting",
    "tuning_page",
    "winner",
]


# --- planning and running -------------------------------------------------------------------
# A plain record of one run's inputs, like executors.RunSpec: fields, not logic.
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
        check_option_pairs,
        cmd_bench,
        comma_list,
        out_and_command,
    )
    from mobidfl.analysis.bench_run import check_flags

    check_option_pairs(args)  # an option given where it does nothing: one line, exit 2
    if args.tune is None or args.describe is not None:
        return cmd_bench(args)
    out, command = out_and_command(args)

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
