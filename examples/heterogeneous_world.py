"""A heterogeneous world: every kind of device runs a different paper's system in one run.

Vehicles drive the Upper West Side with Cached-DFL's LRU caches (``cached_lru``, Wang et al.,
AAAI 2025, Alg. 1-2), static sensors form PSFL self-federations (``psfl``, Domini et al.,
ACSOS 2024, Alg. 1), and UAVs fly DCM routes (``dcm``, Reza et al., Alg. 1 + eq. 9) while
mixing with data-size weights (``fedavg_weighted``, Reza et al., eq. 2). Data are
area-skewed (``partition = "area"``), so sensors in one area share labels. Each policy mixes
only with members of its own group; contacts across kinds are recorded but not used.

It is an example, not a paper's claim: no paper runs these systems side by side, so there is
nothing to reproduce (``mobidfl reproduce`` is for the papers). What it shows: one
:class:`mobidfl.MobiDFLModel` carries several exchange policies at once, each with its
own metric columns (``cache_size_mean``, ``federations``, ...) and its own
``acc_policy_<name>`` accuracy column.

Sizes: ``ci`` (10 steps, seconds; what ``tests/reproduction/test_exp_heterogeneous.py`` runs),
``small`` (40 steps, about a minute per seed on one idle core), ``full`` (200 steps, 100 vehicles,
56 sensors, 5 UAVs; tens of minutes per seed).

Run: ``python examples/heterogeneous_world.py --size small --seeds 0 1 2``. The same world
from the command line: ``mobidfl run --set map=nyc_uws --set vehicle.policy=cached_lru
--set sensor.policy=psfl ...`` with the settings of :data:`WORLD`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pandas as pd
import torch

import mobidfl

WORLD = {
    "map": "nyc_uws",
    "pedestrians": 0,
    "vehicle.policy": "cached_lru",
    "sensor.policy": "psfl",
    "uav.policy": "fedavg_weighted",
    "uav.mobility": "dcm",
    "partition": "area",
    "radius_m": 150.0,  # PSFL's 8-neighbourhood at cell_m = 100 (model/presets/psfl_004.toml)
    "psfl.sigma": 5.0,
    "psfl.loss": "mean",  # sigma 5 was set on eq. 3's per-sample mean scale
}
"""The settings every size shares (names as ``mobidfl settings`` lists them)."""
SIZES = {
    "ci": {"vehicles": 20, "sensors": 12, "uavs": 3, "steps": 10, "test_size": 200},
    "small": {"vehicles": 30, "sensors": 20, "uavs": 4, "steps": 40, "test_size": 500},
    "full": {"vehicles": 100, "sensors": 56, "uavs": 5, "steps": 200, "test_size": 1000},
}
POLICY_COLUMNS = ("acc_policy_cached_lru", "acc_policy_psfl", "acc_policy_fedavg_weighted")
"""Each group's mean test accuracy (a column of ``model.model_table()``)."""


def run(*, size: str = "small", seeds: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """Each group's final accuracy and its own metrics, one row per seed."""
    torch.set_num_threads(1)
    rows = []
    for seed in seeds:
        model = mobidfl.MobiDFLModel(seed=int(seed), **SIZES[size], **WORLD).run()
        last = model.model_table().iloc[-1]
        columns = (*POLICY_COLUMNS, "area_acc_mean", "federations", "cache_size_mean",
                   "acc_mean")
        rows.append({"seed": int(seed), **{c: float(last[c]) for c in columns}})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=list(SIZES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", help="also write the per-seed rows to this CSV")
    args = parser.parse_args(argv)
    frame = run(size=args.size, seeds=args.seeds)
    if args.out:
        frame.to_csv(args.out, index=False)
    print(f"heterogeneous world, size {args.size}, seeds {args.seeds} (mean ± std)")
    for name in frame.columns.drop("seed"):
        print(f"  {name:30s} {mobidfl.mean_std(frame[name], digits=3, width=8)}")


if __name__ == "__main__":
    main()
