"""``mobidfl bench`` on the command line: its options, their checks, and the command itself."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from mobidfl.analysis.bench_describe import describe_table
from mobidfl.analysis.bench_page import write_report
from mobidfl.analysis.bench_plan import PLAN, check_bench_folder, read_plan
from mobidfl.analysis.bench_run import run_bench
from mobidfl.analysis.bench_scenarios import (
    link_axis,
    scenario_names,
)
from mobidfl.analysis.bench_stats import (
    MAX_SEEDS,
)
from mobidfl.analysis.runner import (
    BenchDamaged,
)
from mobidfl.analysis.study import study_names
from mobidfl.errors import ConfigError


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
    # One add_argument per option, argparse's shape: each has its own help text.
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


def comma_list(text: str | None) -> list[str] | None:
    """A comma list; given but naming nothing (``,``) is ``[]``, refused by run_bench."""
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]


def bench_command(args: argparse.Namespace) -> str:
    """The command line of this bench (what resumes it), for the manifest and leaderboard.

    Every option given is in it (tests/analysis/test_input_checks_53a.py sets each one): a recorded
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


def out_and_command(args: argparse.Namespace) -> tuple[Path, str]:
    """A bench or tuning run's output folder and its command line (not a ``--describe``).

    Refuses ``--rule`` (it goes with ``--describe`` only) and a missing ``--out``, one line each.
    """
    if args.rule is not None:
        raise ConfigError("--rule", args.rule, "only with --describe")
    if args.out is None:
        raise ConfigError("--out", None, "an output folder (required unless --describe)")
    return Path(args.out), bench_command(args)


def cmd_bench(args: argparse.Namespace) -> int:
    """``mobidfl bench``: run a benchmark, or describe, tune or report one; the exit code."""
    from mobidfl.analysis.executors import SweepStopped
    from mobidfl.analysis.folders import OutputFailed, check_output_folder

    check_option_pairs(args)
    if args.describe is not None:
        print(describe_table(args.describe, scale=args.scale, seed=args.first_seed,
                             seeds=args.seeds, rule=args.rule))
        print(f"\n(mean over seeds {args.first_seed}-{args.first_seed + args.seeds - 1}: "
              "the bench's --first-seed and --seeds, as its descriptors.csv)")
        return 0
    out, command = out_and_command(args)
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
            if text is not None and not comma_list(text):
                raise ConfigError(flag, text, "at least one of " + ", ".join(names))
        import torch

        torch.set_num_threads(1)
        started = time.perf_counter()
        try:
            paths = run_bench(
                out=out, scenarios=comma_list(args.scenarios), study=args.study,
                policies=args.policies,
                seeds=args.seeds, first_seed=args.first_seed, scale=args.scale,
                links=comma_list(args.links), backend=args.backend, processes=args.processes,
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
