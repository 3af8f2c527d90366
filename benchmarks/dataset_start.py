"""What a fresh process pays to reach its data set, side by side in one run.

Each case runs in a new interpreter (``python -c``), alternating A B A B ..., and is timed in
CPU seconds (the child's user + system time, from ``resource.getrusage``):

* ``torch``: ``import torch`` alone (every learning run pays it; the baseline);
* ``digits``: ``load_dataset("digits")`` as MobiDFL reads it (scikit-learn's bundled table,
  read without importing scikit-learn), against ``digits via sklearn``: the same table through
  ``sklearn.datasets.load_digits`` (what the loader did before);
* ``cifar10 absent``: ``dataset_present("cifar10", <empty folder>)``, the check an
  ``auto:cifar10|mnist5k`` preset makes, against ``import torchvision.datasets`` (what the
  check imported before it looked at the folder).

Prints the CPU model, the load, and the fp32 matmul peak of one thread at the start and the end.

Run: ``python benchmarks/dataset_start.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import machine_line, matmul_peak

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "torch": "import torch",
    "digits": "import torch\nfrom mobidfl.model.learning.data import load_dataset\n"
              "load_dataset('digits', test_size=100, seed=0)",
    "digits via sklearn": "import torch\nfrom sklearn.datasets import load_digits\nload_digits()",
    "cifar10 absent": "from mobidfl.model.config import dataset_present\n"
                      "assert not dataset_present('cifar10', {empty!r})",
    "import torchvision.datasets": "import torchvision.datasets",
}


def cpu_seconds(code: str) -> float:
    """User + system CPU seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(machine_line())
    print(f"fp32 matmul peak, one thread: {matmul_peak().wall:.1f} GFLOP/s (start)")
    with tempfile.TemporaryDirectory() as empty:
        codes = {name: code.format(empty=empty) for name, code in CASES.items()}
        times: dict[str, list[float]] = {name: [] for name in codes}
        for _ in range(args.repeats):
            for name, code in codes.items():  # alternating: load changes hit every case
                times[name].append(cpu_seconds(code))
    print(f"fp32 matmul peak, one thread: {matmul_peak().wall:.1f} GFLOP/s (end)")
    print(f"{'case':30s} {'median CPU s':>12s}  all")
    for name, got in times.items():
        print(f"{name:30s} {statistics.median(got):12.2f}  "
              + " ".join(f"{t:.2f}" for t in got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
