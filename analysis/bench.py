"""``mobidfl bench``: every exchange policy on the same standard worlds, one leaderboard.

The worlds are the scenarios of :mod:`mobidfl.analysis.bench_scenarios` (``analysis/scenarios``),
each at the ideal link and at the calibrated 802.11p link (and, for DAM/DCM's world, at
each of the UAVs' mobility strategies). Every registered policy (entry-point plug-ins
included) runs on every column where :class:`mobidfl.model.config.Config` accepts it; a refused
pair keeps its one-line reason. Each cell runs over the same seeds, so the runs of two
policies with one seed share mobility, data split and initial models.

Runs go through the sweep machinery (:mod:`mobidfl.analysis.sweep`): one sweep folder per cell
under ``OUT/cells/`` (``manifest.csv`` and one Parquet file per finished run), executed by
its process pool, Ray, or ``--batch-runs``. Finished runs are kept, so the same command
after a kill (or a full disk: one line saying so and that command) goes on where it
stopped. ``--out`` is new or empty or this same bench's folder (another bench's, a run's or
a sweep's is refused); before a resume or a report the folder is checked whole
(``manifest.json``, each cell's ``manifest.csv``, every finished run's file): a resume runs
a damaged run again and rewrites a damaged manifest, a report refuses it in one line. The
report (:func:`write_report`) then writes
``leaderboard.md`` / ``leaderboard.csv``, ``heatmap.png`` (score per policy and column),
``accuracy_<world>.png`` (mean accuracy over simulated time per policy) and
``manifest.json`` (settings, versions, machine) so that two machines' tables can be
compared. Statistics: :mod:`mobidfl.analysis.bench_stats`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.bench_scenarios import (
    Cell,
    Column,
    build_cells,
    check_columns,
    check_scenario,
    columns,
    link_axis,
    load_scenario,
    policy_names,
    policy_settings,
    scenario_names,
)
from mobidfl.analysis.bench_stats import (
    CONFIDENCE,
    EQUIVALENCE_MARGIN,
    HALF_WIDTH,
    MAX_SEEDS,
    SCORE_FLOOR,
    compare_column,
    first_time_at,
    paired_difference,
    run_numbers,
    seeds_for_column,
    seeds_needed,
    t_interval,
    time_to_target,
)
from mobidfl.analysis.bench_stats import score as normalised_score
from mobidfl.analysis.comm import (
    CURVE,
    PER_AGENT,
    accuracy_over_bytes,
    bytes_to_target,
    cumulative_per_agent,
    pareto_front,
)
from mobidfl.analysis.runner import (
    CELLS,
    BenchDamaged,
    agent_count,
    cell_rows,
    damaged_run,
    folder_entries,
    open_cells,
    plan_runs,
    quiet,
    repair_cells,
    run_recorded,
    safe_name,
)
from mobidfl.analysis.stats import sample_std
from mobidfl.analysis.study import load_study, study_names
from mobidfl.atomic import write_csv, write_figure, write_text_atomic
from mobidfl.cores import (
    machine_record,
    package_versions,
    source_commit,
    source_state,
)
from mobidfl.errors import ConfigError

__all__ = ["add_bench_parser", "check_option_pairs", "cmd_bench", "open_cells", "plan_runs",
           "run_bench", "write_report"]

PLAN = "manifest.json"
LOW, HIGH = "local", "central_fedavg"
"""The normalised score's 0 and 1: no exchange at all, and FedAvg over every agent each step
(an oracle server: the upper reference, never the column's best)."""
TARGET_SHARE = 0.9
"""Time to target: the first evaluation at ``TARGET_SHARE`` x central FedAvg's final
accuracy of the same seed."""


# --- planning -----------------------------------------------------------------------------


def _unique(names: Sequence[str]) -> list[str]:
    """``names`` without blanks and repeats, in their order (``a,,a`` is ``a``)."""
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def _check_flags(*, backend: str, batch_runs: bool, seeds: int, first_seed: int,
                 processes: int | None, cpus_per_run: float, gpus_per_run: float,
                 device: str | None, until_half_width: float | None = None,
                 max_seeds: int = MAX_SEEDS) -> None:
    """Every option of a bench checked before any world is built or folder touched."""
    from mobidfl.analysis.sweep import BACKENDS, MAX_RUNS
    from mobidfl.model.config import SEED_MAX

    if backend not in BACKENDS:
        raise ConfigError("--backend", backend, "one of " + ", ".join(BACKENDS))
    if batch_runs and backend != "local":
        raise ConfigError("--batch-runs", backend, "the local backend (one process runs all)")
    if not 2 <= seeds <= MAX_RUNS:
        raise ConfigError("--seeds", seeds, f"an integer in [2, {MAX_RUNS}] (a confidence "
                          "interval needs two)")
    if not 0 <= first_seed <= SEED_MAX - (seeds - 1):
        raise ConfigError("--first-seed", first_seed, "an integer >= 0 with first seed + "
                          f"seeds - 1 <= {SEED_MAX} (seeds are int64)")
    if until_half_width is not None:
        if not (math.isfinite(until_half_width) and 0 < until_half_width < 1):
            raise ConfigError("--until-half-width", until_half_width, "a number in (0, 1): "
                              "the 95 % half-width of final accuracy to reach, e.g. 0.02")
        if not seeds <= max_seeds <= MAX_RUNS:
            raise ConfigError("--max-seeds", max_seeds, f"an integer in [--seeds = {seeds}, "
                              f"{MAX_RUNS}]")
        if first_seed + max_seeds - 1 > SEED_MAX:
            raise ConfigError("--max-seeds", max_seeds, "at most "
                              f"{SEED_MAX - first_seed + 1} from --first-seed {first_seed}")
    if processes is not None and processes < 0:
        raise ConfigError("--processes", processes, "an integer >= 0 (0 = in this process)")
    for flag, value in (("--cpus-per-run", cpus_per_run), ("--gpus-per-run", gpus_per_run)):
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(flag, value, "a number >= 0 (Ray resources per run)")
    if device not in (None, "cpu", "cuda"):
        raise ConfigError("--device", device, "cpu or cuda")
    if device == "cuda" and backend == "local":  # on Ray the runs' nodes have the GPUs
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("--device", device, "cpu (no CUDA device is available here: "
                              "torch.cuda.is_available() is False)")


def _keys(data: Any, where: str, needed: dict[str, type | tuple[type, ...]]) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} is not a JSON object")
    for key, kind in needed.items():
        if not isinstance(data.get(key), kind):
            raise ValueError(f"{where} has no {key!r} of the right type")


def read_plan(out: Path) -> dict[str, Any]:
    """``out/manifest.json`` read whole and checked (what the report reads of it).

    A cut or foreign file raises :class:`BenchDamaged` naming it.
    """
    path = out / PLAN
    try:
        plan = json.loads(path.read_text())
        _keys(plan, PLAN, {"command": str, "scale": str, "seeds": list, "scenarios": dict,
                           "links": dict, "policies": dict, "columns": list, "cells": list,
                           "versions": dict, "machine": dict, "started": str,
                           "scenario_set": (int, str)})
        _keys(plan["machine"], "its machine", {"cpu": str, "cores": int, "platform": str})
        for column in plan["columns"]:
            _keys(column, "a column", {"key": str, "scenario": str, "variant": str,
                                       "link": str, "label": str})
        for cell in plan["cells"]:
            _keys(cell, "a cell", {"key": str, "column": str, "policy": str, "refusal": str,
                                   "folder": str, "agents": int, "runs": list})
            if cell["folder"] != f"{CELLS}/{safe_name(cell['key'])}":
                raise ValueError(f"cell {cell['key']!r} names the folder {cell['folder']!r}")
        for name, about in plan["scenarios"].items():
            _keys(about, f"scenario {name}", {"version": int, "title": str, "provenance": str,
                                              "why": str, "scale_note": str})
        for policy, about in plan["policies"].items():
            _keys(about, f"policy {policy}", {"settings": dict})
        for link, about in plan["links"].items():
            _keys(about, f"link {link}", {"label": str, "about": str})
    except UnicodeDecodeError as exc:
        raise BenchDamaged(path, f"not text ({exc.reason})") from None
    except ValueError as exc:  # JSONDecodeError included: a cut file
        raise BenchDamaged(path, " ".join(str(exc).split())) from None
    return plan


def check_bench_folder(out: Path) -> dict[str, Any]:
    """Check a bench folder whole before its report.

    ``manifest.json``, each cell's ``manifest.csv`` and the file of every run listed ok. Raises
    :class:`BenchDamaged` naming the first file that is cut, damaged or missing; returns the plan.
    """
    from mobidfl.analysis.sweep import run_path

    plan = read_plan(out)
    for cell in plan["cells"]:
        folder = out / cell["folder"]
        if cell["refusal"] or not (folder / "manifest.csv").exists():
            continue
        rows = cell_rows(folder, cell["runs"])
        wanted = set(cell["runs"])
        for record in rows.to_dict("records"):
            if record["run_id"] not in wanted or record["status"] != "ok":
                continue
            path = run_path(folder, record["run_id"])
            why = damaged_run(path) if path.exists() else "missing (its cell lists it as ok)"
            if why:
                raise BenchDamaged(path, why)
    return plan


