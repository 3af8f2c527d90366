"""What every benchmark reads off the machine it runs on.

A speed figure means nothing without the machine behind it: each benchmark prints the CPU
model (:func:`mobidfl.cores.cpu_model`, as ``mobidfl bench`` records it) and measures the
yardstick its ratios are taken against, the fp32 matmul peak of one thread, in the same run
(the performance pages quote every ratio against it).
"""

from __future__ import annotations

import os
import platform
import time
from typing import NamedTuple

from mobidfl.cores import cpu_model

__all__ = ["Peak", "cpu_model", "machine_line", "matmul_peak"]


def machine_line() -> str:
    """What a reading depends on: CPU model and count, torch, load averages, UTC time."""
    import torch

    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"machine: {cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
            f"python {platform.python_version()}; load {load}; {now}")  # fmt: skip


class Peak(NamedTuple):
    """fp32 GFLOP/s of one thread's square matmul."""

    wall: float
    """Per wall-clock second: what the machine gave while it ran."""
    cpu: float
    """Per CPU second of this process: barely moves when other processes share the cores."""


def matmul_peak(size: int = 512, *, repeats: int = 5, calls: int = 20) -> Peak:
    """Best of ``repeats`` means over ``calls`` ``size x size`` fp32 matmuls, on one thread
    (torch's thread count is restored after), after one warm-up call."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a @ b
        wall = cpu = float("inf")
        for _ in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            for _ in range(calls):
                a @ b
            wall = min(wall, (time.perf_counter() - t) / calls)
            cpu = min(cpu, max(time.process_time() - c, 1e-9) / calls)
    finally:
        torch.set_num_threads(threads)
    flops = 2 * size**3
    return Peak(wall=flops / wall / 1e9, cpu=flops / cpu / 1e9)
