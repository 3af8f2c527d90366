"""SUMO-driven mobility + contacts per 120 s step vs ``manhattan`` on the same map.

100 / 1,000 / 10,000 vehicles on a generated Manhattan-style street grid (default
``grid:40x40``: 1,600 intersections, 6,240 one-lane directed streets of 100 m, 624 km of
lanes, so 10,000 cars are 16 per lane-km, one per 62 m), ``during`` contacts, R = 100 m,
learning off.
Both models run in this process, one after the other, timed over the same number of steps
after one warm-up step. Set-up (SUMO network conversion and randomTrips demand, both cached
under ``map_cache``; SUMO start and insertion) is printed separately.

Usage: python benchmarks/sumo.py [--map grid:40x40] [--counts 100 1000 10000] [--steps 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from mobidfl.model.world import MobiDFLModel

torch.set_num_threads(1)


def time_steps(model: MobiDFLModel, steps: int) -> tuple[float, float]:
    model.step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        model.step()
    return (time.perf_counter() - start) / steps, float(model.neighbours_now.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", default="grid:40x40")
    parser.add_argument("--counts", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--map-cache", default=None, help="default: a fresh temporary folder")
    args = parser.parse_args()
    cache = args.map_cache or tempfile.mkdtemp(prefix="mobidfl-bench-")
    rows = []
    for count in args.counts:
        common = dict(
            map=args.map, map_cache=cache, vehicles=count, pedestrians=0, sensors=0, uavs=0,
            learning=False, steps=10_000, record_every=10_000, contact="during",
            radius_m=100.0, step_s=120.0, seed=0,
        )
        result = {}
        for mobility in ("manhattan", "sumo"):
            t0 = time.perf_counter()
            model = MobiDFLModel(**common, **{"vehicle.mobility": mobility, "vehicle.speed": 13.89})
            setup = time.perf_counter() - t0
            per_step, neighbours = time_steps(model, args.steps)
            result[mobility] = (setup, per_step, neighbours)
            print(
                f"N={count:6d} {mobility:9s}: set-up {setup:7.2f} s | {per_step:7.3f} s/step "
                f"| {neighbours:6.2f} neighbours/agent",
                flush=True,
            )
            del model
        ratio = result["sumo"][1] / result["manhattan"][1]
        rows.append((count, result["manhattan"][1], result["sumo"][1], ratio))
        print(f"N={count:6d} sumo / manhattan per step: {ratio:6.1f}x", flush=True)
    print("\nvehicles | manhattan s/step | sumo s/step | sumo/manhattan")
    for count, man, sumo, ratio in rows:
        print(f"{count:8d} | {man:16.3f} | {sumo:11.3f} | {ratio:13.1f}x")
    print(
        "RESULT "
        + " ; ".join(
            f"N={c}: manhattan {m:.3f} s, sumo {s:.3f} s ({r:.1f}x)" for c, m, s, r in rows
        )
    )


if __name__ == "__main__":
    main()
