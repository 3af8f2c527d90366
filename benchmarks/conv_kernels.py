"""Each convolution of the seed papers' nets, kernel by kernel, against the matmul peak.

For every Conv2d of Cached-DFL's CNN, LeNet-5 and the MNIST CNN, at the training batch
(forward, backward to the input, backward to the weights) and at the evaluation chunk
(forward), in NCHW and channels-last, one thread, CPU seconds: GFLOP/s and the percentage
of a 1-thread fp32 matmul peak measured in the same run (before and after; the best is
kept). A first layer's weight gradient is also timed as ``precision = "fp32_fast"``
computes it (one convolution over the batch, ``mobidfl.model.learning.backends.conv2d_fast_wgrad``).

Why: ``benchmarks/peer_profile.py`` says which op a training step spends its time in; this
says how fast each of those kernels runs on this CPU and in which layout, so a slow step
can be told apart from a slow kernel. Run it idle::

    python benchmarks/conv_kernels.py [--nets cached_cnn,lenet5,cnn] [--batch 64] [--chunk 128]
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
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine_line, matmul_peak

from mobidfl.model.learning.backends import conv2d_fast_wgrad
from mobidfl.model.learning.nets import build_net
from mobidfl.model.learning.workers import keep_heap


def cpu_time(fn: Callable[[], object], *, repeats: int, rounds: int = 3) -> float:
    """Best of ``rounds`` mean CPU seconds per call (after two warm-up calls)."""
    fn()
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(repeats):
            fn()
        best = min(best, (time.process_time() - t0) / repeats)
    return best


def conv_rows(net: str, conv: nn.Conv2d, shape: tuple[int, ...], *, batch: int,
              chunk: int, first: bool) -> list[tuple[str, float, float]]:  # fmt: skip
    """(kernel, seconds, FLOPs) of one conv layer's kernels at ``shape`` (C, H, W)."""
    c, h, w = shape
    weight, bias = conv.weight.detach(), conv.bias.detach() if conv.bias is not None else None
    out = F.conv2d(torch.zeros(1, c, h, w), weight, bias, conv.stride, conv.padding)
    per_sample = 2 * out[0].numel() * weight[0].numel()
    rows: list[tuple[str, float, float]] = []
    for layout in ("nchw", "nhwc"):
        fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
        x = torch.randn(batch, c, h, w).contiguous(memory_format=fmt)
        wt = weight.contiguous(memory_format=fmt)
        g = torch.randn(batch, *out.shape[1:]).contiguous(memory_format=fmt)
        xe = torch.randn(chunk, c, h, w).contiguous(memory_format=fmt)
        args = (conv.stride, conv.padding, conv.dilation)
        with torch.no_grad():
            t = cpu_time(lambda: F.conv2d(xe, wt, bias, *args), repeats=10)  # noqa: B023 - timed within this iteration only
        rows.append((f"{net} {layout} evaluate forward (chunk {chunk})", t, per_sample * chunk))
        t = cpu_time(lambda: F.conv2d(x, wt, bias, *args), repeats=10)  # noqa: B023 - timed within this iteration only
        rows.append((f"{net} {layout} train forward", t, per_sample * batch))
        mask = [not first, True, bias is not None]

        def backward() -> object:
            return torch.ops.aten.convolution_backward(
                g, x, wt, None if bias is None else [bias.shape[0]], list(conv.stride),  # noqa: B023 - timed within this iteration only
                list(conv.padding), list(conv.dilation), False, [0, 0], 1, mask,  # noqa: B023 - timed within this iteration only
            )  # fmt: skip

        what = "weights" if first else "input + weights"
        rows.append((f"{net} {layout} train backward ({what})", cpu_time(backward, repeats=10),
                     per_sample * batch * (1 if first else 2)))  # fmt: skip
    if first:
        x = torch.randn(batch, c, h, w)
        wl = weight.clone().requires_grad_()
        bl = None if bias is None else bias.clone().requires_grad_()
        g = torch.randn(batch, *out.shape[1:])
        leaves = [p for p in (wl, bl) if p is not None]

        def fast() -> object:
            y = conv2d_fast_wgrad(x, wl, bl, conv)
            assert y is not None
            return torch.autograd.grad(y, leaves, g)

        t = cpu_time(fast, repeats=10) - rows[1][1]  # its forward is the nchw train forward
        rows.append((f"{net} fp32_fast weight gradient", t, per_sample * batch))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nets", default="cached_cnn,lenet5,cnn")
    parser.add_argument("--batch", type=int, default=64, help="training batch (Cached-DFL: 64)")
    parser.add_argument("--chunk", type=int, default=128, help="evaluation chunk")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_heap()
    print(machine_line())
    peak = matmul_peak(1024, repeats=3, calls=10).cpu
    rows: list[tuple[str, float, float]] = []
    for name in args.nets.split(","):
        net = build_net(name, (1, 28, 28), 10)
        shape: tuple[int, ...] = (1, 28, 28)
        convs = 0
        for m in net:
            if isinstance(m, nn.Conv2d):
                convs += 1
                rows += conv_rows(f"{name} conv{convs}", m, shape, batch=args.batch,
                                  chunk=args.chunk, first=convs == 1)  # fmt: skip
            with torch.no_grad():
                shape = tuple(m(torch.zeros(1, *shape)).shape[1:])
            if len(shape) != 3:
                break
    peak = max(peak, matmul_peak(1024, repeats=3, calls=10).cpu)
    print(f"1-thread fp32 matmul peak {peak:.1f} GFLOP/s per CPU second (best of start/end)")
    print(f"{'kernel':58s}{'ms':>8s}{'GFLOP/s':>9s}{'%peak':>7s}")
    for label, t, flops in rows:
        print(f"{label:58s}{t * 1e3:8.3f}{flops / t / 1e9:9.1f}{100 * flops / t / 1e9 / peak:7.0f}")
    print(f"load after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
