"""Training throughput of the learning engine (prints numbers; not a timed test).

Measures, in one run on this machine:

* the fp32 matmul peak of one thread (the yardstick);
* agent-steps/s and achieved GFLOP/s (FLOPs from ``flops_per_sample``: Conv2d/Linear
  multiply-adds x 2, forward + backward = 3 x forward) for the ``loop`` and ``batched``
  backends, ``mlp`` and ``cnn``, N agents;
* the loop backend with 2 worker processes against 1;
* last line: one full round for 100 agents with the CNN (train K=10, B=64, mix, evaluate).

Run: ``python benchmarks/training.py [--quick] [--sizes 20,100,500] [--batch 64]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
import torch
from machine import matmul_peak

from mobidfl.model.learning.data import load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.maths.mixing import dpsgd_weights


def overlapping_parts(n: int, n_train: int, per_agent: int, seed: int) -> list[np.ndarray]:
    """Random per-agent subsets (may overlap between agents: only timing matters here)."""
    rng = np.random.default_rng(seed)
    return [np.sort(rng.choice(n_train, per_agent, replace=False)) for _ in range(n)]


def geometric_graph(n: int, degree: float, seed: int) -> sp.csr_matrix:
    """Random contacts with about ``degree`` neighbours per agent."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < degree / max(n - 1, 1), k=1)
    return sp.csr_matrix(upper | upper.T)


def time_train(engine, repeats: int = 1) -> float:
    engine.train(mask=np.arange(engine.n_agents) < min(4, engine.n_agents))  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        engine.train()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--sizes", default="20,100,500", help="agent counts N")
    parser.add_argument("--nets", default="mlp,cnn")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2, help="local steps per timed call")
    args = parser.parse_args()
    sizes = [20, 100] if args.quick else [int(s) for s in args.sizes.split(",")]
    torch.set_num_threads(1)

    ds = load_dataset("mnist5k", root=None, test_size=500, seed=0)
    peak = matmul_peak().wall
    print(f"fp32 matmul peak, 1 thread: {peak:.1f} GFLOP/s")
    print(f"{'net':6} {'backend':8} {'N':>5} {'agent-steps/s':>14} {'GFLOP/s':>8} {'% peak':>7}")
    for net in args.nets.split(","):
        flops = flops_per_sample(build_net(net, ds.input_shape, 10), ds.input_shape)
        for n in sizes:
            parts = overlapping_parts(n, ds.n_train, 2 * args.batch, seed=n)
            for backend in ("loop", "batched"):
                eng = make_engine(
                    backend,
                    TrainingSettings(
                        net=net, lr=0.01, batch_size=args.batch, local_steps=args.steps, seed=0
                    ),
                    dataset=ds,
                    parts=parts,
                )
                dt = time_train(eng)
                steps = n * args.steps / dt
                gf = steps * args.batch * flops / 1e9
                print(f"{net:6} {backend:8} {n:5d} {steps:14.0f} {gf:8.1f} {100 * gf / peak:6.0f}%")
                del eng

    n_w = 20 if args.quick else 100
    parts = overlapping_parts(n_w, ds.n_train, 2 * args.batch, seed=1)
    for net in args.nets.split(","):
        times = {}
        for workers in (1, 2):
            training = TrainingSettings(net=net, lr=0.01, batch_size=args.batch,
                                        local_steps=args.steps, seed=0, workers=workers)
            eng = make_engine("loop", training, dataset=ds, parts=parts)
            times[workers] = time_train(eng)
            eng.close()
        print(
            f"loop {net} N={n_w}: workers=1 {times[1]:.2f} s, workers=2 {times[2]:.2f} s, "
            f"speed-up {times[1] / times[2]:.2f}x"
        )

    n_round = 100
    steps = 2 if args.quick else 10
    parts = overlapping_parts(n_round, ds.n_train, 2 * 64, seed=2)
    training = TrainingSettings(net="cnn", lr=0.01, batch_size=64, local_steps=steps, seed=0)
    eng = make_engine("loop", training, dataset=ds, parts=parts)
    w = dpsgd_weights(geometric_graph(n_round, 5.0, seed=0))
    eng.train(mask=np.arange(n_round) < 2)  # warm-up
    t0 = time.perf_counter()
    eng.train()
    t1 = time.perf_counter()
    eng.mix(w)
    t2 = time.perf_counter()
    eng.evaluate()
    t3 = time.perf_counter()
    print(
        f"full round, {n_round} agents, cnn, K={steps}, B=64, test 500, loop 1 worker: "
        f"{t3 - t0:.2f} s (train {t1 - t0:.2f}, mix {t2 - t1:.3f}, evaluate {t3 - t2:.2f})"
    )


if __name__ == "__main__":
    main()