def _check_same_bench(out: Path, cells: Sequence[Cell], plan: dict[str, list[Any]]) -> None:
    """Refuse an ``--out`` that holds anything but this same bench.

    WHY: another bench's folder would have its table replaced and its runs left as orphans
    (never reported, never removed); a ``mobidfl run`` or sweep folder would be mixed with
    a bench. The same bench is the same cells with the same run ids (worlds, policies,
    seeds, scale and device: :func:`plan_runs`).
    """
    entries = folder_entries(out)
    if not entries:
        return
    if PLAN not in entries:
        raise ConfigError("--out", str(out), "an empty or new folder, or a bench folder with "
                          f"{PLAN} (this one holds {', '.join(entries[:3])}"
                          + (", ..." if len(entries) > 3 else "") + ": not a bench's)")
    wanted = {cell.key: [s.run_id for s in plan.get(cell.key, [])] for cell in cells}
    try:
        previous = read_plan(out)
    except BenchDamaged as exc:  # rewritten below if the cells are this bench's
        _check_cell_folders(out, wanted, damaged=exc)
        return
    had = {cell["key"]: list(cell["runs"]) for cell in previous["cells"]}
    if had != wanted:
        was = previous["command"] or "another mobidfl bench"
        raise ConfigError("--out", str(out), "a new or empty folder, or the folder of this "
                          f"same bench (it holds another bench, written by: {was}; its worlds, "
                          "policies, seeds, scale or device differ: give another --out)")


def _check_cell_folders(out: Path, wanted: dict[str, list[str]], *,
                        damaged: BenchDamaged) -> None:
    """With ``manifest.json`` damaged: its cell folders must all be this bench's."""
    folders = {f"{safe_name(key)}": runs for key, runs in wanted.items()}
    root = out / CELLS
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        runs = folders.get(folder.name)
        ids: set[str] = set()
        if runs is not None and (folder / "manifest.csv").exists():
            try:
                ids = set(cell_rows(folder, runs)["run_id"].astype(str))
            except BenchDamaged:
                ids = set(runs)  # its run files are checked one by one
        if runs is None or not ids <= set(runs):
            raise ConfigError("--out", str(out), f"the folder of this same bench ({damaged.path} "
                              f"is damaged: {damaged.why}; and {folder} is not one of this "
                              "bench's cells: give another --out)")


def _repair_runs(out: Path, cells: Sequence[Cell], plan: dict[str, list[Any]], *,
                 say: Callable[[str], None] | None) -> None:
    """Resume: write damaged manifests again and remove damaged run files, one line each.

    A damaged ``manifest.json`` or cell ``manifest.csv`` is written again, a damaged run file
    removed so that its run runs again; one line (``say``) each.
    """
    tell = say or (lambda _: None)
    if (out / PLAN).exists():
        try:
            read_plan(out)
        except BenchDamaged as exc:
            tell(f"mobidfl: {exc.path} is damaged ({exc.why}): written again from this command")
    repair_cells(out, cells, plan, tell=tell)
@quiet
def run_bench(
    *,
    out: str | Path,
    scenarios: Sequence[str] | None = None,
    study: str | None = None,
    policies: str | Sequence[str] | None = None,
    seeds: int = 5,
    first_seed: int = 0,
    scale: str = "small",
    links: Sequence[str] | None = None,
    backend: str = "local",
    processes: int | None = None,
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    batch_runs: bool = False,
    device: str | None = None,
    retry_errors: bool = False,
    until_half_width: float | None = None,
    max_seeds: int = MAX_SEEDS,
    pilot: bool = False,
    progress: bool = True,
    command: str = "",
    say: Callable[[str], None] | None = None,
) -> list[Path]:
    """Run every cell not finished yet into ``out`` and write the report; return its files.

    ``out`` is new or empty, or the folder of this same bench (same worlds, policies, seeds
    and scale: anything else is refused before a file is written); there a run whose file
    is damaged is run again (``say``, one line each). Raises ``KeyboardInterrupt`` on
    Ctrl-C (finished runs are kept: the same call resumes) and
    :class:`mobidfl.analysis.sweep.SweepStopped` when a write fails (the message says why only).

    ``until_half_width``: after the ``seeds`` seeds, seeds are added column by column (all
    its policies together, so they stay paired) until every cell's 95 % half-width of final
    accuracy is at most this, or ``max_seeds`` is reached (a stopping rule fixed before the runs;
    :func:`mobidfl.analysis.bench_stats.seeds_for_column`); the manifest keeps each column's seeds.
    """
    from mobidfl.analysis.folders import check_output_folder

    _check_flags(backend=backend, batch_runs=batch_runs, seeds=seeds, first_seed=first_seed,
                 processes=processes, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
                 device=device, until_half_width=until_half_width, max_seeds=max_seeds)
    if study is not None and (scenarios is not None or links is not None):
        raise ConfigError("--study", study, "without --scenarios and --links (a study fixes "
                          "its worlds, on the ideal link)")
    names = scenario_names() if scenarios is None else _unique(scenarios)
    if not names:
        raise ConfigError("--scenarios", ",".join(scenarios or []),
                          "at least one of " + ", ".join(scenario_names()))
    if links is not None and not _unique(links):
        raise ConfigError("--links", ",".join(links), "at least one of " + ", ".join(link_axis()))
    if pilot and study is None:
        raise ConfigError("--pilot", "on", "with --study (a study's declared pilot)")
    the_study = load_study(study) if study is not None else None
    if the_study is not None and the_study.design and policies in ("declared", ["declared"]):
        policies = declared_policies(the_study)
    chosen = policy_names(policies)
    readings: dict[str, dict[str, Any]] = {}
    if the_study is not None:
        cols = the_study.columns(scale)
        readings = {p: dict(v) for p, v in the_study.policies.items()}
        if pilot:
            cols, seed_plan = pilot_columns(the_study, cols)
            first_seed, seeds = seed_plan[0], len(seed_plan)
        else:
            _check_results_seeds(the_study, seeds=seeds, first_seed=first_seed, scale=scale)
    else:
        for name in names:  # each file checked whole, before any folder is written
            check_scenario(name, scale=scale)
        cols = columns(names, scale=scale, links=None if links is None else _unique(links))
    check_columns(cols)  # a study's worlds too: map, memory, values (one line naming it)
    cells = build_cells(cols, chosen, readings=readings)
    source = source_state()  # the code this session starts from (recorded before any run)
    if study is not None and the_study.design.get("clean_tree") and scale != "ci" \
            and source["dirty"]:
        raise ConfigError("--study", study, "a clean git tree (its [design] is pre-registered "
                          "against a commit: commit or stash the changes first)")
    extra: dict[str, Any] = {}
    if device is not None:
        extra = {"device": device, "backend": "batched" if device == "cuda" else "loop"}
    seed_list = list(range(first_seed, first_seed + seeds))
    out = Path(out)
    column_seeds = {c.key: seed_list for c in cols}
    if until_half_width is not None:
        column_seeds = _grown_before(out, column_seeds)
    plan = plan_runs(cells, column_seeds, extra=extra)
    if not plan:  # every pair refused: nothing would run, and an empty table would say ok
        reasons = sorted({cell.refusal for cell in cells})
        raise ConfigError("--policies", ",".join(chosen),
                          "at least one policy that can run on the chosen worlds (every pair "
                          f"is refused: {reasons[0]})")
    check_output_folder(out)
    _check_same_bench(out, cells, plan)  # before any file is written or repaired
    out.mkdir(parents=True, exist_ok=True)
    _repair_runs(out, cells, plan, say=say)
    started = datetime.now(UTC)
    clock = time.perf_counter()
    adaptive = None if until_half_width is None else {
        "half_width": until_half_width, "max_seeds": max_seeds}
    while True:
        _run_plan(out, cells=cells, cols=cols, chosen=chosen, plan=plan, seed_list=seed_list,
                  scale=scale, command=command, started=started, backend=backend,
                  source=source, readings=readings,
                  processes=processes, address=address, cpus=cpus_per_run, gpus=gpus_per_run,
                  batch_runs=batch_runs, retry_errors=retry_errors, progress=progress,
                  column_seeds=column_seeds, adaptive=adaptive)
        if until_half_width is None:
            break
        grown = _grow_seeds(out, column_seeds, half_width=until_half_width, cap=max_seeds)
        if grown == column_seeds:
            break
        if say is not None:
            more = {k: len(v) for k, v in grown.items() if len(v) > len(column_seeds[k])}
            say(f"mobidfl: seeds added until the 95 % half-width is <= {until_half_width:g}: "
                + ", ".join(f"{k} -> {n}" for k, n in more.items()))
        column_seeds = grown
        plan = plan_runs(cells, column_seeds, extra=extra)
    write_descriptors(out, cols, seeds=seed_list)
    _write_plan(out, cells=cells, cols=cols, policies=chosen, seeds=seed_list, scale=scale,
                command=command, started=started, wall_s=time.perf_counter() - clock,
                plan=plan, column_seeds=column_seeds, adaptive=adaptive, source=source,
                readings=readings)
    return write_report(out)


def declared_policies(study: Any) -> list[str]:
    """A designed study's declared arms: references, contenders, then the secondary family."""
    design = study.design
    return list(dict.fromkeys([*design.get("references", []), *design.get("contenders", []),
                               *design.get("secondary_family", [])]))


def pilot_columns(study: Any, cols: Sequence[Column]) -> tuple[list[Column], list[int]]:
    """The declared pilot's columns and seeds (``[design.seeds]`` pilot_worlds, pilot_seeds)."""
    plan = study.design.get("seeds", {})
    worlds, seeds = list(plan.get("pilot_worlds", [])), [int(s) for s in
                                                          plan.get("pilot_seeds", [])]
    by_variant = {c.variant: c for c in cols}
    missing = [w for w in worlds if w not in by_variant]
    if not worlds or not seeds or missing:
        raise ConfigError("--pilot", ", ".join(missing) or study.name,
                          "a study whose [design.seeds] declares pilot_worlds (its variants) "
                          "and pilot_seeds")
    return [by_variant[w] for w in worlds], seeds


