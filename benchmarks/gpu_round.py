"""Cached-DFL's round on CUDA with the batched backend, beside the CPU loop on a reduced round.

The round of ``benchmarks/peer_round.py`` (100 cars, 100 SGD steps of batch 64, the
Cached-DFL CNN, every car evaluated on 10k test images; ``--scale`` shrinks it) run with
``backend = batched, device = cuda`` (one vmap over all cars per step). Prints the phases,
GFLOP/s, and the same round's training on the CPU loop (1 thread) at ``--cpu-scale`` for a
side-by-side ratio per car-step. Without a CUDA device it prints "no CUDA device" and exits 0.

``--paper-epochs N`` also times N epochs of the Cached-DFL preset as a user runs it
(``MobiDFLModel(preset="cached_dfl_003", backend="batched", device="cuda")``: 100 cars on
``manhattan_grid_twoway``, K = 10, every car tested on the 10k test set each epoch) and
projects its 1,000 epochs.

Run: ``python benchmarks/gpu_round.py [--scale 1] [--rounds 3] [--paper-epochs 20]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))

from peer_round import BATCH, LR, stand_in

from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.learning.partition import partition_shards


def round_times(engine, *, sync: bool) -> dict[str, float]:
    """Train one round and evaluate every car, timed (CUDA synchronised)."""

    def now() -> float:
        if sync:
            torch.cuda.synchronize()
        return time.perf_counter()

    t = now()
    engine.train()
    t_train = now() - t
    t = now()
    acc, _ = engine.evaluate()
    t_eval = now() - t
    return {"train": t_train, "evaluate": t_eval, "acc": float(np.mean(acc))}


def paper_epochs(epochs: int, *, policy: str, device: str = "cuda") -> None:
    """Time the Cached-DFL preset's epochs on CUDA: set-up, then seconds per epoch."""
    from mobidfl.model import MobiDFLModel

    t = time.perf_counter()
    model = MobiDFLModel(preset="cached_dfl_003", backend="batched", device=device,
                         policy=policy, steps=epochs, early_stop_patience=0, seed=0)  # fmt: skip
    setup = time.perf_counter() - t
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        model.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    steady = float(np.median(times[1:] or times))
    acc = float(model.datacollector.get_model_vars_dataframe()["acc_mean"].iloc[-1])
    print(f"preset cached_dfl_003, policy {policy}, dataset {model.config.dataset}: set-up "
          f"{setup:.1f} s, first epoch {times[0]:.2f} s, then {steady:.3f} s per epoch "
          f"(median of {len(times) - 1}); 1,000 epochs ~ {(setup + 1000 * steady) / 60:.1f} min; "
          f"acc after {epochs}: {acc:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--cpu-scale", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paper-epochs", type=int, default=0,
                        help="also time this many epochs of the cached_dfl_003 preset")
    parser.add_argument("--policies", default="cached_lru,defedavg,central_fedavg",
                        help="policies timed with --paper-epochs")
    parser.add_argument("--skip-round", action="store_true", help="only --paper-epochs")
    parser.add_argument("--precision", default="fp32,bf16",
                        help="precisions of the CUDA round (setting precision), compared")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device")
        return
    if args.paper_epochs:
        for policy in args.policies.split(","):
            paper_epochs(args.paper_epochs, policy=policy)
    if args.skip_round:
        return
    cars, steps = max(2, round(100 * args.scale)), max(1, round(100 * args.scale))
    test_size = max(100, round(10_000 * args.scale))
    dataset = stand_in(test_size)
    parts = partition_shards(dataset.train_labels, cars, rng=np.random.default_rng(0))
    fps = flops_per_sample(build_net("cached_cnn", dataset.input_shape, 10), dataset.input_shape,
                           backward=False)  # fmt: skip
    work = cars * fps * (3 * steps * BATCH + test_size)
    print(f"{torch.cuda.get_device_name()}: {cars} cars x {steps} steps x batch {BATCH}, "
          f"test {test_size} ({dataset.name}), {work / 1e12:.2f} TFLOP per round")  # fmt: skip
    best: dict[str, dict[str, float]] = {}
    for precision in args.precision.split(","):
        training = TrainingSettings(net="cached_cnn", lr=LR, batch_size=BATCH, local_steps=steps,
                                    device="cuda", seed=0, precision=precision)
        gpu = make_engine("batched", training, dataset=dataset, parts=parts)
        results = [round_times(gpu, sync=True) for _ in range(args.rounds)]
        for r, res in enumerate(results):
            total = res["train"] + res["evaluate"]
            print(f"cuda {precision} round {r}: train {res['train']:.2f} s, evaluate "
                  f"{res['evaluate']:.2f} s, round {total:.2f} s, "
                  f"{work / total / 1e9:.0f} GFLOP/s, acc {res['acc']:.3f}")  # fmt: skip
        best[precision] = min(results[1:] or results, key=lambda r: r["train"] + r["evaluate"])
        del gpu
    if "fp32" in best and "bf16" in best:
        f32, b16 = (best[k]["train"] + best[k]["evaluate"] for k in ("fp32", "bf16"))
        print(f"bf16 / fp32 round: {f32 / b16:.2f}x faster")
    best_gpu = best[next(iter(best))]

    small = max(2, round(100 * args.cpu_scale))
    cpu_training = TrainingSettings(net="cached_cnn", lr=LR, batch_size=BATCH, local_steps=steps,
                                    device="cpu", seed=0, workers=1)
    cpu = make_engine("loop", cpu_training, dataset=dataset, parts=parts[:small])
    cpu_res = round_times(cpu, sync=False)
    per_gpu = best_gpu["train"] / (cars * steps)
    per_cpu = cpu_res["train"] / (small * steps)
    print(f"cpu loop (1 thread, {small} cars): train {cpu_res['train']:.2f} s; per car-step "
          f"cpu {1e3 * per_cpu:.2f} ms vs cuda {1e3 * per_gpu:.3f} ms: {per_cpu / per_gpu:.0f}x")


if __name__ == "__main__":
    main()
