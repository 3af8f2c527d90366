"""Reza et al. (DAM/DCM): distribution-aware mobility of a few mobile clients in DFL.

What the paper measured (MNIST, 18 x 18 grid, 20 clients of which |C_m| mobile, FedAvg-weighted
mixing over neighbours within R_c (eq. 2), Dirichlet alpha, 1,000 rounds, 10 runs):

* Fig. 2 (|C_m| = 5, R_c = 3): Static < Random Movement < DAM <= DCM, for unconstrained
  (R_m = inf) and constrained (R_m = 5) movement; at alpha = 0.05 DAM and DCM are about
  8 points above Random on average (3 points at alpha = 0.1); unconstrained beats constrained.
* Fig. 3(a) (R_c = 3, R_m = 5, alpha = 0.05): accuracy rises with |C_m|; DCM and DAM are on
  average 7 and 5.3 points above Random across |C_m|.
* Fig. 3(b) (|C_m| = 3, R_m = 5, alpha = 0.05): accuracy rises with R_c; at R_c = 1 DCM and
  DAM are about 15 points above Random.

How MobiDFL runs it:

* world: ``map = grid:2x2:<10 G>`` with ``cell_m = 10`` gives exactly a G x G grid of 10 m
  cells (asserted); static clients are ``sensors`` (``static`` mobility, each on its own
  random cell), mobile clients are ``uavs`` with ``uav.mobility`` = ``random_grid`` (eq. 3),
  ``dam`` (eqs. 4-8) or ``dcm`` (Alg. 1, eq. 9). "Static" = the same 20 clients with
  ``uav.mobility = static``. Initial cells and data are the same across patterns for a
  given seed (paired comparison);
* R_c in cells -> ``radius_m = (R_c + 0.01) * cell_m`` (the 1 % slack keeps cells exactly
  R_c away in range despite float rounding in metres; the next lattice distance is
  sqrt(R_c^2 + 1), far above); R_m -> ``rm_cells``; contacts at the end of the round
  (``contact = end``: the paper exchanges at the new locations); ``policy = fedavg_weighted``
  (eq. 2); ``partition = dirichlet``;
* data: ``mnist5k`` (offline default; 4,000 training / 500 shared test images) instead of
  MNIST 60k; model: the paper's two-conv + two-FC ``cnn`` at ``full`` scale, the 784-128-10
  ``mlp`` at ``ci``/``small`` (CPU time). The paper trains one full-batch GD step per round
  (lr 0.3, momentum 0.9, weight decay 5e-4). The engine draws equal-size batches without
  replacement and Dirichlet(0.05) leaves some clients with 10 samples, so here each round is
  5 SGD steps of batch 10, lr 0.01, the paper's momentum 0.9 and weight decay 5e-4 (per
  round about the paper's step length: 5 x 0.01 / (1 - 0.9) = 0.5 vs 0.3). Same settings
  for every pattern; nothing tuned per claim;
* accuracy = mean test accuracy of all clients (``acc_mean``), averaged over the last
  ``final_window`` evaluations (every ``eval_every`` rounds, as in the paper's every 10);
  also reported: how many distinct static clients each mobile client met (``met_static``).

Scales (wall times on this 2-core machine shared with other jobs, one thread):

* ``ci``: 10 x 10 grid, 10 clients (3 mobile), R_c = 2, 60 rounds, Fig. 2 unconstrained
  (R_m = inf) only, 4 runs: 8 s per seed on a quiet core (66 s at load 9). A smoke-sized
  regression check of the direction, not evidence: at 60 rounds the seed-to-seed spread is
  as large as the effects (seed 1's static layout beats Random there); the ``small`` tables
  are the evidence;
* ``small``: the paper's world (18 x 18, 20 clients, R_c = 3, R_m in {5, inf}) with
  200 rounds; Fig. 2 at alpha = 0.05, Fig. 3(a) |C_m| in {1, 3, 5}, Fig. 3(b) R_c in
  {1, 2, 3}: 19 distinct runs per seed (shared points run once). Measured: 310 s for one
  seed on a quiet core (~16 s per run), 12-16 min per seed when the machine was loaded;
  33 min wall for seeds 0, 1, 2;
* ``full``: the paper's settings (1,000 rounds, ``cnn``, alpha in {0.05, 0.1},
  |C_m| in {1, 2, 3, 4, 5, 7}, R_c in {1, 2, 3, 4, 5}), 10 seeds: 41 distinct runs per seed
  of about 2.5-3 min CPU each (estimated from ``small``: 5x the rounds, ~2.5x the cost per
  sample for the CNN), i.e. ~2 h per seed and ~20 h for 10 seeds on one core (not run
  here). Pass ``--dataset mnist --data-root DIR`` for the real MNIST.

Run: ``python -m analysis.experiments.dam_001 --scale small --seeds 0 1 2``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from analysis.experiments.harness import experiment_parser, run_and_save
from analysis.stats import mean_std
from model.errors import ConfigError
from model.world import MobiDFLModel

CELL_M = 10.0
"""Cell side in metres (any value works; 10 m keeps the numbers readable)."""
RC_SLACK = 0.01
"""Cells added to R_c when converting to metres (see the module docstring)."""

LABELS = {"static": "Static", "random_grid": "Random", "dam": "DAM", "dcm": "DCM"}
MOBILE_PATTERNS = ("random_grid", "dam", "dcm")

PAPER_CLAIMS = {
    "fig2": "Static < Random < DAM <= DCM; DAM/DCM ~ +8 pts over Random (alpha 0.05), "
    "unconstrained > constrained",
    "fig3a": "accuracy rises with |C_m|; DCM +7, DAM +5.3 pts over Random on average",
    "fig3b": "accuracy rises with R_c; at R_c = 1 DCM and DAM ~ +15 pts over Random",
}


@dataclass(frozen=True)
class Scale:
    """One size of the experiment (the paper's values at ``full``)."""

    grid: int
    clients: int
    mobile: int  # |C_m| of Fig. 2
    rc: float  # R_c of Fig. 2 and 3(a), cells
    rm: float  # constrained R_m, cells
    rounds: int
    eval_every: int
    final_window: int
    alphas: tuple[float, ...]
    rm_values: tuple[float, ...]  # Fig. 2 columns
    mobile_values: tuple[int, ...]  # Fig. 3(a); empty = skip
    rc_values: tuple[float, ...]  # Fig. 3(b); empty = skip
    mobile_3b: int = 3
    dataset: str = "mnist5k"
    data_root: str | None = None
    model: str = "mlp"
    batch_size: int = 10
    local_steps: int = 5
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 5e-4
    test_size: int = 500


INF = float("inf")
SCALES: dict[str, Scale] = {
    "ci": Scale(
        grid=10, clients=10, mobile=3, rc=2.0, rm=3.0, rounds=60, eval_every=10,
        final_window=2, alphas=(0.05,), rm_values=(INF,), mobile_values=(), rc_values=(),
    ),
    "small": Scale(
        grid=18, clients=20, mobile=5, rc=3.0, rm=5.0, rounds=200, eval_every=10,
        final_window=3, alphas=(0.05,), rm_values=(5.0, INF), mobile_values=(1, 3, 5),
        rc_values=(1.0, 2.0, 3.0),
    ),
    "full": Scale(
        grid=18, clients=20, mobile=5, rc=3.0, rm=5.0, rounds=1000, eval_every=10,
        final_window=1, alphas=(0.05, 0.1), rm_values=(5.0, INF),
        mobile_values=(1, 2, 3, 4, 5, 7), rc_values=(1.0, 2.0, 3.0, 4.0, 5.0), model="cnn",
    ),
}


@dataclass(frozen=True)
class Cell:
    """One distinct run configuration (seed aside)."""

    mobility: str
    alpha: float
    rm: float
    rc: float
    mobile: int


def scale_of(name: str) -> Scale:
    if name not in SCALES:
        raise ConfigError("--scale", name, "one of " + ", ".join(SCALES))
    return SCALES[name]


def settings_for(scale: Scale, cell: Cell, *, seed: int) -> dict[str, Any]:
    """MobiDFL settings of one configuration (module docstring: how each maps)."""
    if not 0 < cell.mobile < scale.clients:
        raise ConfigError("mobile clients", cell.mobile, f"1 .. {scale.clients - 1}")
    return {
        "map": f"grid:2x2:{scale.grid * CELL_M:g}",
        "cell_m": CELL_M,
        "vehicles": 0,
        "pedestrians": 0,
        "sensors": scale.clients - cell.mobile,
        "uavs": cell.mobile,
        "sensor.mobility": "static",
        "uav.mobility": cell.mobility,
        "rm_cells": cell.rm,
        "radius_m": (cell.rc + RC_SLACK) * CELL_M,
        "contact": "end",
        "policy": "fedavg_weighted",
        "partition": "dirichlet",
        "dirichlet_alpha": cell.alpha,
        "dataset": scale.dataset,
        "data_root": scale.data_root,
        "model": scale.model,
        "batch_size": scale.batch_size,
        "local_steps": scale.local_steps,
        "lr": scale.lr,
        "momentum": scale.momentum,
        "weight_decay": scale.weight_decay,
        "test_size": scale.test_size,
        "steps": scale.rounds,
        "eval_every": scale.eval_every,
        "record_every": scale.rounds,
        "seed": seed,
    }


def figure_cells(scale: Scale) -> dict[str, list[tuple[dict[str, Any], Cell]]]:
    """Per figure: (table coordinates, configuration) pairs; shared runs appear twice."""
    out: dict[str, list[tuple[dict[str, Any], Cell]]] = {"fig2": [], "fig3a": [], "fig3b": []}
    for alpha in scale.alphas:
        for rm in scale.rm_values:
            for mob in ("static", *MOBILE_PATTERNS):
                # Static does not depend on R_m: one run, shown under every R_m column.
                run_rm = scale.rm if mob == "static" else rm
                out["fig2"].append(
                    ({"alpha": alpha, "rm": rm}, Cell(mob, alpha, run_rm, scale.rc, scale.mobile))
                )
    alpha = scale.alphas[0]
    for m in scale.mobile_values:
        for mob in MOBILE_PATTERNS:
            out["fig3a"].append(({"mobile": m}, Cell(mob, alpha, scale.rm, scale.rc, m)))
    for rc in scale.rc_values:
        for mob in MOBILE_PATTERNS:
            out["fig3b"].append(({"rc": rc}, Cell(mob, alpha, scale.rm, rc, scale.mobile_3b)))
    return out


def run_one(settings: dict[str, Any], *, scale: Scale) -> dict[str, float]:
    """Run one configuration; accuracy is a fraction, averaged over the last evaluations."""
    start = time.perf_counter()
    model = MobiDFLModel(**settings)
    grid = model.world_map.grid
    if (grid.rows, grid.cols) != (scale.grid, scale.grid):
        raise ConfigError("map", settings["map"], f"a {scale.grid} x {scale.grid} grid")
    model.run()
    table = model.model_table()
    evaluated = table[(table["step"] > 0) & (table["step"] % scale.eval_every == 0)]
    mobile = model.kind_of == "uav"
    static = model.kind_of == "sensor"
    met = model.met[mobile][:, static]
    return {
        "accuracy": float(evaluated["acc_mean"].tail(scale.final_window).mean()),
        "met_static": float(np.asarray(met.sum(axis=1)).mean()),
        "seconds": time.perf_counter() - start,
    }


def run(
    *,
    scale: str = "small",
    seeds: Sequence[int] = (0, 1, 2),
    overrides: dict[str, Any] | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """All figures of one scale; one row per (figure, coordinates, pattern, seed).

    Args:
        scale: ``ci``, ``small`` or ``full`` (module docstring).
        seeds: replicate seeds (layout, data split, initial models, movement).
        overrides: Scale fields to replace (e.g. ``{"dataset": "mnist"}``).
        progress: print one line per finished run.
    """
    torch.set_num_threads(1)
    sc = scale_of(scale)
    if overrides:
        sc = replace(sc, **overrides)
    figures = figure_cells(sc)
    cache: dict[tuple[Cell, int], dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        for figure, entries in figures.items():
            for coords, cell in entries:
                key = (cell, int(seed))
                if key not in cache:
                    cache[key] = run_one(settings_for(sc, cell, seed=int(seed)), scale=sc)
                    if progress:
                        print(f"  {cell} seed={seed}: {cache[key]}", flush=True)
                rows.append(
                    {
                        "figure": figure,
                        "alpha": cell.alpha,
                        "rm": coords.get("rm", cell.rm),
                        "rm_run": cell.rm,
                        "rc": cell.rc,
                        "mobile": cell.mobile,
                        "pattern": LABELS[cell.mobility],
                        "seed": int(seed),
                        **cache[key],
                    }
                )
    return pd.DataFrame(rows)


def _mean_std(values: pd.Series) -> str:
    """Accuracy in percent, padded to line up: :func:`analysis.stats.mean_std`."""
    return mean_std(values, factor=100, digits=1, width=5)


def table(frame: pd.DataFrame, figure: str) -> pd.DataFrame:
    """Paper-style table: patterns as rows, the figure's x-axis as columns (accuracy %)."""
    part = frame[frame["figure"] == figure]
    if part.empty:
        return pd.DataFrame()
    column = {"fig2": ["alpha", "rm"], "fig3a": ["mobile"], "fig3b": ["rc"]}[figure]
    order = [p for p in LABELS.values() if p in set(part["pattern"])]
    out = part.groupby([*column, "pattern"])["accuracy"].apply(_mean_std).unstack(column)
    out = out.reindex(order)
    # paired difference to Random (same seeds, same layout), mean over seeds
    wide = part.pivot_table(index=["seed", *column], columns="pattern", values="accuracy")
    for pat in ("DAM", "DCM"):
        if pat in wide and "Random" in wide:
            diff = (100.0 * (wide[pat] - wide["Random"])).groupby(column).mean()
            out.loc[f"{pat} - Random"] = [f"{v:+5.1f}" for v in diff.reindex(out.columns)]
    out.columns = [_column_name(c, column) for c in out.columns]
    return out


def _column_name(value: Any, names: list[str]) -> str:
    values = value if isinstance(value, tuple) else (value,)
    parts = []
    for name, v in zip(names, values, strict=True):
        label = {"alpha": "a", "rm": "Rm", "mobile": "|Cm|", "rc": "Rc"}[name]
        parts.append(f"{label}={'inf' if v == INF else f'{v:g}'}")
    return " ".join(parts)


def main(argv: Sequence[str] | None = None) -> None:
    parser = experiment_parser(__doc__, SCALES, out_help="CSV file for the per-run rows")
    parser.add_argument("--dataset", default=None, help="override the dataset (e.g. mnist)")
    parser.add_argument("--data-root", default=None, help="folder with torchvision files")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.dataset:
        overrides["dataset"] = args.dataset
    if args.data_root:
        overrides["data_root"] = args.data_root
    start = time.perf_counter()
    frame = run_and_save(
        lambda: run(scale=args.scale, seeds=args.seeds, overrides=overrides, progress=True),
        args.out,
    )
    sc = scale_of(args.scale)
    print(
        f"\nReza et al. (DAM/DCM) on MobiDFL, scale={args.scale}: {sc.grid}x{sc.grid} grid, "
        f"{sc.clients} clients, {sc.rounds} rounds, {sc.dataset}/{sc.model}; "
        f"accuracy % of all clients, mean ± std over seeds {list(args.seeds)}"
    )
    titles = {
        "fig2": f"Fig. 2: |Cm|={sc.mobile}, Rc={sc.rc:g}",
        "fig3a": f"Fig. 3(a): accuracy vs |Cm| (Rc={sc.rc:g}, Rm={sc.rm:g})",
        "fig3b": f"Fig. 3(b): accuracy vs Rc (|Cm|={sc.mobile_3b}, Rm={sc.rm:g})",
    }
    for figure, title in titles.items():
        shown = table(frame, figure)
        if shown.empty:
            continue
        print(f"\n{title}\n  paper: {PAPER_CLAIMS[figure]}")
        print(shown.to_string())
    runs = frame.drop_duplicates(["alpha", "rm_run", "rc", "mobile", "pattern", "seed"])
    print(
        f"\n{len(runs)} distinct runs, {runs['seconds'].sum():.0f} s of run time, "
        f"{time.perf_counter() - start:.0f} s wall"
    )


if __name__ == "__main__":
    main()