def _check_results_seeds(study: Any, *, seeds: int, first_seed: int, scale: str) -> None:
    """A pre-registered study's results run uses the declared seeds (not at ``ci``)."""
    plan = study.design.get("seeds", {})
    declared = int(plan.get("results", 0) or 0)
    if not declared or scale == "ci":
        return
    first = int(plan.get("results_first", 0))
    if (seeds, first_seed) != (declared, first):
        raise ConfigError("--seeds", f"{seeds} from {first_seed}",
                          f"the study's declared {declared} seeds from {first} "
                          "([design.seeds] results, from its power analysis)")


def _run_plan(out: Path, *, cells: Sequence[Cell], cols: Sequence[Column],
              chosen: Sequence[str], plan: dict[str, list[Any]], seed_list: Sequence[int],
              scale: str, command: str, started: datetime, backend: str,
              processes: int | None, address: str | None, cpus: float, gpus: float,
              batch_runs: bool, retry_errors: bool, progress: bool,
              column_seeds: Mapping[str, Sequence[int]], adaptive: dict[str, Any] | None,
              source: dict[str, Any] | None = None,
              readings: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Run every run of ``plan`` not finished yet.

    The plan is written first: a folder holding cells/ always says which bench they belong to.
    """
    _write_plan(out, cells=cells, cols=cols, policies=chosen, seeds=seed_list, scale=scale,
                command=command, started=started, wall_s=None, plan=plan,
                column_seeds=column_seeds, adaptive=adaptive, source=source,
                readings=readings)
    manifests, owner, todo = open_cells(out, cells, plan, backend=backend,
                                        retry_errors=retry_errors)
    total = sum(len(specs) for specs in plan.values())
    run_recorded(todo, lambda spec: manifests[owner[spec.run_id]], total=total,
                 desc="bench runs", progress=progress, show_failed=True, backend=backend,
                 processes=processes, address=address,
                 resources={"num_cpus": cpus, "num_gpus": gpus, "memory": 0.0},
                 batch_runs=batch_runs)


def _grown_before(out: Path, column_seeds: dict[str, list[int]]) -> dict[str, list[int]]:
    """On resuming an adaptive bench, each column's seeds as its last session left them.

    Where they extend this command's first seeds (anything else is checked as a new bench by
    :func:`_check_same_bench`).
    """
    if not (out / PLAN).is_file():
        return column_seeds
    try:
        before = read_plan(out).get("column_seeds") or {}
    except BenchDamaged:
        return column_seeds
    grown = dict(column_seeds)
    for key, seeds in column_seeds.items():
        had = before.get(key)
        if isinstance(had, list) and had[:len(seeds)] == list(seeds):
            grown[key] = [int(s) for s in had]
    return grown


def _grow_seeds(out: Path, column_seeds: Mapping[str, Sequence[int]], *, half_width: float,
                cap: int) -> dict[str, list[int]]:
    """Each column's seeds after this round.

    :func:`seeds_for_column` over the spread of its finished cells (the next seeds follow its last
    one).
    """
    _, runs, _ = load_results(out)
    grown: dict[str, list[int]] = {}
    for key, seeds in column_seeds.items():
        done = runs[(runs["column"] == key) & (runs["status"] == "ok")] if not runs.empty \
            else runs
        stds = [sample_std(group["final_acc"].astype(float)) if len(group) > 1 else math.nan
                for _, group in done.groupby("policy")] if not done.empty else []
        n = seeds_for_column(stds, have=len(seeds), half_width=half_width, cap=cap)
        grown[key] = [*seeds, *range(seeds[-1] + 1, seeds[-1] + 1 + n - len(seeds))]
    return grown


# --- the manifest ---------------------------------------------------------------------------
def _write_plan(out: Path, *, cells: Sequence[Cell], cols: Sequence[Column],
                policies: Sequence[str], seeds: Sequence[int], scale: str, command: str,
                started: datetime, wall_s: float | None, plan: dict[str, list[Any]],
                column_seeds: Mapping[str, Sequence[int]] | None = None,
                adaptive: dict[str, Any] | None = None,
                source: dict[str, Any] | None = None,
                readings: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    from mobidfl.analysis.scenarios import SET_VERSION

    previous: dict[str, Any] = {}
    if (out / PLAN).exists():
        try:
            previous = json.loads((out / PLAN).read_text())
        except (OSError, ValueError):
            previous = {}
    scenarios = sorted({c.scenario for c in cols})
    walls = list(previous.get("wall_s_sessions", []))
    # each session's code as it STARTED (the end-of-session "sessions" entry can be a later
    # commit): written by the session's first plan, before any of its runs
    starts = list(previous.get("session_starts", []))
    stamp = started.isoformat(timespec="seconds")
    if source is not None and not any(s.get("started") == stamp for s in starts):
        starts.append({"started": stamp, "command": command, **source,
                       "machine": machine_record()})
    if wall_s is not None:
        walls.append(round(wall_s, 1))
    data = {
        "command": command,
        "scale": scale,
        "seeds": list(seeds),
        # each column's seeds where --until-half-width added some (else every column: seeds)
        "column_seeds": {k: list(v) for k, v in (column_seeds or {}).items()
                         if list(v) != list(seeds)},
        "until_half_width": adaptive,
        "confidence": CONFIDENCE,
        "scenario_set": SET_VERSION,
        "scenarios": {
            name: {
                "version": (s := _world_source(name)).version, "title": s.title,
                "regime": s.regime, "provenance": s.provenance, "why": s.why,
                "scale_note": s.notes.get(scale, ""), "sha256": s.sha256,
            }
            for name in scenarios
        },
        "study": next((c.scenario for c in cols if c.scenario in study_names()), None),
        "links": {k: {"label": label, "about": about, "settings": settings}
                  for k, (label, about, settings) in link_axis().items()},
        "policies": {p: {"source": policy_settings(p)[0],
                         "settings": {**policy_settings(p)[1], **(readings or {}).get(p, {})},
                         **({"study_reading": dict(readings[p])} if readings and p in readings
                            else {})}
                     for p in policies},
        "columns": [
            {"key": c.key, "scenario": c.scenario, "variant": c.variant, "link": c.link,
             "label": c.label, "world": c.settings}
            for c in cols
        ],
        "cells": [
            {"key": cell.key, "column": cell.column.key, "policy": cell.policy,
             "refusal": cell.refusal, "folder": f"{CELLS}/{safe_name(cell.key)}",
             "agents": agent_count(cell.settings),
             "runs": [s.run_id for s in plan.get(cell.key, [])]}
            for cell in cells
        ],
        "versions": package_versions(),
        "machine": machine_record(),
        "started": previous.get("started", started.isoformat(timespec="seconds")),
        "last_session_started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds") if wall_s is not None
        else previous.get("finished", ""),
        "wall_s_sessions": walls,
        "session_starts": starts,
        # every session that wrote this folder: its command, machine, versions and commit
        # (the table may be made across sessions, machines and library versions)
        "sessions": [*previous.get("sessions", []), {
            "command": command, "started": started.isoformat(timespec="seconds"),
            "finished": datetime.now(UTC).isoformat(timespec="seconds")
            if wall_s is not None else "", "machine": machine_record(),
            "versions": package_versions(),
            # the code the session started from (a commit made during the session is not it)
            "commit": (source or {}).get("commit") or source_commit(),
            "dirty": bool((source or {}).get("dirty"))}]
        if wall_s is not None else previous.get("sessions", []),
    }
    write_text_atomic(out / PLAN, json.dumps(data, indent=1, default=str) + "\n")


def _world_source(name: str) -> Any:
    """The scenario or study a column's worlds come from (provenance for the manifest)."""
    return load_study(name) if name in study_names() else load_scenario(name)


DESCRIPTORS = "descriptors.csv"
"""Per column, the regime descriptors of its world (:mod:`mobidfl.analysis.describe`)."""


def _world_without_link(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if not k.startswith("link")}


def write_descriptors(out: Path, cols: Sequence[Column], *, seeds: Sequence[int]) -> Path:
    """Measure each column's regime descriptors over ``seeds`` into ``out/descriptors.csv``.

    The mean over the bench's results seeds (:func:`mobidfl.analysis.describe.describe_seeds`),
    which ``mobidfl bench --describe`` with the same ``--seeds`` and ``--first-seed`` repeats.
    Once per world (the links share one); columns already there are kept.
    """
    from mobidfl.analysis.describe import describe_seeds

    path = out / DESCRIPTORS
    old = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=["column"])
    rows = {str(r["column"]): dict(r) for r in old.to_dict("records")}
    measured: dict[str, dict[str, Any]] = {}
    for col in cols:
        if col.key in rows:
            continue
        world = _world_without_link(col.settings)
        key = json.dumps(world, sort_keys=True, default=str)
        if key not in measured:
            with contextlib.suppress(ConfigError):  # a world its runs refuse: no descriptors
                measured[key] = describe_seeds(world, list(seeds)).as_dict()
        if key in measured:
            rows[col.key] = {"column": col.key, "scenario": col.scenario,
                             "variant": col.variant, "link": col.link, "seed": int(seeds[0]),
                             "seeds": len(seeds), **measured[key]}
    table = pd.DataFrame(list(rows.values()))
    write_csv(table, path, index=False)
    return path


