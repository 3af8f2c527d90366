"""The speed scripts (benchmarks/) checked without the hardware they measure."""
