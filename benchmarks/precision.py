"""``precision = "bf16"`` against fp32 on small runs of two paper presets, over seeds.

Each run is a paper preset as a user runs it (``MobiDFLModel(preset=...)``), shrunk so that
fp32 and bf16 x 3 seeds fit in minutes on a 2-core machine (the shrinking is printed); the
same seed gives both precisions the same world, partition and batches, so the accuracy
difference is paired per seed. Timed: the whole run (train + exchange + test) in CPU
seconds, 1 worker, 1 thread.

* ``cached_dfl_003``: Cached-DFL's CNN, 10 cars, 8 epochs of K = 10 steps of batch 64,
  every car tested on 500 images each epoch.
* ``mobility_000``: de Heredia's LeNet-5, 48 clients, 30 rounds of 3 steps of batch 8,
  tested on 500 images every round.

Run: ``python benchmarks/precision.py [--seeds 3]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from mobidfl.model.world import MobiDFLModel

RUNS = {
    "cached_dfl_003": {"vehicles": 10, "steps": 8, "test_size": 500, "eval_every": 1,
                       "early_stop_patience": 0},
    "mobility_000": {"steps": 30, "test_size": 500, "eval_every": 1},
}  # fmt: skip


def one_run(preset: str, seed: int, precision: str) -> tuple[float, float]:
    """CPU seconds of the run's steps (set-up excluded; one thread, one process, so
    barely moved by other jobs on the cores) and the final mean accuracy."""
    over = RUNS[preset]
    model = MobiDFLModel(preset=preset, seed=seed, precision=precision, workers=1, **over)
    t = time.process_time()
    for _ in range(int(over["steps"])):
        model.step()
    seconds = time.process_time() - t
    acc = float(np.mean(model.accuracy))
    model.learner.engine.close()
    return seconds, acc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--presets", default=",".join(RUNS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, load "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")  # fmt: skip
    for preset in args.presets.split(","):
        print(f"{preset} with {RUNS[preset]}")
        rows = []
        for seed in range(args.seeds):
            fp = one_run(preset, seed, "fp32")
            bf = one_run(preset, seed, "bf16")
            rows.append((*fp, *bf))
            print(f"  seed {seed}: fp32 {fp[0]:.1f} CPU s acc {fp[1]:.4f} | bf16 {bf[0]:.1f} s "
                  f"acc {bf[1]:.4f} | speed-up {fp[0] / bf[0]:.2f}x, "
                  f"acc diff {100 * (bf[1] - fp[1]):+.2f} pp", flush=True)  # fmt: skip
        r = np.array(rows)
        d = 100 * (r[:, 3] - r[:, 1])
        print(f"  mean: speed-up {np.mean(r[:, 0] / r[:, 2]):.2f}x, accuracy fp32 "
              f"{100 * r[:, 1].mean():.2f} % vs bf16 {100 * r[:, 3].mean():.2f} %, paired "
              f"difference {d.mean():+.2f} +- {d.std(ddof=1) if len(d) > 1 else 0:.2f} pp")
    print(f"load after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
