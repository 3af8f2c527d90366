"""What every benchmark reads off the machine it runs on.

A speed figure means nothing without the machine behind it: each benchmark prints the CPU
model (:func:`mobidfl.cores.cpu_model`, as ``mobidfl bench`` records it) and measures the
yardsticks its ratios are taken against, in the same run:

* :func:`theoretical_peak`: one core's fp32 FMA limit from the CPU's flags and clock
  (SIMD lanes x 2 FMA pipes x 2 flops x GHz). An upper bound: it assumes two FMA pipes of
  the widest vector the flags show (true of Intel server cores with AVX-512 and of Zen 5;
  Zen 4 runs AVX-512 on 256-bit pipes, half of it), so no measured figure can exceed it;
* :func:`matmul_peak`: the best square fp32 matmul of one thread through ``torch.matmul``
  (MKL's sgemm on x86);
* :func:`onednn_peak`: the same GEMM through oneDNN, as a 1x1 convolution (the library the
  nets' convolutions run on). On AMD, oneDNN's AVX-512 kernels outrun MKL's sgemm, so a net
  can exceed "the matmul peak" (127 % was printed on a Zen 5): every "% of peak" names
  which yardstick it is against.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
import tomllib
from pathlib import Path
from typing import NamedTuple

from mobidfl.cores import cpu_model

__all__ = ["Peak", "checkout_program", "cpu_model", "machine_line", "matmul_peak",
           "onednn_peak", "theoretical_peak", "yardsticks"]


def checkout_program(code: Path, program: str) -> tuple[str, dict[str, str]]:
    """``program`` (written for ``mobidfl.model`` ...) and the environment that run checkout
    ``code``'s own packages in a child process, for benchmarks that compare checkouts.

    WHY: ``model/`` installs as ``mobidfl.model`` (package-dir in pyproject.toml), and the
    editable install maps that name to the checkout it was made from, whichever
    ``mobidfl`` is first on ``PYTHONPATH``. So the child appends ``code`` to ``mobidfl``'s
    search path, where ``model/`` ... are then found first. A checkout from before the one
    namespace (top-level ``model`` ...) is refused in one line: in this environment the
    installed entry points and its own pyproject.toml would register every built-in plug-in
    twice; it runs from an environment of its own.
    """
    project = tomllib.loads((code / "pyproject.toml").read_text())
    dirs = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    if dirs.get("mobidfl.model") != "model":
        print(f"{code}: a checkout from before the mobidfl namespace (model/ is not "
              "mobidfl.model there); measure it from an environment of its own", file=sys.stderr)
        raise SystemExit(2)
    env = {**os.environ, "PYTHONPATH": str(code)}
    return f"import mobidfl; mobidfl.__path__.append({str(code)!r})\n{program}", env


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


def _cpuinfo() -> tuple[set[str], float]:
    """The first CPU's flags and its clock in GHz (``cpu MHz``: under a hypervisor, the
    nominal clock the guest is told) from ``/proc/cpuinfo``; empty and NaN elsewhere."""
    flags: set[str] = set()
    mhz = float("nan")
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return flags, mhz
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = set(value.split())
        elif key == "cpu MHz" and math.isnan(mhz):
            mhz = float(value)
    return flags, mhz / 1000


def fp32_lanes(flags: set[str]) -> int:
    """fp32 lanes of the widest SIMD the flags show: 16 (AVX-512F), 8 (AVX2 with FMA),
    4 (SSE)."""
    if "avx512f" in flags:
        return 16
    if "avx2" in flags and "fma" in flags:
        return 8
    return 4


def theoretical_peak(*, flags: set[str] | None = None, ghz: float | None = None) -> float:
    """One core's fp32 GFLOP/s limit: lanes x 2 FMA pipes x 2 flops per FMA x GHz (module
    docstring: an upper bound)."""
    found_flags, found_ghz = _cpuinfo()
    flags = found_flags if flags is None else flags
    ghz = found_ghz if ghz is None else ghz
    return fp32_lanes(flags) * 2 * 2 * ghz


def onednn_peak(size: int = 512, *, repeats: int = 5, calls: int = 20) -> Peak:
    """The ``size``-cubed fp32 GEMM through oneDNN, on one thread: a 1x1 convolution of a
    ``[1, size, 16, size/16]`` input with ``size`` filters (``size x size`` times
    ``size x size``), best of ``repeats`` means over ``calls``."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(1, size, 16, size // 16)
    w = torch.randn(size, size, 1, 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        F.conv2d(x, w)
        wall = cpu = float("inf")
        for _ in range(repeats):
            t, c = time.perf_counter(), time.process_time()
            for _ in range(calls):
                F.conv2d(x, w)
            wall = min(wall, (time.perf_counter() - t) / calls)
            cpu = min(cpu, max(time.process_time() - c, 1e-9) / calls)
    finally:
        torch.set_num_threads(threads)
    flops = 2 * size * size * (16 * (size // 16))
    return Peak(wall=flops / wall / 1e9, cpu=flops / cpu / 1e9)


def yardsticks() -> dict[str, float]:
    """Every yardstick of this run (GFLOP/s, one thread): ``theoretical``, ``mkl_sgemm``
    and ``onednn_gemm`` (per CPU second, robust to other jobs), and ``best_gemm``."""
    mkl, dnn = matmul_peak().cpu, onednn_peak().cpu
    return {"theoretical": theoretical_peak(), "mkl_sgemm": mkl, "onednn_gemm": dnn,
            "best_gemm": max(mkl, dnn)}


if __name__ == "__main__":
    print(machine_line())
    for name, value in yardsticks().items():
        print(f"{name:12s} {value:8.1f} GFLOP/s (one thread)")
