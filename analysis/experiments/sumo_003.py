"""Does Cached-DFL still win under real traffic? Its comparison under SUMO.

Cached-DFL (Wang et al., AAAI 2025, Fig. 2) compares DFL without caches
(DeFedAvg, pairwise averaging with a car met) and Cached-DFL with LRU caches (C_max = 10,
tau_max = 5, Alg. 1-2) for cars that move by its own random-turn Manhattan model at a
constant 13.89 m/s. Here the same comparison runs twice on the same map and data:

* ``manhattan``: Cached-DFL's mobility (straight 0.5, left/right 0.25, constant speed);
* ``sumo``: Eclipse SUMO traffic on the same streets (car following, junction right of way,
  traffic lights guessed by netconvert, trips from randomTrips.py, speed limit 13.89 m/s,
  speed factors normc(1, 0.1, 0.8, 1.2), cars re-inserted where they arrive).

Everything else is Cached-DFL's setting as in :mod:`analysis.experiments.caching_003`
(120 s epochs, R = 100 m, contacts at any moment of the epoch, shards, lr 0.1, K local
steps, MLP on mnist5k at the smaller scales). The output: final and half-way accuracy per
mobility and policy, the LRU - DFL gap per mobility (mean ± std over seeds, and per seed),
neighbours met per epoch and cache fill.

Scales:

Measured at ``small`` (seeds 0 1 2, 375 s wall at load ~10 on 2 cores): final accuracy
LRU 89.7 ± 2.1 vs DFL 66.6 ± 2.7 % under ``manhattan`` (17.6 neighbours per epoch), LRU
89.7 ± 1.7 vs DFL 66.1 ± 4.0 % under ``sumo`` (15.2 neighbours per epoch): the LRU - DFL
gap is 23.0 ± 1.6 and 23.7 ± 3.1 points, i.e. the paper's result does not change under
SUMO traffic on this dense map (caches are full under both). At ``ci`` (seeds 0 1): gap
39.9 ± 1.9 (manhattan) and 36.1 ± 0.6 points (sumo).

* ``ci``: 12 cars, 6 epochs, K = 5, 2 seeds (the test ``tests/test_exp_sumo.py``);
* ``small``: 30 cars, 30 epochs, K = 10, 3 seeds: ``python -m analysis.experiments.sumo_003
  --scale small --seeds 0 1 2`` (measured numbers in the README section "Real traffic");
* ``full``: 100 cars, 200 epochs, Cached-DFL's ``cached_cnn`` on ``fashion_mnist`` (needs the
  files under ``data_root``) on ``grid:30x30`` (a 2.9 km square, so 100 cars are not 48
  per km^2 as on ``nyc_uws``): hours per seed on one core, not run here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import torch

from analysis.experiments import caching_003
from analysis.experiments.harness import experiment_parser, print_tables, run_and_save
from analysis.stats import mean_std
from model.errors import ConfigError

MOBILITIES = ("manhattan", "sumo")
POLICIES = ("cached_lru", "defedavg")


@dataclass(frozen=True)
class Scale:
    base: caching_003.Scale
    map: str


SCALES: dict[str, Scale] = {
    "ci": Scale(
        replace(caching_003.SCALES["ci"], cars=12, steps=6, local_steps=5, test_size=200),
        map="nyc_uws",
    ),
    "small": Scale(replace(caching_003.SCALES["small"], steps=30), map="nyc_uws"),
    "full": Scale(caching_003.SCALES["full"], map="grid:30x30"),
}


def settings_for(scale: Scale, *, seed: int, mobility: str, policy: str) -> dict[str, Any]:
    """Cached-DFL's setting (caching_003.base_settings) with the mobility and map swapped."""
    return caching_003.base_settings(scale.base, seed=seed) | {
        "map": scale.map,
        "pedestrians": 0,
        "sensors": 0,
        "uavs": 0,
        "vehicle.mobility": mobility,
        "policy": policy,
        "sumo_step_length": 1.0,
        "sumo_warmup_s": 60.0,
        "sumo_fringe_factor": 1.0,
    }


def run(*, scale: str = "small", seeds: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """One row per (seed, mobility, policy) run."""
    if scale not in SCALES:
        raise ConfigError("--scale", scale, "one of " + ", ".join(SCALES))
    torch.set_num_threads(1)
    sc = SCALES[scale]
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for mobility in MOBILITIES:
            for policy in POLICIES:
                settings = settings_for(sc, seed=int(seed), mobility=mobility, policy=policy)
                result = caching_003.run_one(settings, eval_every=sc.base.eval_every)
                rows.append({"seed": int(seed), "mobility": mobility, "policy": policy, **result})
    return pd.DataFrame(rows)


def gaps(df: pd.DataFrame) -> pd.DataFrame:
    """LRU minus DFL final accuracy per seed and mobility (fractions)."""
    wide = df.pivot_table(index=["mobility", "seed"], columns="policy", values="final_acc")
    return (wide["cached_lru"] - wide["defedavg"]).rename("lru_minus_dfl").reset_index()


def tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    out: dict[str, pd.DataFrame] = {}
    rows = []
    for mobility in MOBILITIES:
        for policy in POLICIES:
            cell = df[(df.mobility == mobility) & (df.policy == policy)]
            if cell.empty:
                continue
            rows.append(
                {
                    "mobility": mobility,
                    "policy": caching_003.POLICY_LABELS.get(policy, policy),
                    "acc. at half (%)": mean_std(cell.half_acc, factor=100, digits=1),
                    "final acc. (%)": mean_std(cell.final_acc, factor=100, digits=1),
                    "neighbours/epoch": mean_std(cell.neighbours_mean, digits=1),
                    "cached models": mean_std(cell.cache_count, digits=1)
                    if "cache_count" in cell and cell.cache_count.notna().any()
                    else "",
                }
            )
    out["Fig. 2 under both mobilities: accuracy (%), mean ± std over seeds"] = pd.DataFrame(
        rows
    ).set_index(["mobility", "policy"])
    g = gaps(df)
    summary = g.groupby("mobility").lru_minus_dfl.agg(
        gap=lambda s: mean_std(s, factor=100, digits=1),
        per_seed=lambda s: " ".join(f"{100 * v:+.1f}" for v in s),
    )
    summary.columns = ["LRU - DFL (points)", "per seed"]
    out["How the result changes: Cached-DFL LRU minus DFL, final accuracy"] = summary
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = experiment_parser(
        __doc__, sorted(SCALES), out_help="write the per-run rows to this CSV"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    df = run_and_save(lambda: run(scale=args.scale, seeds=args.seeds), args.out)
    sc = SCALES[args.scale]
    print(
        f"Cached-DFL under manhattan vs sumo, scale {args.scale}: {sc.base.cars} cars on "
        f"{sc.map}, {sc.base.steps} epochs of 120 s, {sc.base.dataset}/{sc.base.model}, "
        f"K = {sc.base.local_steps}, C_max = {sc.base.cache_size}, tau_max = {sc.base.tau_max}, "
        f"seeds {list(args.seeds)}"
    )
    print_tables(tables(df))
    print(f"\n{len(df)} runs, {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
