"""de Heredia 2024: client mobility in D-PSGD, HM-LM gap, mobility-aware weights.

What the thesis measured (Sec. 6, non-IID CIFAR-10, LeNet, N = 48 clients, 3 seeds):

* Table 1: final test accuracy rises with the proportion p of high-mobility (HM) clients
  (+2.73 / +4.64 / +8.56 points at p = 0.05 / 0.2 / 0.8 over p = 0);
* Table 2: HM clients are more accurate than low-mobility (LM) ones "throughout the
  experiment", the gap shrinking with p (+4.81 at p = 0.05, +0.90 at p = 0.8);
* Tables 3, 4, 7: mobility-aware weights ``W_ij = 1/N + alpha (X_ij - 1/N)`` (Sec. 5.4)
  reduce the gap at small p (alpha = 0.4: 3.16 vs 4.81 at p = 0.05) with no clear accuracy
  change for alpha <= 0.4, while the naive alpha = 1 costs 1-5 points of accuracy.

How MobiDFL runs it (scaled down, same mechanisms):

* 48 pedestrians doing de Heredia's random walk (``random_walk``, four directions at 1/4,
  reflection at the box, speeds LM ~ U(0, s_max), HM ~ U(beta s_max, 2 beta s_max),
  beta = 1.75), contacts = within R at any moment of the step (``contact = during``);
* the box is the bounding box of the bundled ``nyc_uws`` map (800 m x 776 m). The thesis'
  code uses a 500 x 500 box, R = 45 and s_max = 50 box units per iteration; both lengths are
  scaled by ``sqrt(w h) / 500`` (R = 70.9 m, s_max * step = 78.8 m, i.e. s_max = 1.31 m/s
  with 60 s steps: LM clients walk, HM clients cycle at 2.3-4.6 m/s). Scaling both lengths
  keeps R / box and step / box, hence the mean neighbour count, the same (the density
  table of :func:`density_check` shows it: identical to the 500 x 500 box within 0.05);
* data: ``mnist5k`` (the offline default, 4,500 training images) instead of CIFAR-10, with
  Cached-DFL's non-IID shards (``partition = shards``); the thesis' optimiser settings
  (SGD lr 0.01, batch 8, 3 local steps per round); an MLP (784-128-10) instead of LeNet
  (CPU time); evaluation on a shared 500-image test sample every ``eval_every`` steps;
* "final accuracy" = mean client accuracy averaged over the last ``final_window``
  evaluations (less noisy than the very last one); "throughout" = mean over every
  evaluation after step 0.

Scales (run times measured on this 2-core machine while other jobs ran, one thread):

* ``ci``: p in {0, 0.05, 0.8}, plain and alpha = 1, 16 rounds, 6 runs per seed: 20 s of
  CPU, 40-55 s wall per seed at load 5-7;
* ``small``: p in {0, 0.05, 0.2, 0.8}, plain and alpha in {0.1, 0.4, 1.0}, 60 rounds,
  16 runs per seed: 3 seeds took 32 min wall at load ~7 (about 7 min of CPU, i.e. 2-3 min
  per seed on an idle core);
* ``full``: all p and alpha of the thesis on CIFAR-10 with LeNet-5, 300 rounds (the
  thesis does not state its round count), 42 runs per seed; needs CIFAR-10 files under
  ``data_root``; expected about 6-8 h per seed on one CPU core (not run here).

Measured at ``small`` (3 seeds), against the thesis: Table 1's rise with p is reproduced
(+12.4 / +22.8 points at p = 0.2 / 0.8; larger than the thesis' +4.6 / +8.6 because the
MLP on MNIST is still climbing after 60 rounds) but not at p = 0.05 (-0.7 ± 1.7, thesis
+2.7; 2 HM clients out of 48); the HM-LM gap is positive (+5.6 at p = 0.05) but hardly
shrinks with p (+4.6 at p = 0.8, thesis +0.9); alpha <= 0.4 changes final accuracy by
< 1 point (as in the thesis), alpha = 0.4 lowers the gap at p = 0.05 / 0.2 (4.4 vs 5.6 /
5.3), alpha = 1 costs 0.9-7.3 points (thesis 1.2-5.1) and raises the gap at p = 0.8.

Run: ``python -m analysis.experiments.mobility_000 --scale small --seeds 0 1 2``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from analysis.experiments.harness import experiment_parser, print_tables, run_and_save
from analysis.stats import mean_std
from model.errors import ConfigError
from model.world import MobiDFLModel, shared_world_map

MAP = "nyc_uws"
PAPER_BOX = 500.0
"""Side of the thesis code's square world (box units)."""
PAPER_RADIUS = 45.0
"""Communication radius R of the thesis code (box units)."""
PAPER_S_MAX = 50.0
"""LM speed bound of the thesis code, box units per iteration; HM = U(1.75, 3.5) x this."""
PAPER_BETA = 1.75
STEP_S = 60.0
"""Seconds per round here (only sets the speed unit: s_max * STEP_S is what matters)."""

