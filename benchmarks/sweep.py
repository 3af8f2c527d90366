"""Sweep throughput: 8 short runs on 1 vs 2 local processes, and local Ray vs processes.

Prints wall times and the ratios side by side (not a timed test):

* ``local x1`` vs ``local x2``: speed-up of two worker processes (target >= 1.7x on an
  otherwise idle 2-core machine);
* ``ray x2`` vs ``local x2``: Ray's overhead ratio, first with cold Ray workers (they import
  torch and the model on their first task, as a real first sweep does) and then warm.

Worker start-up is reported apart: the local pool's fork server imports torch and the model
once per process (``warm-up``); ``ray.init`` starts the local Ray instance. The 1-minute
load average is printed with each row, and a "machine ceiling" (two pure-Python busy loops
on 2 processes vs 1, measured before and after): other processes on the machine cap what
the parallel rows can show.

Run: ``python benchmarks/sweep.py [--runs 8] [--steps 30] [--vehicles 20] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from mobidfl.analysis.sweep import Sweep, run_sweep


def make_sweep(*, runs: int, steps: int, vehicles: int) -> Sweep:
    """``runs`` runs: hm_fraction values x 2 seeds (random-walk cars, MLP, D-PSGD)."""
    points = max(1, runs // 2)
    return Sweep.from_dict(
        {
            "replicates": 2 if runs > 1 else 1,
            "base": {"vehicles": vehicles, "steps": steps, "local_steps": 2, "test_size": 200,
                     "vehicle": {"mobility": "random_walk"}},
            "grid": {"random_walk.hm_fraction": [round(0.1 * i, 2) for i in range(points)]},
        }
    )


def _spin(count: int) -> float:
    started, total = time.perf_counter(), 0
    for i in range(count):
        total += i
    return time.perf_counter() - started


def machine_ceiling(count: int = 15_000_000) -> float:
    """Speed-up of 2 processes over 1 on a pure-Python loop now: the most any 2-process row
    can show at this moment (about 2.0 on an idle 2-core machine)."""
    import multiprocessing

    one = _spin(count) + _spin(count)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        started = time.perf_counter()
        pool.map(_spin, [count, count])
        two = time.perf_counter() - started
    return one / two


def timed(sweep: Sweep, root: Path, name: str, **options) -> tuple[float, float]:
    """Wall time of the sweep and the sum of its runs' own wall times."""
    started = time.perf_counter()
    manifest = run_sweep(sweep, root / name, progress=False, **options)
    wall = time.perf_counter() - started
    assert (manifest["status"] == "ok").all(), manifest[["run_id", "status", "error"]]
    return wall, float(manifest["wall_s"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--vehicles", type=int, default=20)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sweep = make_sweep(runs=args.runs, steps=args.steps, vehicles=args.vehicles)
    root = Path(tempfile.mkdtemp(prefix="mobidfl-bench-sweep-"))
    rows: list[tuple[str, float, float, float]] = []

    def row(name: str, **options) -> float:
        wall, busy = timed(sweep, root, name, **options)
        rows.append((name, wall, busy, os.getloadavg()[0]))
        return wall

    ceiling_before = machine_ceiling()
    start = time.perf_counter()
    run_sweep(make_sweep(runs=1, steps=1, vehicles=4), root / "warm-up", processes=1,
              progress=False)
    warm_up = time.perf_counter() - start
    one = row("local x1", processes=1)
    two = row("local x2", processes=2)
    ray_cold = ray_warm = float("nan")
    ray_init = float("nan")
    if not args.no_ray:
        import ray

        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_init = time.perf_counter() - start
        try:
            ray_cold = row("ray x2 (cold)", backend="ray")
            ray_warm = row("ray x2 (warm)", backend="ray")
        finally:
            ray.shutdown()
    ceiling_after = machine_ceiling()
    print(f"{len(sweep.runs())} runs x {args.steps} steps, {args.vehicles} vehicles; "
          f"{os.cpu_count()} cores; local fork-server warm-up {warm_up:.1f} s; "
          f"ray.init {ray_init:.1f} s")
    print(f"{'backend':<15}{'wall s':>8}{'sum of runs s':>15}{'load avg':>10}")
    for name, wall, busy, load in rows:
        print(f"{name:<15}{wall:>8.1f}{busy:>15.1f}{load:>10.1f}")
    print(f"speed-up local x2 / x1: {one / two:.2f}x (target >= 1.7x); machine ceiling now "
          f"(2 busy loops / 1): {ceiling_before:.2f}x before, {ceiling_after:.2f}x after")
    if not args.no_ray:
        print(f"overhead ray / local x2: cold {ray_cold / two:.2f}x, warm {ray_warm / two:.2f}x")


if __name__ == "__main__":
    main()
