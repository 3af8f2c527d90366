"""One local SGD step of an MLP on one CPU thread: autograd against the written-out gradient.

Both paths give bit-identical gradients and losses (``tests/model/learning/test_dense_step.py``);
the difference is autograd recording and walking its graph, which dominates a small MLP's step
at small batches (the city benchmark's 10,000 cars take 50,000 such steps an epoch). In one
run: the 1-thread fp32 matmul peak (the yardstick), then per batch size the CPU time per step
of each path, best of ``--repeats``, with the step's GFLOP/s and share of the peak.

Run: ``python benchmarks/dense_step.py [--batches 16,64] [--steps 2000] [--shape 1,28,28]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import matmul_peak

from mobidfl.cores import cpu_model
from mobidfl.model.learning.backends import Functional
from mobidfl.model.learning.nets import build_net, flops_per_sample


def per_step_cpu(fn: Functional, ps: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                 *, steps: int, repeats: int) -> float:
    """Best-of-``repeats`` CPU seconds of one ``autograd_step`` (gradient and loss)."""
    for _ in range(min(steps, 100)):
        fn.autograd_step(ps, x, y)
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(steps):
            fn.autograd_step(ps, x, y)
        best = min(best, (time.process_time() - t) / steps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="16,64")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shape", default="1,28,28", help="input shape (the MLP flattens it)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    shape = tuple(int(v) for v in args.shape.split(","))
    net = build_net("mlp", shape, 10)
    fast = Functional(net)
    slow = Functional(net)
    slow.dense = None
    ps = [p.detach().clone().requires_grad_() for p in net.parameters()]
    cpu = cpu_model()
    peak = matmul_peak().wall
    print(f"{cpu}; load {os.getloadavg()[0]:.2f}; torch {torch.__version__}; "
          f"1-thread fp32 matmul peak {peak:.1f} GFLOP/s; MLP {shape} -> 10")
    print(f"{'batch':>6s} {'autograd ms':>12s} {'written-out ms':>15s} {'speed-up':>9s} "
          f"{'GFLOP/s (% peak)':>22s}")
    for batch in (int(v) for v in args.batches.split(",")):
        x, y = torch.randn(batch, *shape), torch.randint(0, 10, (batch,))
        a = per_step_cpu(slow, ps, x, y, steps=args.steps, repeats=args.repeats)
        b = per_step_cpu(fast, ps, x, y, steps=args.steps, repeats=args.repeats)
        flops = flops_per_sample(net, shape) * batch  # forward + backward (3 x forward)
        print(f"{batch:6d} {a * 1e3:12.3f} {b * 1e3:15.3f} {a / b:8.2f}x "
              f"{flops / b / 1e9:8.1f} ({100 * flops / b / 1e9 / peak:4.1f} %) "
              f"vs {flops / a / 1e9:.1f}")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
