"""A heterogeneous world: every kind of device runs a different paper's system in one run.

Vehicles drive the Upper West Side with Cached-DFL (``cached_lru``), static
sensors form PSFL federations (``psfl``), and UAVs fly DCM routes (``dcm``,
Reza et al.) while mixing with FedAvg weights (Reza et al., eq. 2). Data are area-skewed
(``partition = "area"``), so sensors in one area share labels. Each policy only mixes with
members of its own group; contacts across kinds are recorded but not used for exchange.

What it shows: one ``MobiDFLModel`` run carries several exchange policies side by side,
each with its own metrics columns (``cache_size_mean``, ``federations``, ...) and its own
``acc_policy_<name>`` column.

Scales: ``ci`` (10 steps, 1 seed, a few seconds), ``small`` (40 steps; about 1 minute per
seed on one idle core), ``full`` (200 steps, 100 vehicles, 56 sensors, 5 UAVs; tens of
minutes per seed, not run here).

Run: ``python -m analysis.experiments.heterogeneous --scale small --seeds 0 1 2``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from analysis.experiments.harness import experiment_parser, run_and_save
from analysis.stats import mean_std
from model.world import MobiDFLModel

SCENARIO = {
    "map": "nyc_uws",
    "pedestrians": 0,
    "vehicle.policy": "cached_lru",
    "sensor.policy": "psfl",
    "uav.policy": "fedavg_weighted",
    "uav.mobility": "dcm",
    "partition": "area",
    "psfl_sigma": 5.0,
    "psfl_loss": "mean",  # sigma 5 was set on eq. 3's per-sample mean scale
}
SCALES = {
    "ci": dict(vehicles=20, sensors=12, uavs=3, steps=10, test_size=200),
    "small": dict(vehicles=30, sensors=20, uavs=4, steps=40, test_size=500),
    "full": dict(vehicles=100, sensors=56, uavs=5, steps=200, test_size=1000),
}
POLICY_COLUMNS = ("acc_policy_cached_lru", "acc_policy_psfl", "acc_policy_fedavg_weighted")


def run(*, scale: str = "small", seeds: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """Final accuracy per policy group and the groups' own metrics, one row per seed."""
    torch.set_num_threads(1)
    rows = []
    for seed in seeds:
        model = MobiDFLModel(seed=seed, **SCALES[scale], **SCENARIO).run()
        last = model.model_table().iloc[-1]
        rows.append(
            {
                "seed": seed,
                **{c: last[c] for c in POLICY_COLUMNS},
                "area_acc_mean": last["area_acc_mean"],
                "federations": last["federations"],
                "cache_size_mean": last["cache_size_mean"],
                "acc_mean": last["acc_mean"],
            }
        )
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = experiment_parser(__doc__, sorted(SCALES), out_help="CSV file for the per-seed rows")
    args = parser.parse_args(argv)
    frame = run_and_save(lambda: run(scale=args.scale, seeds=args.seeds), args.out)
    print(f"heterogeneous world, scale={args.scale}, seeds={args.seeds}")
    for name in frame.columns.drop("seed"):
        print(f"  {name:30s} {mean_std(frame[name], digits=3, width=8)}")


if __name__ == "__main__":
    main()
