"""One training step of each seed conv net, four ways, alternating in one process.

``fp32`` (the default), ``fp32_fast`` (the first layer's weight gradient as one convolution
over the batch), and each of them with the later convolutions run channels-last (a variant
MobiDFL does not ship: this benchmark is why). One thread, CPU seconds, batch 64, the best
of ``--rounds`` rounds of ``--steps`` steps per variant, rounds interleaved so a busy
neighbour slows every variant alike. Run it idle::

    python benchmarks/step_variants.py [--nets cached_cnn,lenet5,cnn] [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine_line, matmul_peak

from mobidfl.model.learning import backends
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.learning.workers import keep_heap

PLAIN = F.conv2d


def channels_last_conv(h, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv2d`` with a later layer's input and weight channels-last (the input of the
    first layer, which needs no gradient, stays as it is)."""
    if h.requires_grad:
        fmt = torch.channels_last
        h, w = h.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
    return PLAIN(h, w, b, stride, padding, dilation, groups)


def step_ms(fn: backends.Functional, conv: Callable, leaves: list[torch.Tensor],
            x: torch.Tensor, y: torch.Tensor, steps: int) -> float:  # fmt: skip
    """CPU ms per ``autograd_step`` with ``conv`` standing in for ``F.conv2d``."""
    backends.F.conv2d = conv  # type: ignore[assignment]
    try:
        t0 = time.process_time()
        for _ in range(steps):
            fn.autograd_step(leaves, x, y)
        return (time.process_time() - t0) / steps * 1e3
    finally:
        backends.F.conv2d = PLAIN  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nets", default="cached_cnn,lenet5,cnn")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_heap()
    print(machine_line())
    peak = matmul_peak(1024, repeats=3, calls=10).cpu
    print(f"{'net':12s}{'variant':22s}{'ms/step':>9s}{'%peak':>7s}{'x fp32':>8s}")
    for name in args.nets.split(","):
        torch.manual_seed(0)
        net = build_net(name, (1, 28, 28), 10)
        flops = 3 * 64 * flops_per_sample(net, (1, 28, 28), backward=False)
        leaves = [p.detach().clone().requires_grad_() for p in net.parameters()]
        x, y = torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,))
        x[:, :, :8] = 0.0  # a blank band, like Fashion-MNIST's background
        variants = {
            "fp32": (backends.Functional(net), PLAIN),
            "fp32_fast": (backends.Functional(net, precision="fp32_fast"), PLAIN),
            "fp32 + channels-last": (backends.Functional(net), channels_last_conv),
            "fp32_fast + ch.-last": (backends.Functional(net, precision="fp32_fast"),
                                     channels_last_conv),  # fmt: skip
        }
        best = dict.fromkeys(variants, float("inf"))
        for _ in range(args.rounds):
            for key, (fn, conv) in variants.items():
                best[key] = min(best[key], step_ms(fn, conv, leaves, x, y, args.steps))
        for key, ms in best.items():
            print(f"{name:12s}{key:22s}{ms:9.2f}{100 * flops / (ms / 1e3) / 1e9 / peak:7.0f}"
                  f"{best['fp32'] / ms:8.2f}")  # fmt: skip
    print(f"1-thread fp32 matmul peak {peak:.1f} GFLOP/s per CPU second; load after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