PAPER_TABLE1 = {0.05: 2.73, 0.2: 4.64, 0.4: 6.51, 0.6: 6.71, 0.8: 8.56, 1.0: 8.97}
PAPER_TABLE3 = {  # HM - LM accuracy throughout (points); alpha 0 = plain (= Table 2)
    0.0: {0.05: 4.81, 0.2: 4.13, 0.4: 2.53, 0.6: 2.04, 0.8: 0.90},
    0.1: {0.05: 4.66, 0.2: 3.79, 0.4: 2.84, 0.6: 1.90, 0.8: 1.27},
    0.2: {0.05: 3.35, 0.2: 3.70, 0.4: 3.00, 0.6: 2.35, 0.8: 1.20},
    0.3: {0.05: 4.26, 0.2: 3.92, 0.4: 2.81, 0.6: 1.97, 0.8: 1.24},
    0.4: {0.05: 3.16, 0.2: 3.17, 0.4: 2.64, 0.6: 2.28, 0.8: 1.19},
    1.0: {0.05: 3.76, 0.2: 3.45, 0.4: 3.47, 0.6: 3.44, 0.8: 2.89},
}
PAPER_TABLE7 = {  # final accuracy, mobility-aware minus plain (points), non-IID
    0.1: {0.0: 0.02, 0.05: 0.85, 0.2: -1.53, 0.4: 0.42, 0.6: 1.33, 0.8: -0.05, 1.0: -0.70},
    0.2: {0.0: 0.29, 0.05: -0.37, 0.2: 0.16, 0.4: -0.07, 0.6: 0.91, 0.8: 0.01, 1.0: -0.13},
    0.3: {0.0: 0.91, 0.05: -1.30, 0.2: 0.05, 0.4: -0.63, 0.6: 0.53, 0.8: 0.13, 1.0: -0.30},
    0.4: {0.0: 0.98, 0.05: -1.40, 0.2: -0.43, 0.4: -1.05, 0.6: 0.13, 0.8: -1.17, 1.0: -0.30},
    1.0: {0.0: -2.28, 0.05: -4.20, 0.2: -5.11, 0.4: -4.51, 0.6: -2.03, 0.8: -1.20, 1.0: -0.56},
}


@dataclass(frozen=True)
class Scale:
    """One size of the experiment."""

    clients: int
    steps: int
    proportions: tuple[float, ...]
    alphas: tuple[float, ...]  # 0.0 = plain averaging (policy dpsgd)
    eval_every: int
    final_window: int  # evaluations averaged into the "final" accuracy
    dataset: str = "mnist5k"
    model: str = "mlp"
    lr: float = 0.01
    batch_size: int = 8
    local_steps: int = 3
    test_size: int = 500


SCALES: dict[str, Scale] = {
    "ci": Scale(
        48, 16, (0.0, 0.05, 0.8), (0.0, 1.0), eval_every=2, final_window=2, test_size=300
    ),
    "small": Scale(48, 60, (0.0, 0.05, 0.2, 0.8), (0.0, 0.1, 0.4, 1.0), 2, 3),
    "full": Scale(
        48,
        300,
        (0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 1.0),
        (0.0, 0.1, 0.2, 0.3, 0.4, 1.0),
        eval_every=1,
        final_window=5,
        dataset="cifar10",
        model="lenet5",
        test_size=1000,
    ),
}


def paper_geometry(bounds: Sequence[float], *, step_s: float = STEP_S) -> dict[str, float]:
    """Radius and s_max that keep the thesis' geometry on a box of the given bounds.

    The thesis code's 500 x 500 box with R = 45 and LM speeds up to 50 per iteration is
    scaled by ``sqrt(w h) / 500``, so R / box and (distance per round) / box are unchanged.
    """
    west, south, east, north = (float(v) for v in bounds)
    side = math.sqrt(max(east - west, 0.0) * max(north - south, 0.0))
    if side <= 0:
        raise ConfigError("map", tuple(bounds), "a map with a non-empty bounding box")
    factor = side / PAPER_BOX
    return {"radius_m": PAPER_RADIUS * factor, "s_max": PAPER_S_MAX * factor / step_s}


