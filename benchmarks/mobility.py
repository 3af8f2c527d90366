"""Mobility + contact detection speed: MobiDFL's vectorised step vs a naive reference.

10,000 vehicles, Manhattan mobility, ``during`` contacts, 120 s steps, R = 100 m, on the
bundled Upper West Side map and on a generated 100 x 100 street grid. The naive reference
is what a straightforward simulator does: 1-second sub-steps, a per-agent Python loop to
move each car, and an N x N distance matrix per sub-step. It is timed on a few sub-steps
and scaled to the 120 sub-steps of one step (its cost per sub-step is constant).

Usage: python benchmarks/mobility.py [--agents 10000] [--steps 3] [--naive-substeps 2]
Prints seconds per step for both and their ratio; the last line has both figures.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from mobidfl.model.world import MobiDFLModel

torch.set_num_threads(1)


def naive_step_seconds(model: MobiDFLModel, *, substeps: int) -> float:
    """Time ``substeps`` 1-second sub-steps of the naive reference, scaled to one step."""
    kind, members, mobility = model.groups[0]
    net = mobility.network
    table = mobility.tables[0]
    edge, offset = mobility.edge.copy(), mobility.offset.copy()
    speed = float(model.config.kind(kind).speed)
    rng = np.random.default_rng(0)
    r2 = model.config.radius_m**2
    met = np.zeros((len(edge), len(edge)), bool)
    start = time.perf_counter()
    for _ in range(substeps):
        xy = np.empty((len(edge), 2))
        for i in range(len(edge)):  # per-agent Python loop
            remaining = speed
            while remaining > net.edge_len[edge[i]] - offset[i]:
                remaining -= net.edge_len[edge[i]] - offset[i]
                span = slice(table.ptr[edge[i]], table.ptr[edge[i] + 1])
                edge[i] = rng.choice(table.nxt[span], p=table.prob[span])
                offset[i] = 0.0
            offset[i] += remaining
            xy[i] = net.xy(edge[i : i + 1], offset[i : i + 1])[0]
        d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1)  # N x N
        met |= d2 <= r2
    per_substep = (time.perf_counter() - start) / substeps
    return per_substep * model.config.step_s


def fast_step_seconds(model: MobiDFLModel, *, steps: int) -> tuple[float, float]:
    model.step()  # warm-up (turn tables, caches)
    start = time.perf_counter()
    for _ in range(steps):
        model.step()
    return (time.perf_counter() - start) / steps, float(model.neighbours_now.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--naive-substeps", type=int, default=2)
    args = parser.parse_args()
    figures = []
    for label, map_spec in (("bundled nyc_uws", "nyc_uws"), ("grid 100x100", "grid:100x100")):
        t0 = time.perf_counter()
        model = MobiDFLModel(
            map=map_spec, vehicles=args.agents, learning=False, steps=1000, record_every=1000
        )
        setup = time.perf_counter() - t0
        fast, neighbours = fast_step_seconds(model, steps=args.steps)
        naive = naive_step_seconds(model, substeps=args.naive_substeps)
        figures.append((label, fast, naive))
        print(
            f"{label:16s} N={args.agents}: set-up {setup:6.2f} s | MobiDFL {fast:7.3f} s/step "
            f"({neighbours:.1f} neighbours/agent) | naive {naive:8.1f} s/step | "
            f"speed-up {naive / fast:7.1f}x"
        )
    print(
        "RESULT "
        + " ; ".join(
            f"{label}: {fast:.3f} s/step, {naive / fast:.0f}x naive"
            for label, fast, naive in figures
        )
    )


if __name__ == "__main__":
    main()