def _is_scenario_file(path: str) -> bool:
    """Whether a ``.toml`` file is a scenario (``[about]`` and ``[world]``), not settings."""
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # the settings reader then names what is wrong, in one line
    return "about" in data and "world" in data


def describe_table(world: str, *, scale: str, seed: int, seeds: int = 1,
                   rule: str | None = None) -> str:
    """``mobidfl bench --describe WORLD``.

    The descriptors of a scenario's, a study's or a settings file's worlds, as a Markdown table (no
    training; seconds per world and seed), averaged over the ``seeds`` seeds from ``seed``: the
    bench's ``--seeds`` and ``--first-seed``, so that both give the same numbers.
    """
    from mobidfl.analysis.describe import describe_seeds

    if world in scenario_names() or (world.endswith(".toml") and _is_scenario_file(world)):
        cols = columns([world], scale=scale, links=["ideal"])
        worlds = [(c.world_name, _world_without_link(c.settings)) for c in cols]
    elif world in study_names():
        worlds = [(c.variant, _world_without_link(c.settings))
                  for c in load_study(world).columns(scale)]
    elif world.endswith(".toml"):
        from mobidfl.model.config import Config

        settings = Config.from_toml(world, source="--describe").explicit_settings()
        worlds = [(Path(world).stem, settings)]
    else:
        raise ConfigError("--describe", world, "a scenario (" + ", ".join(scenario_names())
                          + "), a study (" + ", ".join(study_names())
                          + ") or a .toml file of settings")
    from mobidfl.analysis.answer import load_answer
    from mobidfl.analysis.regime_map import load_rule

    published = load_answer(rule) if rule is not None else None  # a pre-registered study's
    predict = load_rule(rule) if rule is not None and published is None else None
    if seeds < 1:
        raise ConfigError("--seeds", seeds, "at least 1 (the seeds the descriptors average)")
    seed_list = list(range(seed, seed + seeds))
    head = ("| world | agents | steps | neighbours/step | contact s | inter-contact s | "
            "met share | speed CV | label skew | samples/agent |"
            + (" rule says |" if predict else "")
            + (" primary says | budget says |" if published else ""))
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if predict else "")
             + ("---|---|" if published else "")]
    refused: list[str] = []
    notes: list[str] = []
    for name, settings in worlds:
        try:
            d = describe_seeds(settings, seed_list)
        except ConfigError as exc:
            if len(worlds) == 1:
                raise  # the one world asked for: refused in one line, exit 2
            # one world of a scenario or study that its runs refuse too (the bench records
            # them as refused): the others are still described
            lines.append(f"| {name} | refused |" + " |" * (len(lines[1].split("|")) - 4))
            refused.append(f"{name}: {exc}")
            continue
        said = f" {predict(d.neighbours_per_step, d.label_skew) or '-'} |" if predict else ""
        if published:
            said, note = _published_answer(published, name, d)
            notes += note
        lines.append(f"| {name} | {d.agents} | {d.steps} | {d.neighbours_per_step:.2f} | "
                     f"{d.contact_duration_s:.0f} | {d.inter_contact_s:.0f} | "
                     f"{d.met_share:.3f} | {d.speed_cv:.2f} | {d.label_skew:.3f} | "
                     f"{d.samples_per_agent:.0f} |{said}")
    if refused:
        lines += ["", "Refused at this scale (its runs are refused too):",
                  *(f"- {line}" for line in refused)]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)


def _published_answer(published: dict[str, Any], name: str, d: Any) -> tuple[str, list[str]]:
    """A world's cells of the pre-registered study's answer, and the lines below the table.

    Per metric the rule's policy (or, where no rule beat the constant out of sample, the
    constant, said so); then the nearest studied world's verdicts and, where a descriptor lies
    outside the studied range, which.
    """
    from mobidfl.analysis.answer import recommend

    got = recommend(published, d.as_dict())
    cells = []
    for metric in ("auc_acc", "budget_acc"):
        r = got["rules"].get(metric)
        if r is None:
            cells.append("-")
        elif r["beats_constant"]:
            cells.append(r["policy"])
        else:
            cells.append(f"{r['constant']} (the constant: no rule beat it)")
    notes = []
    near = got["nearest"]
    if near is not None:
        parts = []
        for metric, label in (("auc_acc", "mean accuracy over the run"),
                              ("budget_acc", "within D-PSGD's bytes")):
            v = near[metric]
            if near.get("ceiling"):
                parts.append(f"{label}: ceiling (best {v['best']})")
                continue
            lead = "" if v["lead_pp"] is None else (
                f" +{v['lead_pp']:.1f} pp" + ("" if v["low_pp"] is None else
                                              f" [{v['low_pp']:.1f}, {v['high_pp']:.1f}]"))
            parts.append(f"{label}: {v['kind']} {v['best']}{lead}")
        notes.append(f"- {name}: nearest studied world `{near['variant']}` of "
                     f"{published['study']}: " + "; ".join(parts))
    for desc, value, low, high in got["outside"]:
        notes.append(f"- {name}: {desc} = {value:.3g} is outside the studied range "
                     f"[{low:.3g}, {high:.3g}]: the answer is an extrapolation there")
    return f" {cells[0]} | {cells[1]} |", notes


# --- the report -----------------------------------------------------------------------------
def planned_records(out: Path, plan: dict[str, Any]) -> Iterator[tuple[
        dict[str, Any], dict[str, Any], Path | None]]:
    """``(cell, manifest record, run file or None)`` of every planned run of a bench-shaped folder.

    A bench's or a study tuning's folder; the run file only where the run is ok and its file exists.
    """
    from mobidfl.analysis.sweep import read_manifest, run_path

    for cell in plan["cells"]:
        folder = out / cell["folder"]
        if cell["refusal"] or not (folder / "manifest.csv").exists():
            continue
        wanted = set(cell["runs"])
        for record in read_manifest(folder).to_dict("records"):
            if record["run_id"] not in wanted:
                continue
            path = run_path(folder, record["run_id"])
            yield cell, record, path if record["status"] == "ok" and path.exists() else None


def load_results(out: Path) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """``(plan, per-run numbers, curves)`` of a bench folder (finished runs only).

    The curves hold :data:`mobidfl.analysis.comm.CURVE` per evaluation.
    """
    plan = read_plan(out)
    rows, curves = [], []
    for cell, record, path in planned_records(out, plan):
        base = {"run_id": record["run_id"], "cell": cell["key"],
                "column": cell["column"], "policy": cell["policy"],
                "seed": int(record["seed"]), "status": record["status"],
                "error": record.get("error", ""),
                "wall_s": float(record.get("wall_s", float("nan"))),
                "cpu_s": float(record.get("cpu_s", float("nan")))}
        if path is None:
            rows.append(base)
            continue
        table = pd.read_parquet(path)
        table = table.assign(**{PER_AGENT: cumulative_per_agent(table,
                                                                agents=cell["agents"])})
        rows.append({**base, **run_numbers(table, agents=cell["agents"]),
                     "_table": table[[c for c in CURVE if c in table]]})
        if "acc_mean" in table:
            evaluated = table[np.isfinite(pd.to_numeric(table["acc_mean"],
                                                        errors="coerce"))]
            curves.append(pd.DataFrame({
                "column": cell["column"], "policy": cell["policy"], "seed": base["seed"],
                **{c: evaluated[c].to_numpy(float) for c in CURVE},
            }))
    runs = pd.DataFrame(rows)
    curve = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(
        columns=["column", "policy", "seed", *CURVE])
    return plan, runs, curve


def _twin(column: dict[str, Any], plan: dict[str, Any]) -> str:
    """The column's ideal-link twin (same scenario and axis value), for the references.

    Central FedAvg ignores the link, so it runs only at the ideal link.
    """
    for other in plan["columns"]:
        if (other["scenario"], other["variant"], other["link"]) == (
                column["scenario"], column["variant"], "ideal"):
            return other["key"]
    return column["key"]


def _by_seed(runs: pd.DataFrame, column: str, policy: str, metric: str) -> pd.Series:
    if runs.empty or metric not in runs:
        return pd.Series(dtype=float)
    chosen = runs[(runs["column"] == column) & (runs["policy"] == policy)
                  & (runs["status"] == "ok")]
    return chosen.set_index("seed")[metric].astype(float)