def scale_of(name: str) -> Scale:
    if name not in SCALES:
        raise ConfigError("--scale", name, "one of " + ", ".join(SCALES))
    return SCALES[name]


def settings_for(scale: Scale, *, p: float, alpha: float, seed: int) -> dict[str, Any]:
    """The run settings of one (p, alpha, seed) cell."""
    world = shared_world_map(_base_config())
    geometry = paper_geometry(world.bounds)
    return {
        "map": MAP,
        "vehicles": 0,
        "pedestrians": scale.clients,
        "sensors": 0,
        "uavs": 0,
        "pedestrian.mobility": "random_walk",
        "hm_fraction": p,
        "beta": PAPER_BETA,
        "s_max": geometry["s_max"],
        "radius_m": geometry["radius_m"],
        "step_s": STEP_S,
        "contact": "during",
        "steps": scale.steps,
        "seed": seed,
        "dataset": scale.dataset,
        "model": scale.model,
        "partition": "shards",
        "lr": scale.lr,
        "batch_size": scale.batch_size,
        "local_steps": scale.local_steps,
        "test_size": scale.test_size,
        "eval_every": scale.eval_every,
        "policy": "dpsgd" if alpha == 0.0 else "mobility_aware",
        "mobility_alpha": alpha,
    }


def _base_config():
    from model.config import Config

    return Config().updated(map=MAP)


def run_one(settings: dict[str, Any], *, eval_every: int, final_window: int) -> dict[str, float]:
    """Run one configuration; return its summary numbers (accuracies as fractions)."""
    start = time.perf_counter()
    model = MobiDFLModel(**settings)
    model.run()
    table = model.model_table()
    evaluated = table[(table["step"] > 0) & (table["step"] % eval_every == 0)]
    last = evaluated.tail(final_window)
    out = {
        "final_acc": float(last["acc_mean"].mean()),
        "neighbours_mean": float(table["neighbours_mean"].iloc[1:].mean()),
        "seconds": time.perf_counter() - start,
    }
    if "hm_lm_gap" in table:
        out |= {
            "gap_throughout": float(evaluated["hm_lm_gap"].mean()),
            "final_acc_hm": float(last["acc_hm"].mean()),
            "final_acc_lm": float(last["acc_lm"].mean()),
            "distinct_hm": float(table["distinct_neighbours_hm"].iloc[-1]),
            "distinct_lm": float(table["distinct_neighbours_lm"].iloc[-1]),
        }
    return out


