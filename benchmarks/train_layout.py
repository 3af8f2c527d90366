"""Loop-backend training of the conv nets: NCHW (current) vs channels-last, side by side.

Issue 15 (secondary to item 3): is training ``cnn`` / ``cached_cnn`` faster with NHWC inputs
and conv weights (oneDNN's preferred layout) than in the current NCHW layout, on 1 torch
thread, with the same numerics? Each variant runs the loop backend's own step
(``Functional.autograd_step`` + ``sgd_update``, batch 64, SGD lr 0.05) from the same initial
weights on the same batches; variants alternate, best of ``--repeat``. Printed: ms per step,
the ratio, and the largest loss difference along the run (adopt only if faster and within
1e-5). mkldnn tensors (``torch.utils.mkldnn``) are inference-only in PyTorch (no autograd),
so they are tried and reported, not timed, when autograd refuses them.

Run: ``python benchmarks/train_layout.py [--steps 30] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from mobidfl.model.learning.backends import Functional, Hyper, sgd_update
from mobidfl.model.learning.nets import NETS


def run(name: str, layout: str, steps: int, seed: int = 0) -> tuple[float, list[float]]:
    """Seconds per step and the loss of every step, for one net and layout."""
    torch.manual_seed(seed)
    template = NETS[name]((1, 28, 28), 10)
    fn = Functional(template, channels_last=layout == "channels_last")
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(steps * 64, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (steps * 64,), generator=g)
    x = fn.prep(x)
    ps = [fn.layout(p.detach().clone()).requires_grad_() for p in template.parameters()]
    bufs = [torch.zeros_like(p) for p in ps]
    hp = Hyper(lr=0.05, momentum=0.0, weight_decay=0.0, prox_rho=0.0)
    losses = []
    t = time.perf_counter()
    for k in range(steps):
        grads, loss = fn.autograd_step(ps, x[k * 64 : (k + 1) * 64], y[k * 64 : (k + 1) * 64])
        with torch.no_grad():
            sgd_update(ps, grads, bufs, None, hp, t=float(k + 1))
        losses.append(float(loss))
    return (time.perf_counter() - t) / steps, losses


def mkldnn_trains() -> str:
    """Whether autograd accepts mkldnn tensors for a conv step."""
    try:
        conv = torch.nn.Conv2d(1, 4, 3)
        w = conv.weight.detach().to_mkldnn().requires_grad_()
        out = torch.nn.functional.conv2d(torch.randn(2, 1, 8, 8).to_mkldnn(), w)
        out.to_dense().sum().backward()
        return "yes"
    except (RuntimeError, TypeError) as error:
        return f"no ({str(error).splitlines()[0][:90]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load {os.getloadavg()[0]:.2f}; torch {torch.__version__}, 1 thread, batch 64, "
          f"{args.steps} steps; mkldnn tensors train: {mkldnn_trains()}")  # fmt: skip
    print(f"{'net':>11s}{'NCHW ms':>9s}{'NHWC ms':>9s}{'NCHW/NHWC':>11s}{'max |dloss|':>13s}")
    for name in ("cnn", "cached_cnn"):
        best: dict[str, float] = {}
        losses: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for layout in ("nchw", "channels_last"):
                seconds, losses[layout] = run(name, layout, args.steps)
                best[layout] = min(best.get(layout, float("inf")), seconds)
        diff = max(abs(a - b) for a, b in zip(losses["nchw"], losses["channels_last"], strict=True))
        print(f"{name:>11s}{best['nchw'] * 1e3:9.2f}{best['channels_last'] * 1e3:9.2f}"
              f"{best['nchw'] / best['channels_last']:10.2f}x{diff:13.2e}", flush=True)
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
