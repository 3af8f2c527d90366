"""Running a bench: the options checked, the worlds and cells chosen, the runs run and resumed.

:func:`run_bench` is ``mobidfl bench`` without its command line: it checks every option
before a folder is touched, plans the cells' runs (:mod:`mobidfl.analysis.runner`), runs
what is left (adding seeds with ``until_half_width``), then writes the descriptors, the
plan and the report.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mobidfl.analysis.bench_describe import write_descriptors
from mobidfl.analysis.bench_page import write_report
from mobidfl.analysis.bench_plan import PLAN, check_same_bench, grown_before, read_plan, write_plan
from mobidfl.analysis.bench_results import load_results
from mobidfl.analysis.bench_scenarios import (
    Cell,
    Column,
    build_cells,
    check_columns,
    check_scenario,
    columns,
    link_axis,
    policy_names,
    scenario_names,
)
from mobidfl.analysis.bench_stats import (
    MAX_SEEDS,
    seeds_for_column,
)
from mobidfl.analysis.runner import (
    BenchDamaged,
    open_cells,
    plan_runs,
    quiet,
    repair_cells,
    run_recorded,
)
from mobidfl.analysis.stats import sample_std
from mobidfl.analysis.study import load_study
from mobidfl.cores import (
    source_state,
)
from mobidfl.errors import ConfigError


def _unique(names: Sequence[str]) -> list[str]:
    """``names`` without blanks and repeats, in their order (``a,,a`` is ``a``)."""
    return list(dict.fromkeys(n.strip() for n in names if n.strip()))


def check_flags(*, backend: str, batch_runs: bool, seeds: int, first_seed: int,
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

    check_flags(backend=backend, batch_runs=batch_runs, seeds=seeds, first_seed=first_seed,
                processes=processes, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
                device=device, until_half_width=until_half_width, max_seeds=max_seeds)
    names = _check_world_options(scenarios=scenarios, study=study, links=links, pilot=pilot)
    the_study = load_study(study) if study is not None else None
    if the_study is not None and the_study.design and policies in ("declared", ["declared"]):
        policies = declared_policies(the_study)
    chosen = policy_names(policies)
    cols, readings, first_seed, seeds = _bench_columns(
        the_study, names, scale=scale, links=links, pilot=pilot, seeds=seeds,
        first_seed=first_seed)
    check_columns(cols)  # a study's worlds too: map, memory, values (one line naming it)
    cells = build_cells(cols, chosen, readings=readings)
    source = source_state()  # the code this session starts from (recorded before any run)
    _check_clean_tree(study, the_study, scale=scale, source=source)
    extra: dict[str, Any] = {} if device is None else {
        "device": device, "backend": "batched" if device == "cuda" else "loop"}
    seed_list = list(range(first_seed, first_seed + seeds))
    out = Path(out)
    column_seeds = {c.key: seed_list for c in cols}
    if until_half_width is not None:
        column_seeds = grown_before(out, column_seeds)
    plan = plan_runs(cells, column_seeds, extra=extra)
    _refuse_all_refused(cells, chosen, plan)
    check_output_folder(out)
    check_same_bench(out, cells, plan)  # before any file is written or repaired
    out.mkdir(parents=True, exist_ok=True)
    _repair_runs(out, cells, plan, say=say)
    started = datetime.now(UTC)
    clock = time.perf_counter()
    adaptive = None if until_half_width is None else {
        "half_width": until_half_width, "max_seeds": max_seeds}
    while True:
        run_plan(out, cells=cells, cols=cols, chosen=chosen, plan=plan, seed_list=seed_list,
                 scale=scale, command=command, started=started, backend=backend,
                 source=source, readings=readings,
                 processes=processes, address=address, cpus=cpus_per_run, gpus=gpus_per_run,
                 batch_runs=batch_runs, retry_errors=retry_errors, progress=progress,
                 column_seeds=column_seeds, adaptive=adaptive)
        if until_half_width is None:
            break
        grown = _more_seeds(out, column_seeds, half_width=until_half_width, cap=max_seeds,
                            say=say)
        if grown == column_seeds:
            break
        column_seeds = grown
        plan = plan_runs(cells, column_seeds, extra=extra)
    write_descriptors(out, cols, seeds=seed_list)
    write_plan(out, cells=cells, cols=cols, policies=chosen, seeds=seed_list, scale=scale,
               command=command, started=started, wall_s=time.perf_counter() - clock,
               plan=plan, column_seeds=column_seeds, adaptive=adaptive, source=source,
               readings=readings)
    return write_report(out)


def _check_world_options(*, scenarios: Sequence[str] | None, study: str | None,
                         links: Sequence[str] | None, pilot: bool) -> list[str]:
    """The scenarios asked for, after refusing options that cannot go together."""
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
    return names


def _bench_columns(the_study: Any, names: Sequence[str], *, scale: str,
                   links: Sequence[str] | None, pilot: bool, seeds: int, first_seed: int
                   ) -> tuple[list[Column], dict[str, dict[str, Any]], int, int]:
    """``(columns, the study's policy readings, first seed, seeds)`` of a study or scenarios.

    A study's pilot brings its own seeds; scenario files are each checked whole first.
    """
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
    return list(cols), readings, first_seed, seeds


def _check_clean_tree(study: str | None, the_study: Any, *, scale: str,
                      source: Mapping[str, Any]) -> None:
    """A study pre-registered against a commit runs from a clean tree (not at ``ci``)."""
    if study is not None and the_study.design.get("clean_tree") and scale != "ci" \
            and source["dirty"]:
        raise ConfigError("--study", study, "a clean git tree (its [design] is "
                          "pre-registered against a commit: commit or stash the changes first)")


def _refuse_all_refused(cells: Sequence[Cell], chosen: Sequence[str],
                        plan: Mapping[str, Any]) -> None:
    """Every pair refused: nothing would run, and an empty table would say ok."""
    if not plan:
        reasons = sorted({cell.refusal for cell in cells})
        raise ConfigError("--policies", ",".join(chosen),
                          "at least one policy that can run on the chosen worlds (every pair "
                          f"is refused: {reasons[0]})")


def _more_seeds(out: Path, column_seeds: dict[str, list[int]], *, half_width: float, cap: int,
                say: Callable[[str], None] | None) -> dict[str, list[int]]:
    """Each column's seeds for the next round (:func:`_grow_seeds`), the seeds added said."""
    grown = _grow_seeds(out, column_seeds, half_width=half_width, cap=cap)
    if say is not None and grown != column_seeds:
        more = {k: len(v) for k, v in grown.items() if len(v) > len(column_seeds[k])}
        say(f"mobidfl: seeds added until the 95 % half-width is <= {half_width:g}: "
            + ", ".join(f"{k} -> {n}" for k, n in more.items()))
    return grown


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


def run_plan(out: Path, *, cells: Sequence[Cell], cols: Sequence[Column],
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
    write_plan(out, cells=cells, cols=cols, policies=chosen, seeds=seed_list, scale=scale,
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