def run(*, scale: str = "small", seeds: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """All (p, alpha, seed) cells of ``scale``: one row each (accuracies in [0, 1])."""
    torch.set_num_threads(1)
    sc = scale_of(scale)
    rows = []
    for seed in seeds:
        for p in sc.proportions:
            for alpha in sc.alphas:
                settings = settings_for(sc, p=p, alpha=alpha, seed=int(seed))
                result = run_one(settings, eval_every=sc.eval_every, final_window=sc.final_window)
                rows.append({"p": p, "alpha": alpha, "seed": int(seed), **result})
    return pd.DataFrame(rows)


def density_check(*, proportions: Sequence[float], seeds: Sequence[int], steps: int = 30):
    """Mean neighbours per client per round: this setup vs the thesis' 500 x 500 box.

    Mobility only (no learning). The thesis box is the synthetic ``grid:6x6:100`` map
    (500 m x 500 m) with R = 45 m and s_max = 50 m per round.
    """
    rows = []
    for p in proportions:
        for seed in seeds:
            ours = settings_for(SCALES["ci"], p=p, alpha=0.0, seed=int(seed))
            box = ours | {
                "map": "grid:6x6:100",
                "radius_m": PAPER_RADIUS,
                "s_max": PAPER_S_MAX / STEP_S,
            }
            for name, settings in (("nyc_uws scaled", ours), ("thesis 500x500 box", box)):
                settings = settings | {"learning": False, "steps": steps}
                model = MobiDFLModel(**settings).run()
                table = model.model_table()
                rows.append(
                    {
                        "p": p,
                        "world": name,
                        "seed": int(seed),
                        "neighbours": float(table["neighbours_mean"].iloc[1:].mean()),
                    }
                )
    frame = pd.DataFrame(rows)
    return frame.pivot_table(index="p", columns="world", values="neighbours", aggfunc="mean")


# --- tables -----------------------------------------------------------------------------
def _pm(values: pd.Series | np.ndarray) -> str:
    """Percentage points, signed: :func:`analysis.stats.mean_std`."""
    return mean_std(values, factor=100, digits=2, signed=True)


def _paired(df: pd.DataFrame, value: str, *, p: float, alpha: float, ref_p: float,
            ref_alpha: float) -> pd.Series:
    """Per-seed difference value(p, alpha) - value(ref_p, ref_alpha)."""
    a = df[(df.p == p) & (df.alpha == alpha)].set_index("seed")[value]
    b = df[(df.p == ref_p) & (df.alpha == ref_alpha)].set_index("seed")[value]
    return (a - b).dropna()


def tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The thesis' tables from :func:`run`'s rows (percentage points, mean ± std)."""
    ps = sorted(df.p.unique())
    alphas = sorted(df.alpha.unique())
    out: dict[str, pd.DataFrame] = {}
    if 0.0 in ps and 0.0 in alphas:
        out["Table 1: final accuracy minus p = 0 (plain, points)"] = pd.DataFrame(
            {
                "MobiDFL": [_pm(_paired(df, "final_acc", p=p, alpha=0.0, ref_p=0.0,
                                        ref_alpha=0.0)) for p in ps if p > 0],
                "thesis": [f"{PAPER_TABLE1.get(p, float('nan')):+.2f}" for p in ps if p > 0],
                "final acc. (%)": [
                    _pm(df[(df.p == p) & (df.alpha == 0.0)].final_acc) for p in ps if p > 0
                ],
            },
            index=pd.Index([p for p in ps if p > 0], name="p"),
        )
    hm_ps = [p for p in ps if 0 < p < 1]
    if hm_ps and "gap_throughout" in df:
        rows = {}
        for alpha in alphas:
            label = "plain" if alpha == 0.0 else f"alpha = {alpha:g}"
            sub = df[df.alpha == alpha]
            rows[label] = [_pm(sub[sub.p == p].gap_throughout) for p in hm_ps]
            rows[f"  thesis {label}"] = [
                f"{PAPER_TABLE3.get(alpha, {}).get(p, float('nan')):+.2f}" for p in hm_ps
            ]
        out["Tables 2-3: HM - LM accuracy throughout (points)"] = pd.DataFrame(
            rows, index=pd.Index(hm_ps, name="p")
        ).T
        plain = df[df.alpha == 0.0]
        out["App. B: distinct neighbours at the end (plain)"] = pd.DataFrame(
            {
                "HM": [f"{plain[plain.p == p].distinct_hm.mean():.1f}" for p in hm_ps],
                "LM": [f"{plain[plain.p == p].distinct_lm.mean():.1f}" for p in hm_ps],
                "final acc HM (%)": [_pm(plain[plain.p == p].final_acc_hm) for p in hm_ps],
                "final acc LM (%)": [_pm(plain[plain.p == p].final_acc_lm) for p in hm_ps],
            },
            index=pd.Index(hm_ps, name="p"),
        )
    if 0.0 in alphas and len(alphas) > 1:
        rows = {}
        for alpha in alphas:
            if alpha == 0.0:
                continue
            rows[f"alpha = {alpha:g}"] = [
                _pm(_paired(df, "final_acc", p=p, alpha=alpha, ref_p=p, ref_alpha=0.0))
                for p in ps
            ]
            rows[f"  thesis alpha = {alpha:g}"] = [
                f"{PAPER_TABLE7.get(alpha, {}).get(p, float('nan')):+.2f}" for p in ps
            ]
        out["Tables 4, 7: final accuracy, mobility-aware minus plain (points)"] = pd.DataFrame(
            rows, index=pd.Index(ps, name="p")
        ).T
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = experiment_parser(
        __doc__, sorted(SCALES), out_help="write the per-run rows to this CSV"
    )
    parser.add_argument("--no-density", action="store_true", help="skip the density table")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    df = run_and_save(lambda: run(scale=args.scale, seeds=args.seeds), args.out)
    sc = SCALES[args.scale]
    print(
        f"de Heredia 2024, scale {args.scale}: {sc.clients} clients, {sc.steps} rounds, "
        f"{sc.dataset}/{sc.model}, shards, seeds {list(args.seeds)}; mean ± std over seeds"
    )
    print_tables(tables(df))
    if not args.no_density:
        dens = density_check(proportions=sc.proportions, seeds=args.seeds[:1])
        print(f"\nMean neighbours per client per round (mobility only)\n{dens.round(2)}")
    print(
        f"\n{len(df)} runs, {df.seconds.sum():.0f} s of runs, "
        f"{time.perf_counter() - start:.0f} s in all"
    )


if __name__ == "__main__":
    main()
