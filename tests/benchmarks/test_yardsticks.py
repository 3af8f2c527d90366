"""The speed yardsticks (benchmarks/machine.py): the theoretical fp32 FMA peak from the CPU's
flags and clock, worked by hand; a measured GEMM never above it by more than turbo allows is
the machine's business, so only the arithmetic and the measuring call are checked here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("machine", ROOT / "benchmarks" / "machine.py")
machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(machine)


@pytest.mark.parametrize(("flags", "lanes"), [
    ({"sse", "sse2"}, 4),
    ({"avx", "avx2"}, 4),  # AVX2 without FMA: no fused multiply-add pipes
    ({"avx2", "fma"}, 8),
    ({"avx2", "fma", "avx512f"}, 16),
])
def test_lanes_follow_the_widest_simd_the_flags_show(flags, lanes):
    assert machine.fp32_lanes(flags) == lanes


def test_theoretical_peak_worked_by_hand():
    # AVX-512 at 2.6 GHz: 16 lanes x 2 FMA pipes x 2 flops x 2.6 GHz = 166.4 GFLOP/s
    assert machine.theoretical_peak(flags={"avx512f"}, ghz=2.6) == pytest.approx(166.4)
    # AVX2 + FMA at 3.0 GHz: 8 x 2 x 2 x 3.0 = 96
    assert machine.theoretical_peak(flags={"avx2", "fma"}, ghz=3.0) == pytest.approx(96.0)


def test_the_onednn_gemm_counts_the_flops_of_its_product():
    # a small size: 2 x 64 x 64 x 64 flops in a positive, finite time
    got = machine.onednn_peak(64, repeats=1, calls=2)
    assert got.wall > 0 and got.cpu > 0
