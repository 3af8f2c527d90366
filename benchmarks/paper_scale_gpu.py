"""One variant of the Cached-DFL preset at the paper's scale on CUDA, its table kept as it runs.

``MobiDFLModel(preset="cached_dfl_003", backend="batched", device="cuda", policy=...)``:
100 cars on ``manhattan_grid_twoway``, Fashion-MNIST shards, the authors' CNN, K = 10, every
car tested on the 10k test set each epoch, ReduceLROnPlateau and the early stop of the
preset, up to 1,000 epochs. ``OUT/model.csv`` is rewritten every ``--every`` epochs so a run
cut short (a device lease ending) still leaves its curve; ``OUT/timing.txt`` holds set-up
and seconds per epoch. Fig. 2 is three of these (``cached_lru``, ``defedavg``,
``central_fedavg``) side by side.

Run: ``python benchmarks/paper_scale_gpu.py --policy cached_lru --seed 0 --out RUNS/cached_lru_s0``
(one process per run, several at once on one GPU), then
``python benchmarks/paper_scale_gpu.py --report RUNS --out DIR``: ``reproduction.md`` with the
Fig. 2 claims of ``mobidfl reproduce cached_dfl_003`` computed by the same code.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from mobidfl.atomic import write_text_atomic
from mobidfl.model import MobiDFLModel

VARIANTS = {"cached_lru": "LRU", "defedavg": "DFL", "central_fedavg": "CFL"}
"""Policy -> the variant name of ``mobidfl.analysis.reproduce.CACHED`` (Fig. 2)."""


def report(runs: Path, out: Path) -> Path:
    """reproduction.md of the runs under ``runs`` (folders ``<policy>_s<seed>``)."""
    import pandas as pd

    from mobidfl.analysis.reproduce import CACHED, variant_settings, write_report
    from mobidfl.model.config import Config

    frames, resolved, seeds = [], {}, set()
    for folder in sorted(runs.glob("*_s*")):
        policy, _, seed = folder.name.rpartition("_s")
        if policy not in VARIANTS or not (folder / "model.csv").exists():
            continue
        table = pd.read_csv(folder / "model.csv", index_col=0).rename_axis("step").reset_index()
        frames.append(table.assign(variant=VARIANTS[policy], seed=int(seed)))
        resolved[VARIANTS[policy]] = Config.from_toml(folder / "config.toml")
        seeds.add(int(seed))
    order = [v for v in CACHED.variants if v in resolved]
    resolved = {v: resolved[v] for v in order}
    extra = {"backend": "batched", "device": "cuda"}
    for variant, config in resolved.items():  # the runs are the reproduction's variants
        # ``auto:fashion_mnist|mnist5k`` resolves by what this machine holds: take the run's
        want = Config.from_settings(variant_settings(
            CACHED, variant, scale="paper", extra={**extra, "dataset": config.dataset}))
        if config.to_dict() | {"seed": 0} != want.to_dict() | {"seed": 0}:
            raise SystemExit(f"{variant}: the run's config.toml is not the paper-scale variant")
    how = ("Written by `python benchmarks/paper_scale_gpu.py --report` from runs of "
           "`benchmarks/paper_scale_gpu.py --policy P --seed S` (one process per run, on one "
           "GPU): the same settings as `mobidfl reproduce cached_dfl_003 --scale paper "
           f"--variants {','.join(order)} --set backend=batched --set device=cuda` "
           "(checked against each run's config.toml).")
    steps = pd.concat(frames, ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    return write_report(CACHED, steps, out, resolved=resolved, scale="paper",
                        seeds=sorted(seeds), extra=extra, how=how)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="cached_lru")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    parser.add_argument("--report", metavar="RUNS", help="write reproduction.md of these runs")
    args = parser.parse_args()
    out = Path(args.out)
    if args.report:
        print(f"wrote {report(Path(args.report), out)}")
        return
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    model = MobiDFLModel(preset="cached_dfl_003", backend="batched", device=args.device,
                         policy=args.policy, steps=args.steps, seed=args.seed)  # fmt: skip
    setup = time.perf_counter() - started
    write_text_atomic(out / "config.toml", model.config.to_toml())
    epoch_started = time.perf_counter()
    for epoch in range(1, args.steps + 1):
        model.step()
        if epoch % args.every == 0 or not model.running or epoch == args.steps:
            if args.device == "cuda":
                torch.cuda.synchronize()
            table = model.datacollector.get_model_vars_dataframe()
            write_text_atomic(out / "model.csv", table.to_csv())
            per_epoch = (time.perf_counter() - epoch_started) / epoch
            timing = (f"set-up {setup:.1f} s; {epoch} epochs; {per_epoch:.3f} s per epoch; "
                      f"running {model.running}\n")
            write_text_atomic(out / "timing.txt", timing)
            print(f"{args.policy} seed {args.seed}: epoch {epoch}, acc_mean "
                  f"{table['acc_mean'].iloc[-1]:.4f}, {per_epoch:.2f} s/epoch", flush=True)
        if not model.running:  # the preset's early stop
            break


if __name__ == "__main__":
    main()
