"""N runs of a reproduction batched as one program (``--batch-runs``) vs one after the other.

Builds the runs of ``mobidfl reproduce cached_dfl_003`` (``--variants`` x ``--seeds`` at
``--scale``, plus ``--set`` values) in this process and times them twice on ``--device``:

* ``sequential``: each model built and stepped to its end alone (as ``--processes 0``);
* ``batched``: all models built, grouped (:func:`mobidfl.model.learning.multirun.plan_groups`) and
  stepped in lockstep, training and evaluation one call over runs x agents
  (:class:`mobidfl.model.learning.multirun.RunGroup`).

Prints the machine, the load before and after, the fp32 matmul peak measured in the same
process (1 CPU thread, or the GPU), set-up and stepping times, runs/s, seconds per epoch
(per run-epoch and per lockstep epoch), the speed-up, and the largest difference of any
``model.csv`` float between the two (the equality tests/analysis/test_batch_runs.py checks).

Run (CPU, < 2 min): ``python benchmarks/gpu_sweep.py``;
GPU: ``python benchmarks/gpu_sweep.py --device cuda --scale paper --seeds 5
--variants LRU,DFL,CFL --set steps=20``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_round import machine, matmul_peak

from mobidfl.analysis.reproduce import paper_spec, variant_settings
from mobidfl.analysis.sweep import Sweep
from mobidfl.model.config import parse_assignments
from mobidfl.model.learning.multirun import RunGroup, lockstep, plan_groups
from mobidfl.model.world import MobiDFLModel


def cuda_peak(size: int = 8192, repeats: int = 5) -> float:
    """Best-of-``repeats`` fp32 GFLOP/s of a square matmul on the GPU (TF32 as configured)."""
    a, b = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / 5)
    return 2 * size**3 / best / 1e9


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paper", default="003", help="reproduction spec (default Cached-DFL)")
    parser.add_argument("--scale", default="ci")
    parser.add_argument("--variants", default="LRU,DFL")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--backend", default="batched", choices=["batched", "loop"])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting on every run, e.g. steps=10")  # fmt: skip
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device")
        return
    torch.set_num_threads(1)  # as a sweep worker and --batch-runs
    spec = paper_spec(args.paper)
    extra = {"backend": args.backend, "device": args.device, **parse_assignments(args.set)}
    specs = []
    for variant in args.variants.split(","):
        settings = variant_settings(spec, variant, scale=args.scale, extra=extra)
        sweep = Sweep.from_dict({"base": settings, "seeds": list(range(args.seeds))})
        specs += sweep.runs()
    print(machine())
    print(f"load before: {load()}")
    if args.device == "cuda":
        print(f"{torch.cuda.get_device_name()}: fp32 matmul peak {cuda_peak():.0f} GFLOP/s")
    else:
        wall, cpu = matmul_peak()
        print(f"1-thread fp32 matmul peak: {wall:.1f} GFLOP/s per wall s, {cpu:.1f} per CPU s")
    print(f"{spec.preset} at scale {args.scale}: {args.variants} x {args.seeds} seeds = "
          f"{len(specs)} runs, backend {args.backend}, device {args.device}, "
          f"set {extra}")  # fmt: skip

    # sequential: each run built and stepped alone
    tables, setup, stepping, epochs = [], 0.0, 0.0, 0
    for spec_ in specs:
        t = time.perf_counter()
        model = MobiDFLModel(**spec_.settings, seed=spec_.seed)
        setup += time.perf_counter() - t
        t = time.perf_counter()
        lockstep([(model, spec_.steps)], None)
        sync(args.device)
        stepping += time.perf_counter() - t
        epochs += model.steps
        tables.append(model.model_table())
        del model
    seq = setup + stepping
    print(f"sequential: set-up {setup:.1f} s, stepping {stepping:.1f} s ({epochs} run-epochs, "
          f"{stepping / epochs:.3f} s per run-epoch), {len(specs) / seq:.3f} runs/s")

    # batched: all built, grouped, stepped in lockstep
    t = time.perf_counter()
    models = [MobiDFLModel(**s.settings, seed=s.seed) for s in specs]
    together, alone = plan_groups(models)
    groups = [RunGroup([models[i].learner.engine for i in g]) for g in together]
    b_setup = time.perf_counter() - t
    t = time.perf_counter()
    for members, group in zip(together, groups, strict=True):
        errors = lockstep([(models[i], specs[i].steps) for i in members], group)
        if any(errors):
            raise SystemExit(next(e for e in errors if e))
    for i in alone:
        lockstep([(models[i], specs[i].steps)], None)
    sync(args.device)
    b_step = time.perf_counter() - t
    b_epochs = sum(m.steps for m in models)
    longest = max(m.steps for m in models)
    together_total = b_setup + b_step
    calls = {k: sum(g.calls[k] for g in groups) for k in ("train", "evaluate")}
    print(f"batched: groups {[len(g) for g in together]}, alone {len(alone)}; set-up "
          f"{b_setup:.1f} s, stepping {b_step:.1f} s ({b_epochs} run-epochs, "
          f"{b_step / b_epochs:.3f} s per run-epoch, {b_step / longest:.3f} s per lockstep "
          f"epoch; {calls['train']} training and {calls['evaluate']} evaluation calls), "
          f"{len(specs) / together_total:.3f} runs/s")  # fmt: skip
    diff = 0.0
    for table, model in zip(tables, models, strict=True):
        other = model.model_table()
        floats = [c for c in table.columns if table[c].dtype.kind == "f"]
        gap = np.nan_to_num(np.abs(table[floats].to_numpy() - other[floats].to_numpy()))
        diff = max(diff, float(gap.max(initial=0.0)))
    print(f"speed-up: stepping {stepping / b_step:.2f}x, end to end {seq / together_total:.2f}x; "
          f"largest model.csv difference {diff:.2e}")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