def leaderboard(plan: dict[str, Any], runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell.

    Status or reason, and every metric's mean and CI half-width; the comparison with the column's
    best (:func:`mobidfl.analysis.bench_stats.compare_column`: all pairs, Holm-adjusted p, TOST,
    verdict), the column's detectable difference, the seeds the cell needs, the score where its
    scale is clear (else ``score_reason``) and the time to target over every seed (median, never =
    inf; ``target_reached``).
    """
    rows = []
    for column in plan["columns"]:
        key = column["key"]
        ref = key if not _by_seed(runs, key, HIGH, "final_acc").empty else _twin(column, plan)
        high = _by_seed(runs, ref, HIGH, "final_acc")
        low_ref = key if not _by_seed(runs, key, LOW, "final_acc").empty else ref
        low = _by_seed(runs, low_ref, LOW, "final_acc")
        target = high * TARGET_SHARE
        cells = [c for c in plan["cells"] if c["column"] == key]
        finals = {c["policy"]: _by_seed(runs, key, c["policy"], "final_acc") for c in cells}
        # the best without double dipping: all pairs of candidates tested, Holm over them all
        compared = compare_column({p: s for p, s in finals.items() if p != HIGH and len(s)})
        best = compared.best
        for cell in cells:
            policy = cell["policy"]
            row: dict[str, Any] = {
                "scenario": column["scenario"], "variant": column["variant"],
                "link": column["link"], "column": key, "label": column["label"],
                "policy": policy, "reference_column": ref, "best_policy": best,
                "best_chosen_by": compared.selection, "tests_in_family": compared.family,
                "contender": policy in compared.contenders,
                "detectable_diff": compared.detectable,
                "detectable_diff_holm": compared.detectable_holm,
            }
            if cell["refusal"]:
                rows.append({**row, "status": "refused", "reason": cell["refusal"]})
                continue
            mine = runs[(runs["cell"] == cell["key"])] if not runs.empty else runs
            ok = mine[mine["status"] == "ok"] if not mine.empty else mine
            errors = mine[mine["status"] == "error"] if not mine.empty else mine
            row["seeds_ok"] = len(ok)
            row["seeds_planned"] = len(cell["runs"])
            if ok.empty:
                reason = (str(errors["error"].iloc[0]) if not errors.empty else "not run yet")
                rows.append({**row, "status": "error" if not errors.empty else "pending",
                             "reason": reason})
                continue
            row["status"] = "ok" if len(ok) == len(cell["runs"]) else "partial"
            row["reason"] = str(errors["error"].iloc[0]) if not errors.empty else ""
            series = ok.set_index("seed")
            for metric in ("final_acc", "p10_acc", "bytes_per_agent", "energy_per_agent"):
                interval = t_interval(series[metric])
                row[metric], row[f"{metric}_ci"] = interval.mean, interval.half
            spread = t_interval(series["final_acc"]).n > 1  # one seed: no sd to plan with
            row["seeds_needed"] = seeds_needed(
                sample_std(series["final_acc"]) if spread else math.nan)
            known = [s for s in series.index if math.isfinite(float(target.get(s, math.nan)))]
            times = pd.Series({
                seed: first_time_at(series.loc[seed, "_table"], float(target[seed]))
                for seed in known
            }, dtype=float)
            reach = time_to_target(times)  # never reached = +inf: median over every seed
            row["time_to_target_s"] = reach.median
            row["time_to_target_fastest_s"] = reach.fastest
            row["time_to_target_slowest_s"] = reach.slowest
            row["target_reached"] = f"{reach.reached}/{reach.n}"
            # the same first evaluation at the target, read on the bytes sent by then
            row["bytes_to_target_per_agent"] = bytes_to_target(
                {seed: series.loc[seed, "_table"] for seed in known}, target).median
            scored = normalised_score(series["final_acc"], low, high)
            row["score"], row["score_ci"] = scored.interval.mean, scored.interval.half
            row["score_reason"] = scored.reason
            if policy in compared.against_best:
                versus = compared.against_best[policy]
                test = versus.test
                row.update(diff_vs_best=test.mean, diff_vs_best_ci=test.half, p_value=test.p,
                           p_holm=versus.p_holm, p_level=versus.p_level,
                           p_level_holm=versus.p_level_holm, verdict=versus.verdict,
                           test_method=test.method,
                           distinguishable=versus.verdict in ("worse", "better"))
            elif best and policy != best:  # the oracle reference: outside the family
                test = paired_difference(series["final_acc"], finals[best])
                row.update(diff_vs_best=test.mean, diff_vs_best_ci=test.half, p_value=test.p,
                           verdict="reference", test_method=test.method,
                           distinguishable=test.distinguishable)
            elif policy == best:
                row.update(diff_vs_best=0.0, diff_vs_best_ci=0.0, p_value=float("nan"),
                           verdict="best", distinguishable=False)
            rows.append(row)
        _mark_front(rows[len(rows) - len(cells):])
    return pd.DataFrame(rows)


def _mark_front(rows: list[dict[str, Any]]) -> None:
    """``pareto``: each finished cell of one column on the front of bytes and accuracy.

    The front of mean bytes per agent (low) and mean final accuracy (high)
    (:func:`mobidfl.analysis.comm.pareto_front`); NaN where no cell of the column has both.
    """
    done = [r for r in rows if r.get("status") in ("ok", "partial")]
    cost = np.array([r.get("bytes_per_agent", math.nan) for r in done], float)
    value = np.array([r.get("final_acc", math.nan) for r in done], float)
    front = pareto_front(cost, value)
    known = bool((np.isfinite(cost) & np.isfinite(value)).any())
    for row, on in zip(done, front, strict=True):
        row["pareto"] = bool(on) if known else math.nan


def _fmt(value: Any, half: Any, digits: int = 3, factor: float = 1.0) -> str:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "n/a"
    text = f"{value * factor:.{digits}f}"
    if isinstance(half, int | float) and math.isfinite(half):
        text += f" ± {half * factor:.{digits}f}"
    return text


def _mark(row: pd.Series) -> str:
    if row.get("policy") == row.get("best_policy"):
        return " ★"
    if row.get("policy") == HIGH:
        return ""
    return {"level": " ≈", "undecided": " ?", "better": " ↑"}.get(str(row.get("verdict")), "")


def _column_notes(rows: pd.DataFrame) -> list[str]:
    """What a world's comparisons rest on.

    How the best was chosen, the Holm family, the smallest difference the seeds detect, and why the
    score is missing where it is.
    """
    done = rows[rows["status"].isin(["ok", "partial"])] if "status" in rows else rows
    if done.empty or "tests_in_family" not in done:
        return []
    first = done.iloc[0]
    notes = [""]
    if first.get("best_policy"):
        notes.append(
            f"Best chosen by {first['best_chosen_by']}: {int(first['tests_in_family'])} "
            "paired tests, Holm-corrected; no policy beats these after Holm: "
            + ", ".join(done.loc[done["contender"].astype(bool), "policy"]) + ". "
            f"With these seeds the paired t-test detects (80 % power, alpha 0.05) "
            f"differences of {_fmt(first['detectable_diff'], None, 1, 100)} pp or more "
            f"({_fmt(first['detectable_diff_holm'], None, 1, 100)} pp at Holm's strictest "
            f"step); level means within ± {EQUIVALENCE_MARGIN * 100:g} pp (TOST).")
    reasons = [r for r in done.get("score_reason", pd.Series(dtype=str)).dropna().unique()
               if isinstance(r, str) and r]
    if reasons:
        notes += ["", f"Score n/a: {reasons[0]} (needs a lower bound above {SCORE_FLOOR})."]
    return notes if len(notes) > 1 else []


def _adaptive_lines(plan: dict[str, Any], board: pd.DataFrame) -> list[str]:
    """The report's lines on the ``--until-half-width`` stopping rule.

    The target, and per column its seeds and whether every cell reached the target or the cap
    stopped it (the power each column has).
    """
    rule = plan.get("until_half_width")
    if not rule:
        return []
    target, cap = float(rule["half_width"]), int(rule["max_seeds"])
    parts = []
    for column in plan["columns"]:
        mine = board[(board["column"] == column["key"])
                     & board["status"].isin(["ok", "partial"])]
        if mine.empty or "final_acc_ci" not in mine:
            continue
        widest = float(pd.to_numeric(mine["final_acc_ci"], errors="coerce").max())
        n = int(mine["seeds_ok"].max())
        state = "reached" if widest <= target else (
            f"cap {cap} reached" if n >= cap else "not reached")
        parts.append(f"{column['label']}: {n} seeds, widest ± {widest * 100:.1f} pp ({state})")
    return [f"* seeds added per world until every cell's 95 % half-width of final accuracy is "
            f"<= ± {target * 100:g} pp or {cap} seeds: " + "; ".join(parts)]


def markdown(plan: dict[str, Any], board: pd.DataFrame, *, heatmap: str = "heatmap.png",
             plots: Sequence[str] = (), comm: Sequence[str] = ()) -> str:
    """The leaderboard page.

    Summary tables (score, final accuracy), refusals, one detail table per column, scenarios, links,
    policies' settings and the metrics' definitions.
    """
    machine, versions = plan["machine"], plan["versions"]
    wall = sum(plan.get("wall_s_sessions", []))
    lines = [
        "# MobiDFL benchmark: which exchange policy wins under which mobility", "",
        f"* command: `{plan['command'] or 'mobidfl bench'}`",
        f"* scale `{plan['scale']}`, seeds {plan['seeds']}, scenario set "
        f"{plan['scenario_set']}",
        *_adaptive_lines(plan, board),
        f"* started {plan['started']}, finished {plan.get('finished') or 'not yet'}, wall time "
        f"{wall / 60:.1f} min over {len(plan.get('wall_s_sessions', []))} session(s)",
        f"* machine: {machine['cpu']} ({machine['cores']} cores"
        + (f", GPU {machine['gpu']}" if machine.get("gpu") else "")
        + f"), load {machine.get('load_at_write')}; {machine['platform']}",
        "* versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        "",
        "Each cell: mean ± half-width of the 95 % Student-t confidence interval over the "
        "seeds. ★ = the column's best policy by final mean accuracy (central FedAvg, the "
        "oracle reference, excluded), chosen without testing on the seeds it was picked "
        "on: every pair of policies in the column is tested (paired t-test over seeds) "
        "and Holm's correction runs over all those pairs. Against ★: no mark = worse "
        "(Holm-adjusted p < 0.05); ≈ = level, shown within "
        f"± {EQUIVALENCE_MARGIN * 100:g} pp of final accuracy by an equivalence test "
        "(TOST, Holm-adjusted p < 0.05); ? = undecided (neither: the seeds cannot tell; "
        "each world's table says what difference they can detect). Refused pairs show a "
        "code, their one-line reason is listed under the table.",
        "",
    ]
    labels = [c["label"] for c in plan["columns"]]
    policies = list(plan["policies"])
    refusals: dict[str, str] = {}

    def table(metric: str, digits: int, title: str) -> list[str]:
        out = [f"## {title}", "", "| policy | " + " | ".join(labels) + " |",
               "|---|" + "---|" * len(labels)]
        for policy in policies:
            cells = []
            for column in plan["columns"]:
                hit = board[(board["column"] == column["key"]) & (board["policy"] == policy)]
                if hit.empty:
                    cells.append("")
                    continue
                row = hit.iloc[0]
                if row["status"] in ("refused", "error", "pending"):
                    reason = str(row["reason"])
                    code = refusals.setdefault(reason, f"r{len(refusals) + 1}")
                    cells.append(f"— ({code})" if row["status"] == "refused"
                                 else f"{row['status']} ({code})")
                    continue
                text = _fmt(row.get(metric), row.get(f"{metric}_ci"), digits)
                if row.get("policy") == row.get("best_policy"):
                    text = f"**{text}**"
                cells.append(text + _mark(row))
            out.append(f"| {policy} | " + " | ".join(cells) + " |")
        return out + [""]

    lines += table("score", 2, "Score: 0 = local, 1 = central FedAvg (same seeds)")
    lines += [f"![score per policy and world]({heatmap})", ""]
    lines += table("final_acc", 3, "Final mean accuracy")
    if refusals:
        lines += ["Reasons (the configuration's one-line refusal, or a run's error):", ""]
        lines += [f"* **{code}**: {reason}" for reason, code in refusals.items()]
        lines += [""]
    lines += ["## Per world", ""]
    for column in plan["columns"]:
        lines += [f"### {column['label']}", "",
                  "| policy | final acc | 10th-pct agent acc | time to target (h) | reached "
                  "| MB to target / agent | MB on air / agent | energy J / agent | score "
                  "| vs best (pp) | p (Holm) | level p (TOST, Holm) | verdict "
                  f"| seeds for ± {HALF_WIDTH * 100:g} pp |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, row in board[board["column"] == column["key"]].iterrows():
            if row["status"] in ("refused", "error", "pending"):
                lines.append(f"| {row['policy']} | {row['status']}: {row['reason']} "
                             "|  |  |  |  |  |  |  |  |  |  |  |  |")
                continue
            reached = row.get("time_to_target_s")
            spent = row.get("bytes_to_target_per_agent")
            front = " ◆" if row.get("pareto") is True else ""
            verdict = row.get("verdict")
            lines.append(
                f"| {row['policy']}{_mark(row)} | {_fmt(row['final_acc'], row['final_acc_ci'])} "
                f"| {_fmt(row['p10_acc'], row['p10_acc_ci'])} "
                f"| {'never' if reached == math.inf else _fmt(reached, None, 2, 1 / 3600)} "
                f"| {row['target_reached']} "
                f"| {'never' if spent == math.inf else _fmt(spent, None, 2, 1e-6)} "
                f"| {_fmt(row['bytes_per_agent'], row['bytes_per_agent_ci'], 2, 1e-6)}{front} "
                f"| {_fmt(row['energy_per_agent'], row['energy_per_agent_ci'], 2)} "
                f"| {_fmt(row['score'], row['score_ci'], 2)} "
                f"| {_fmt(row.get('diff_vs_best'), row.get('diff_vs_best_ci'), 1, 100)} "
                f"| {_fmt(row.get('p_holm'), None, 3)} "
                f"| {_fmt(row.get('p_level_holm'), None, 3)} "
                f"| {verdict if isinstance(verdict, str) else ''} "
                f"| {row.get('seeds_needed', '')} |"
            )
        lines += [*_column_notes(board[board["column"] == column["key"]]), ""]
    for plot in plots:
        lines += [f"![accuracy over time]({plot})", ""]
    for plot in comm:
        lines += [f"![accuracy over bytes and the accuracy-bytes Pareto front]({plot})", ""]
    lines += ["## Scenarios", "", "| scenario | version | world | provenance | why in the set "
              "| this scale |", "|---|---|---|---|---|---|"]
    for name, about in plan["scenarios"].items():
        lines.append(f"| `{name}` | {about['version']} | {about['title']} | "
                     f"{about['provenance']} | {about['why']} | {about['scale_note']} |")
    lines += ["", "## Links", "", "| link | what it is |", "|---|---|"]
    lines += [f"| {v['label']} | {v['about']} |" for v in plan["links"].values()]
    lines += ["", "## Policies' own settings (their papers' values, every world)", "",
              "| policy | settings | source |", "|---|---|---|"]
    for policy, about in plan["policies"].items():
        settings = ", ".join(f"`{k} = {v}`" for k, v in about["settings"].items()) or "none"
        lines.append(f"| {policy} | {settings} | {about['source'] or 'no own settings'} |")
    lines += ["", METRICS, ""]
    return "\n".join(lines)


METRICS = """## Metrics

* **final acc**: the agents' mean test accuracy (`acc_mean`) at the run's last evaluation.
* **10th-pct agent acc**: the accuracy 90 % of the agents reach or beat at the last
  evaluation (`acc_p10`): who is left behind.
* **time to target**: simulated hours to the first evaluation where the mean accuracy reaches
  90 % of central FedAvg's final accuracy on the same seed (at the ideal link: central FedAvg
  ignores the link); *reached* counts the seeds that got there (of those with central
  FedAvg's run), and the time is the median over every one of them with a seed that never
  got there counted as never (the Kaplan-Meier median of runs of equal length): "never" when
  half or more did not reach it. A mean over the seeds that reached it would hide the others.
* **MB on air / agent**: the bytes the agents sent, summed over the run and divided by the
  agents. With a link model, what was put on the air (finished or not); at the ideal link,
  counted, not limited: every model message the policy sent (one per receiver) x one
  model's bytes (`link.params` x `link.dtype` + `link.overhead_bytes`), none cut or lost.
  Uploads to a server count (central FedAvg, MoFeL), downloads from it do not (the server
  is not an agent; they are `bytes_received`). ◆ = on the world's Pareto front of mean
  final accuracy (higher) and mean MB per agent (lower): no other policy of the world is
  at least as accurate for no more bytes, and better in one (the figures per world draw
  it).
* **MB to target / agent**: the MB per agent sent by the evaluation that reached the
  target of *time to target*, with the same median over every seed (never counted as
  never).
* **energy J / agent**: radio + training + flight energy, summed over the run and divided
  by the agents; only a link model accounts it (it needs a rate), so it is n/a at the ideal
  link.
* **score**: (final acc − local's) / (central FedAvg's − local's), seed by seed, then mean
  and interval; local and central FedAvg of the column's ideal-link twin where they cannot
  run (central FedAvg ignores the link and is refused with 802.11p). Given only where central
  FedAvg − local stands clear of the noise (the lower bound of its 95 % interval above 0.05
  accuracy); elsewhere n/a with the reason under the world's table, since a score divided by
  a gap within the noise mostly measures that noise.
* **vs best**: the paired difference in final accuracy (percentage points) against the
  column's best policy, seed by seed. **p (Holm)**: the two-sided paired t-test's p (Student
  t over the seeds: with 5 seeds a Wilcoxon signed-rank test can never reach p < 0.05),
  adjusted by Holm's method over every pair of policies in the column (the best is chosen
  among them, so testing only against it would test on the seeds it was picked on). A
  difference identical on every seed has no spread for a t-test: it gets the exact sign-flip
  test (p = 2 / 2^n, 0.0625 for 5 seeds), not p = 0. **level p**: the equivalence test
  (TOST, two one-sided paired t-tests) that the difference is within ± 2 pp, Holm-adjusted
  the same way. **verdict**: worse (p (Holm) < 0.05), level (level p < 0.05) or undecided.
  Not rejecting a difference is not showing the policies level: with 5 seeds the paired
  t-test detects, at 80 % power, only differences of about 1.7 standard deviations of the
  seed-to-seed difference (each world's note gives it in pp).
* **seeds for ± 2 pp**: the seeds this cell would need for its final accuracy's 95 %
  interval to be ± 2 pp at the spread seen (10 means 10 or more)."""


def heatmap(plan: dict[str, Any], board: pd.DataFrame, path: Path) -> Path:
    """Policy x world score heat-map; refused or missing cells grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(plan["policies"])
    cols = plan["columns"]
    values = np.full((len(policies), len(cols)), np.nan)
    for i, policy in enumerate(policies):
        for j, column in enumerate(cols):
            hit = board[(board["column"] == column["key"]) & (board["policy"] == policy)]
            if not hit.empty and "score" in hit and hit.iloc[0]["status"] in ("ok", "partial"):
                values[i, j] = float(hit.iloc[0]["score"])
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(cols), 1.2 + 0.42 * len(policies)))
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")
    finite = values[np.isfinite(values)]
    low = min(0.0, float(finite.min())) if finite.size else 0.0
    high = max(1.0, float(finite.max())) if finite.size else 1.0
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=low, vmax=high,
                      aspect="auto")
    for i in range(len(policies)):
        for j in range(len(cols)):
            text = "n/a" if not np.isfinite(values[i, j]) else f"{values[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if not np.isfinite(values[i, j]) or values[i, j] > 0.5
                    else "white")
    ax.set_xticks(range(len(cols)), [c["label"] for c in cols], rotation=60, ha="right",
                  fontsize=7)
    ax.set_yticks(range(len(policies)), policies, fontsize=8)
    fig.colorbar(image, ax=ax, label="score (0 = local, 1 = central FedAvg)")
    ax.set_title(f"MobiDFL benchmark ({plan['scale']}, {len(plan['seeds'])} seeds)")
    _tight(fig)
    write_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def _figure_worlds(plan: dict[str, Any], plt: Any) -> tuple[
        dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The plan's columns grouped by world and one colour per policy.

    A world is a scenario and its variant (one figure each, a panel per link); the colours
    are the same in every figure of a bench.
    """
    worlds: dict[str, list[dict[str, Any]]] = {}
    for column in plan["columns"]:
        name = column["scenario"] + (f"-{column['variant']}" if column["variant"] else "")
        worlds.setdefault(name, []).append(column)
    colours = {p: plt.get_cmap("tab20")(i % 20) for i, p in enumerate(plan["policies"])}
    return worlds, colours


def accuracy_plots(plan: dict[str, Any], curves: pd.DataFrame, out: Path) -> list[Path]:
    """One figure per world (scenario and axis value).

    Mean accuracy over simulated hours, one line per policy, one panel per link.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds, colours = _figure_worlds(plan, plt)
    paths = []
    for name, cols in worlds.items():
        fig, axes = plt.subplots(1, len(cols), figsize=(5.0 * len(cols), 3.6), sharey=True,
                                 squeeze=False)
        for ax, column in zip(axes[0], cols, strict=True):
            mine = curves[curves["column"] == column["key"]] if not curves.empty else curves
            for policy in plan["policies"]:
                lines = mine[mine["policy"] == policy] if not mine.empty else mine
                if lines.empty:
                    continue
                mean = lines.groupby("time_s")["acc_mean"].mean()
                ax.plot(mean.index / 3600.0, mean.to_numpy(), label=policy,
                        color=colours[policy], lw=1.2)
            ax.set_title(column["label"], fontsize=9)
            ax.set_xlabel("simulated time (h)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("mean accuracy (mean over seeds)")
        _one_legend(fig, axes[0], right=0.85)
        path = out / f"accuracy_{safe_name(name)}.png"
        write_figure(fig, path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def comm_plots(plan: dict[str, Any], board: pd.DataFrame, curves: pd.DataFrame,
               out: Path) -> list[Path]:
    """One figure per world whose runs counted bytes.

    Per column (link), mean accuracy over the MB per agent sent so far (top), and each policy's mean
    final accuracy against its mean MB per agent with the Pareto front
    (:func:`mobidfl.analysis.comm.pareto_front`) joined and ringed (bottom).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean = accuracy_over_bytes(curves)
    worlds, colours = _figure_worlds(plan, plt)
    done = board[board["status"].isin(["ok", "partial"])] if "status" in board else board
    paths = []
    for name, cols in worlds.items():
        cells = done[done["column"].isin([c["key"] for c in cols])] if not done.empty else done
        if cells.empty or not np.isfinite(cells["bytes_per_agent"].astype(float)).any():
            continue  # no bytes counted (runs made before the ideal link counted them)
        fig, axes = plt.subplots(2, len(cols), figsize=(5.0 * len(cols), 7.0), squeeze=False)
        for k, column in enumerate(cols):
            top, bottom = axes[0][k], axes[1][k]
            lines = mean[mean["column"] == column["key"]]
            for policy, curve in lines.groupby("policy", sort=False):
                top.plot(curve[PER_AGENT] / 1e6, curve["acc_mean"], label=policy,
                         color=colours.get(policy), lw=1.2)
            mine = cells[cells["column"] == column["key"]]
            mine = mine[np.isfinite(mine["bytes_per_agent"].astype(float))
                        & np.isfinite(mine["final_acc"].astype(float))]
            for _, row in mine.iterrows():
                bottom.scatter(row["bytes_per_agent"] / 1e6, row["final_acc"], s=30,
                               color=colours.get(row["policy"]), label=row["policy"], zorder=3)
            front = mine[mine["pareto"] == True].sort_values("bytes_per_agent")  # noqa: E712 - an element-wise pandas mask
            if not front.empty:
                bottom.step(front["bytes_per_agent"] / 1e6, front["final_acc"], where="post",
                            color="black", lw=0.8, zorder=2, label="Pareto front")
                bottom.scatter(front["bytes_per_agent"] / 1e6, front["final_acc"], s=110,
                               facecolors="none", edgecolors="black", zorder=4)
            for ax in (top, bottom):
                ax.set_xscale("symlog", linthresh=0.1)  # local sends 0 B; others span decades
                ax.set_xlabel("MB sent per agent (symlog below 0.1)")
                ax.grid(alpha=0.3)
            top.set_title(column["label"], fontsize=9)
            top.set_ylabel("mean accuracy (mean over seeds)")
            bottom.set_ylabel("final mean accuracy (mean over seeds)")
        _one_legend(fig, [*axes[1], *axes[0]], right=0.82)
        path = out / f"comm_{safe_name(name)}.png"
        write_figure(fig, path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _one_legend(fig: Any, axes: Sequence[Any], *, right: float) -> None:
    """One legend at the figure's right for all ``axes``, the plots laid out left of ``right``.

    Each label once, first seen first.
    """
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="center right", fontsize=7)
    _tight(fig, rect=(0, 0, right, 1))


def _tight(fig: Any, **options: Any) -> None:
    """``fig.tight_layout(**options)`` without matplotlib's warning when it cannot apply it.

    WHY: a figure with many worlds or policies may have labels too long to fit; matplotlib
    then keeps the layout as it is and warns, a library line the bench must not print (the
    figure is written all the same).
    """
    with warnings.catch_warnings():
        # only matplotlib runs here; its warning names this line, not matplotlib's module
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(**options)


def write_report(out: str | Path) -> list[Path]:
    """Leaderboard (.md, .csv), heat-map, accuracy and communication plots of a bench folder."""
    out = Path(out)
    plan, runs, curves = load_results(out)
    board = leaderboard(plan, runs)
    csv = out / "leaderboard.csv"
    write_text_atomic(csv, board.to_csv(index=False))
    heat = heatmap(plan, board, out / "heatmap.png")
    plots = accuracy_plots(plan, curves, out)
    comm = comm_plots(plan, board, curves, out)
    md = out / "leaderboard.md"
    write_text_atomic(md, markdown(plan, board, heatmap=heat.name,
                                   plots=[p.name for p in plots],
                                   comm=[p.name for p in comm]) + "\n")
    return [md, csv, heat, *plots, *comm, out / PLAN]


# --- the command ------------------------------------------------------------------------
def add_bench_parser(sub: Any) -> None:
    """Register ``mobidfl bench`` on the CLI's subparsers."""
    bench = sub.add_parser(
        "bench", help="every policy on the standard scenarios: leaderboard, heat-map, plots")
    bench.add_argument("--out", help="output folder (resumable: run the same command again "
                       "after a kill); required unless --describe")
    bench.add_argument("--study", metavar="NAME", help="a controlled study instead of the "
                       "paper worlds: one base world, one factor per column ("
                       + ", ".join(study_names()) + ")")
    bench.add_argument("--tune", choices=["recipe", "policies"], help="with --study: run "
                       "the study's declared [tuning] on its tuning seeds: recipe (the lr "
                       "grid on central_fedavg) or policies (each policy's knob, then the "
                       "chosen and the paper's value on the results seeds --first-seed ..)")
    bench.add_argument("--describe", metavar="WORLD", help="print the regime descriptors of "
                       "WORLD (a scenario, a study, or a TOML file of settings) without "
                       "training, and exit")
    bench.add_argument("--rule", metavar="FILE", help="with --describe: a regime_rule.json "
                       "(e.g. published/benchmark/mobility_skew/regime_rule.json); adds the "
                       "policy it predicts for each world")
    bench.add_argument("--scenarios", metavar="A,B", help="scenarios (default: all; "
                       + ", ".join(scenario_names()) + ")")
    bench.add_argument("--policies", metavar="A,B", default="all", help="registered policies "
                       "(default all: every built-in and entry-point plug-in; with a "
                       "pre-registered --study, 'declared': the arms its [design] names)")
    bench.add_argument("--pilot", action="store_true", help="with a pre-registered --study: "
                       "run its declared pilot (pilot worlds and seeds of [design.seeds]), "
                       "whose spread sizes the results run's seeds")
    bench.add_argument("--links", metavar="A,B", help="links (default all: "
                       + ", ".join(link_axis()) + ")")
    bench.add_argument("--seeds", type=int, default=5, help="seeds per cell (default 5)")
    bench.add_argument("--first-seed", type=int, default=0)
    bench.add_argument("--until-half-width", type=float, metavar="H", help="then add seeds "
                       "world by world (all its policies together) until every cell's 95 %% "
                       "half-width of final accuracy is <= H (e.g. 0.02) or --max-seeds")
    bench.add_argument("--max-seeds", type=int, help="with "
                       f"--until-half-width: seeds per world at most (default {MAX_SEEDS})")
    bench.add_argument("--scale", default="small", choices=["ci", "small", "full"],
                       help="ci (tiny, for tests), small (the CPU table), full (the papers' "
                       "models and sizes, for a GPU with --batch-runs --device cuda)")
    bench.add_argument("--backend", default="local", help="local (processes) or ray")
    bench.add_argument("--address", help="Ray cluster: auto or ray://HOST:PORT")
    bench.add_argument("--processes", type=int,
                       help="local worker processes (default: free cores; 0 = this process)")
    bench.add_argument("--cpus-per-run", type=float,
                       help="with --backend ray: CPUs per run (default 1)")
    bench.add_argument("--gpus-per-run", type=float,
                       help="with --backend ray: GPUs per run (default 0)")
    bench.add_argument("--batch-runs", action="store_true", help="run all runs in this "
                       "process, those sharing net, data and learning settings as one program")
    bench.add_argument("--device", choices=["cpu", "cuda"], help="where the learning runs "
                       "(cuda: the batched backend on the GPU)")
    bench.add_argument("--retry-errors", action="store_true", help="re-run runs that raised")
    bench.add_argument("--report-only", action="store_true",
                       help="rewrite the report from the runs already in --out")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)


def _list(text: str | None) -> list[str] | None:
    """A comma list; given but naming nothing (``,``) is ``[]``, refused by run_bench."""
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]


def bench_command(args: argparse.Namespace) -> str:
    """The command line of this bench (what resumes it), for the manifest and leaderboard.

    Every option given is in it (tests/test_input_checks_53a.py sets each one): a recorded
    command that drops one does not repeat the bench.
    """
    import shlex

    parts = ["mobidfl", "bench", "--out", str(args.out), "--scale", args.scale,
             "--seeds", str(args.seeds), "--policies", args.policies]
    for flag, value in (("--study", args.study), ("--tune", args.tune),
                        ("--describe", getattr(args, "describe", None)),
                        ("--rule", getattr(args, "rule", None)),
                        ("--scenarios", args.scenarios),
                        ("--links", args.links),
                        ("--first-seed", args.first_seed or None),
                        ("--until-half-width", args.until_half_width),
                        ("--max-seeds", args.max_seeds),
                        ("--backend", None if args.backend == "local" else args.backend),
                        ("--address", args.address), ("--processes", args.processes),
                        ("--cpus-per-run", args.cpus_per_run),
                        ("--gpus-per-run", args.gpus_per_run),
                        ("--device", args.device)):
        if value is not None:
            parts += [flag, str(value)]
    for flag, on in (("--batch-runs", args.batch_runs), ("--pilot", getattr(args, "pilot", False)),
                     ("--retry-errors", getattr(args, "retry_errors", False)),
                     ("--report-only", getattr(args, "report_only", False)),
                     ("--quiet", getattr(args, "quiet", False))):
        if on:
            parts.append(flag)
    return " ".join(shlex.quote(p) for p in parts)


TUNE_RUNS_HERE = "not with --tune (it runs on this machine's processes)"


def check_option_pairs(args: argparse.Namespace) -> None:
    """Refuse an option given where it does nothing, before anything is read or written.

    WHY: an option silently ignored (``--max-seeds`` without ``--until-half-width``,
    ``--cpus-per-run`` on the local backend, ``--out`` with ``--describe``) gives a bench
    other than the one asked for, and is dropped from the recorded command.
    """
    given = {flag: value for flag, value in (
        ("--out", args.out), ("--study", args.study), ("--tune", args.tune),
        ("--scenarios", args.scenarios), ("--links", args.links),
        ("--pilot", "on" if args.pilot else None),
        ("--until-half-width", args.until_half_width), ("--max-seeds", args.max_seeds),
        ("--backend", None if args.backend == "local" else args.backend),
        ("--address", args.address), ("--processes", args.processes),
        ("--cpus-per-run", args.cpus_per_run), ("--gpus-per-run", args.gpus_per_run),
        ("--batch-runs", "on" if args.batch_runs else None), ("--device", args.device),
        ("--retry-errors", "on" if args.retry_errors else None),
        ("--report-only", "on" if args.report_only else None), ("--rule", args.rule),
    ) if value is not None}
    if args.describe is not None:
        for flag, value in given.items():
            if flag != "--rule":
                raise ConfigError(flag, value, "not with --describe (it only prints "
                                  "descriptors: --scale, --seeds, --first-seed and --rule apply)")
        return
    needs = (
        ("--rule", False, "only with --describe"),  # with --describe: returned above
        ("--max-seeds", "--until-half-width" in given, "only with --until-half-width (the "
         "most seeds it may add up to)"),
        ("--address", args.backend == "ray", "only with --backend ray"),
        ("--cpus-per-run", args.backend == "ray", "only with --backend ray (Ray's resources "
         "per run)"),
        ("--gpus-per-run", args.backend == "ray", "only with --backend ray (Ray's resources "
         "per run)"),
        ("--processes", args.backend != "ray" and not args.batch_runs, "only with the local "
         "backend without --batch-runs (its worker processes)"),
        ("--pilot", args.study is not None, "with --study (a study's declared pilot)"),
        ("--retry-errors", not args.report_only, "not with --report-only (it runs nothing)"),
    )
    for flag, ok, allowed in needs:
        if flag in given and not ok:
            raise ConfigError(flag, given[flag], allowed)
    if args.tune is not None:
        for flag in ("--scenarios", "--links", "--backend", "--batch-runs", "--device",
                     "--pilot", "--until-half-width", "--max-seeds", "--address",
                     "--cpus-per-run", "--gpus-per-run", "--retry-errors", "--report-only"):
            if flag in given:
                raise ConfigError(flag, given[flag], TUNE_RUNS_HERE)


def _saved(out: Path) -> str:
    """How many of the bench's runs are saved (best effort: for a line after a failure)."""
    from mobidfl.analysis.sweep import run_path

    try:
        cells = read_plan(out)["cells"]
        runs = [(out / c["folder"], r) for c in cells for r in c["runs"]]
        done = sum(run_path(folder, run_id).exists() for folder, run_id in runs)
        return f"{done} of {len(runs)} runs are saved in {out}"
    except (OSError, BenchDamaged):
        return f"the finished runs are saved in {out}"


def cmd_bench(args: argparse.Namespace) -> int:
    """``mobidfl bench``: run a benchmark, or describe, tune or report one; the exit code."""
    from mobidfl.analysis.folders import OutputFailed, check_output_folder
    from mobidfl.analysis.sweep import SweepStopped

    check_option_pairs(args)
    if args.describe is not None:
        print(describe_table(args.describe, scale=args.scale, seed=args.first_seed,
                             seeds=args.seeds, rule=args.rule))
        print(f"\n(mean over seeds {args.first_seed}-{args.first_seed + args.seeds - 1}: "
              "the bench's --first-seed and --seeds, as its descriptors.csv)")
        return 0
    if args.rule is not None:
        raise ConfigError("--rule", args.rule, "only with --describe")
    if args.out is None:
        raise ConfigError("--out", None, "an output folder (required unless --describe)")
    out = Path(args.out)
    command = bench_command(args)
    if args.tune is not None:  # analysis/tuning.py runs it (it builds on this module)
        raise ConfigError("--tune", args.tune, "through `mobidfl bench` (the CLI hands "
                          "--tune to mobidfl.analysis.tuning.cmd_tune)")
    if args.report_only:
        if not (out / PLAN).is_file():
            raise ConfigError("--out", str(out), f"a bench folder with {PLAN}")
        try:
            check_bench_folder(out)
        except BenchDamaged as exc:
            again = read_plan(out)["command"] if exc.path.name != PLAN else ""
            raise ConfigError(
                "bench file", str(exc.path), f"a whole file of the bench ({exc.why}); resume "
                f"the bench to repair it: {again or 'the same mobidfl bench command'}",
            ) from None
        check_output_folder(out)
        try:
            paths = write_report(out)
        except OSError as exc:
            raise OutputFailed(f"could not write {exc.filename or out} ({exc.strerror or exc})"
                               f"; the runs in {out} are untouched; free the disk, then run "
                               "again with --report-only") from None
    else:
        if args.address and args.backend != "ray":
            raise ConfigError("--address", args.address, "only with --backend ray")
        for flag, text, names in (("--scenarios", args.scenarios, scenario_names()),
                                  ("--links", args.links, list(link_axis()))):
            if text is not None and not _list(text):
                raise ConfigError(flag, text, "at least one of " + ", ".join(names))
        import torch

        torch.set_num_threads(1)
        started = time.perf_counter()
        try:
            paths = run_bench(
                out=out, scenarios=_list(args.scenarios), study=args.study,
                policies=args.policies,
                seeds=args.seeds, first_seed=args.first_seed, scale=args.scale,
                links=_list(args.links), backend=args.backend, processes=args.processes,
                address=args.address,
                cpus_per_run=1.0 if args.cpus_per_run is None else args.cpus_per_run,
                gpus_per_run=0.0 if args.gpus_per_run is None else args.gpus_per_run,
                batch_runs=args.batch_runs,
                device=args.device, retry_errors=args.retry_errors,
                until_half_width=args.until_half_width,
                max_seeds=MAX_SEEDS if args.max_seeds is None else args.max_seeds,
                pilot=args.pilot, progress=not args.quiet, command=command,
                say=lambda line: print(line, file=sys.stderr),
            )
        except KeyboardInterrupt:
            print(f"mobidfl: interrupted: {_saved(out)}; resume with: {command}",
                  file=sys.stderr)
            return 130
        except (SweepStopped, OSError) as exc:  # a failed write (full disk), Ray head gone
            why = str(exc) if isinstance(exc, SweepStopped) else \
                f"could not write {exc.filename or out} ({exc.strerror or exc})"
            raise OutputFailed(f"{why}; {_saved(out)}; resume with: {command}") from None
        print(f"wrote {out} in {time.perf_counter() - started:.1f} s")
    for path in paths:
        print(path)
    board = pd.read_csv(out / "leaderboard.csv")
    bad = board[board["status"].isin(["error", "pending"])]
    if not bad.empty:
        print(f"mobidfl: warning: {len(bad)} cell(s) without a finished run: see "
              f"{out / 'leaderboard.md'}", file=sys.stderr)
        return 1
    return 0
