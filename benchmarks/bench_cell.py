"""A ``mobidfl bench`` cell costs no more than the same run through ``mobidfl run``.

Side by side in one process, alternating (A B A B ...) so that a change of machine load hits
both: one seed of one ``small`` cell

* **bench**: the cell's run as ``mobidfl bench`` executes it
  (:func:`mobidfl.analysis.sweep.execute_run` on the cell's run spec, the path of every bench
  worker), and
* **run**: the same settings written to a TOML file and run by ``mobidfl run --config FILE
  --out DIR --quiet`` in a fresh interpreter (what a user would type), timed wall and CPU
  (the child's user + system seconds), start-up of the interpreter included, and without it
  (the child's own ``wrote ... in X s``, measured from its start of work).

Prints the fp32 matmul peak of one thread (the yardstick) at the start and the end, the CPU
model, the load average at each timing, and each pair's ratio bench / run.

With ``--size A,B,...`` (cells as SCENARIO:LINK:POLICY) it instead prints the CPU seconds of
one run (seed 0) of each cell, in this process: the numbers the ``small`` scale was sized
with (docs/benchmark/index.md). The UAV scenario's last axis value (``dcm``) is used.

Run: ``python benchmarks/bench_cell.py [--cell static_sensors:ideal:dpsgd] [--repeats 3]``
or ``python benchmarks/bench_cell.py --size static_sensors:dsrc:dpsgd,uav_ferry:dsrc:dpsgd``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from machine import cpu_model, matmul_peak

from mobidfl.analysis import sweep
from mobidfl.analysis.bench import plan_runs
from mobidfl.analysis.bench_scenarios import build_cells, columns
from mobidfl.toml_text import toml_value

ROOT = Path(__file__).resolve().parent.parent


def size_cells(cells: str, scale: str) -> None:
    """CPU seconds of one run of each cell (``time.process_time``, in this process)."""
    peak = matmul_peak().wall
    print(f"CPU {cpu_model()}; load {os.getloadavg()}; matmul peak {peak:.1f} GFLOP/s")
    for item in cells.split(","):
        scenario, link, policy = item.split(":")
        column = columns([scenario], scale=scale, links=[link])[-1]
        cell = build_cells([column], [policy])[0]
        if cell.refusal:
            print(f"{item}: refused: {cell.refusal}")
            continue
        spec = plan_runs([cell], [0], extra={})[cell.key][0]
        c0, w0 = time.process_time(), time.perf_counter()
        result = sweep.execute_run(spec)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        final = result.table["acc_mean"].dropna().iloc[-1] if result.status == "ok" else None
        print(f"{item}: CPU {cpu:.1f} s, wall {wall:.1f} s, {result.status}, final acc {final}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cell", default="static_sensors:ideal:dpsgd",
                        help="SCENARIO:LINK:POLICY at the small scale")
    parser.add_argument("--scale", default="small")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", metavar="A,B", help="CPU seconds of one run of each cell")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.size:
        size_cells(args.size, args.scale)
        return
    scenario, link, policy = args.cell.split(":")
    column = columns([scenario], scale=args.scale, links=[link])[0]
    cell = build_cells([column], [policy])[0]
    if cell.refusal:
        raise SystemExit(f"{args.cell}: refused: {cell.refusal}")
    spec = plan_runs([cell], [0], extra={})[cell.key][0]
    print(f"cell {cell.key} at {args.scale}: {spec.steps} steps, seed 0")
    print(f"CPU {cpu_model()}, {os.cpu_count()} cores; matmul peak "
          f"{matmul_peak().wall:.1f} GFLOP/s (one thread)")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "cell.toml"
        lines = [f'"{k}" = {toml_value(v)}' for k, v in spec.settings.items() if v is not None]
        config.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        rows = []
        for repeat in range(args.repeats):
            load = os.getloadavg()[0]
            c0, w0 = time.process_time(), time.perf_counter()
            result = sweep.execute_run(spec)
            bench_wall, bench_cpu = time.perf_counter() - w0, time.process_time() - c0
            assert result.status == "ok", result.error
            out = Path(tmp) / f"run{repeat}"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "mobidfl.analysis.cli", "run", "--config", str(config),
                 "--set", "seed=0", "--out", str(out), "--quiet"],
                env=env, capture_output=True, text=True, check=True,
            )
            run_wall = time.perf_counter() - w0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            run_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            inner = re.search(r"wrote .* in ([0-9.]+) s", done.stdout)
            run_inner = float(inner.group(1)) if inner else float("nan")
            rows.append((repeat, load, bench_wall, bench_cpu, run_wall, run_cpu, run_inner))
            print(f"#{repeat} load {load:.1f}: bench {bench_wall:.2f} s wall / {bench_cpu:.2f} s "
                  f"CPU; mobidfl run {run_wall:.2f} s wall / {run_cpu:.2f} s CPU (its own work "
                  f"{run_inner:.2f} s); bench / run wall {bench_wall / run_wall:.2f}, CPU "
                  f"{bench_cpu / run_cpu:.2f}, vs its own work {bench_wall / run_inner:.2f}",
                  flush=True)
    best = min(rows, key=lambda r: r[2])
    best_run = min(rows, key=lambda r: r[4])
    best_inner = min(rows, key=lambda r: r[6])
    print(f"best of {args.repeats}: bench {best[2]:.2f} s, mobidfl run {best_run[4]:.2f} s "
          f"(own work {best_inner[6]:.2f} s): ratio {best[2] / best_run[4]:.2f} "
          f"({best[2] / best_inner[6]:.2f} against its own work)")
    print(f"matmul peak at the end {matmul_peak().wall:.1f} GFLOP/s; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
