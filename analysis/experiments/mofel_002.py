"""MoFeL (Macedo et al., Sensors 2023): MoFeL vs A1 / A2, frustrated clients and cycles.

What the paper measured (Sec. 5-6; 4 central servers in a mesh, 100 clients, speeds
v_n ~ U(1 m/min, v_max), training times tau_n ~ U(1, 20) min, territorial reach
d_s ~ U(50, 100) m, 1 min time step, T = 2,000 min, LeNet-5 on MNIST, 10 local epochs):
Table 2 gives NTC (training cycles completed) and NFC (frustrated clients: started but
left before finishing) for v_max = 5, 15, 30 m/min. The stored copy of the paper lost the
table's numbers; its text gives the directions checked here:

* A1 (random clients at fixed intervals) has NFC > 0, growing from 5 to 30 m/min, and its
  NTC falls; A2 (connected clients that can finish) has NFC = 0 and its NTC falls;
* MoFeL's NFC stays (practically) 0 and it completes more cycles than A1 and A2 in every
  scenario ("more robust" to mobility; at 30 m/min it "performed X % more cycles").

How MobiDFL runs it (same mechanisms, scaled): 100 vehicles (``ci``: 40) on the bundled
``nyc_uws`` map (800 m x 760 m, 39 drive intersections) driving shortest paths to random
destinations (``route`` mobility: the disclosed routes the central station needs); the
map's 4 areas are the 4 servers' territories (k-means of road nodes, seeded by ``seed``,
so territories differ between seeds; one is often small); ``mnist5k`` split i.i.d. (the
paper: every client a unique uniform slice), an MLP instead of LeNet-5 (CPU time) except
at ``full``. Time step 10 s. As in the paper (Sec. 5.3), every client has its own speed
v_n ~ U(1 m/min, v_max) (``route_speed_min``; v_max = ``vehicle.speed``) and its own
training time tau_n ~ U(3, 60) s (``train_time_min_fraction`` = 0.05 of ``train_time_s``
= 60 s, the paper's U(1, 20) min); the station optimises over both. FedAvg over the clients
that finish. NTC counts a cycle only when every client that started it finished (Sec. 4:
"aggregation of results of all local training"); cycles aggregated with some clients
frustrated are reported as "partial cycles". MoFeL and A2 take any number of clients
(eq. 1 has no cap: ``mofel_max_clients = 0``); A1 draws 10 per cycle (the paper gives no
number). The station's interval Delta is 2 training times (``mofel_horizon``; the paper
gives no value); the exact MILP stops at 20,000 branch-and-bound nodes
(``mofel_node_limit``), never on a clock, so a seed always gives the same selection.
``required_accuracy`` 0.95: the paper's value was lost with its formulas; the MLP on
mnist5k levels off near 0.90, so servers keep asking for cycles, as the paper's servers
do in the mobile scenarios (Fig. 8), and NTC measures how many cycles each selection can
complete. All three policies see the same vehicles, speeds, training times, routes, data
and initial model per seed.

Speeds. 2 and 10 m/s stand for the paper's v_max = 5 and 30 m/min. That mapping was
calibrated earlier for one constant speed per run (the share of territory stays lasting at
least tau matched P(d / v >= tau) under the paper's distributions); it was kept, not
re-tuned, when speeds became per client, so clients are now slower on average (mean
~v_max / 2) than in that calibration.

Measured (``small`` = 100 vehicles, 180 steps, K = 2, at 2 and 10 m/s only, seeds 0-2;
each (seed, speed) run separately; the ± in this paragraph is the population std, ddof = 0,
which the table printed then; it now prints the sample std, 1.22x that for 3 seeds,
1.41x for 2): NFC is 0 for MoFeL and A2; A1's grows 75.0 ± 8.0 ->
345.3 ± 32.9 and its NTC falls 60.7 ± 7.4 -> 4.0 ± 0.8 (55 -> 112 partial cycles), the
paper's direction. MobiDFL disagrees on NTC: A2 completes 116.0 / 115.7 cycles (every
interval, all 4 servers: it is saturated, since with per-client speeds some clients are
always slow enough to finish) and MoFeL 100.0 ± 3.3 / 102.0 ± 4.1, fewer in every seed;
A2's NTC does not fall with speed. MoFeL runs larger cycles (21.9 / 13.5 clients) and its
servers' accuracy averaged over the run is the highest (0.816 / 0.815 vs A2 0.806 / 0.803,
A1 0.801 / 0.797), small margins. All 511 MoFeL selections were solved exactly (MILP, 24 s
of solving in all). At ``ci`` (40 vehicles, 60 steps, seeds 0-1, 10 m/s) MoFeL and A2 are
level: 34.5 vs 35.0 cycles (measured after the per-client changes; an earlier 39.0 vs 35.5
is superseded), MoFeL ahead on some seeds only.

Scales (wall times on this 2-core machine shared with other jobs, one thread):

* ``ci``: 40 vehicles, 60 steps (10 min = 10 training times), 2 and 10 m/s, K = 1 local
  step per step: 25-45 s per seed (10 s of CPU);
* ``small``: 100 vehicles, 180 steps (30 min = 30 training times), 2 / 6 / 10 m/s,
  K = 2, plus MoFeL with Delta = tau: 33-71 s per run at load ~8 (the measurement
  above ran the 2 and 10 m/s runs only, one (seed, speed) per process);
* ``full``: 100 vehicles, 1,200 steps (200 min = 200 training times, as the paper's
  2,000 min are about 190 mean training times), LeNet-5, K = 5 (10 local epochs of ~45
  images at batch 16 over the 6 steps of a cycle): expected 1-2 h per seed (not run).

Run: ``python -m analysis.experiments.mofel_002 --scale small --seeds 0 1 2``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from analysis.experiments.harness import experiment_parser, run_and_save
from analysis.stats import mean_std
from model.errors import ConfigError
from model.world import MobiDFLModel

POLICIES: tuple[str, ...] = ("mofel", "mofel_a1", "mofel_a2")
LABELS = {"mofel": "MoFeL", "mofel_a1": "A1", "mofel_a2": "A2"}
PAPER_SPEED = {2.0: "5 m/min", 6.0: "15 m/min", 10.0: "30 m/min"}
"""MobiDFL speed (m/s) -> the paper's v_max it stands for (see the module docstring)."""
PAPER_DIRECTION = {
    "mofel": "NFC ~ 0; most cycles; NTC grows with speed",
    "mofel_a1": "NFC > 0, grows with speed; NTC falls",
    "mofel_a2": "NFC = 0; NTC falls with speed",
}
"""What Table 2's text says per algorithm (its numbers were lost in extraction)."""


@dataclass(frozen=True)
class Scale:
    """One size of the experiment."""

    vehicles: int
    steps: int
    speeds: tuple[float, ...]
    local_steps: int
    test_size: int
    model: str = "mlp"
    horizons: tuple[float, ...] = ()
    """Extra MoFeL rows with Delta = h * train_time_s (sensitivity; the default is 2)."""


SCALES: dict[str, Scale] = {
    "ci": Scale(vehicles=40, steps=60, speeds=(2.0, 10.0), local_steps=1, test_size=200),
    "small": Scale(
        vehicles=100,
        steps=180,
        speeds=(2.0, 6.0, 10.0),
        local_steps=2,
        test_size=500,
        horizons=(1.0,),
    ),
    "full": Scale(
        vehicles=100,
        steps=1200,
        speeds=(2.0, 6.0, 10.0),
        local_steps=5,
        test_size=1000,
        model="lenet5",
    ),
}


def settings_for(scale: Scale, *, policy: str, speed: float, seed: int) -> dict[str, Any]:
    """MobiDFL settings of one run (public setting names)."""
    return {
        "map": "nyc_uws",
        "areas": 4,
        "servers": 4,
        "vehicles": scale.vehicles,
        "pedestrians": 0,
        "sensors": 0,
        "uavs": 0,
        "steps": scale.steps,
        "step_s": 10.0,
        "train_time_s": 60.0,
        "required_accuracy": 0.95,
        "contact": "end",
        "eval_every": 10**6,  # agents are evaluated at the end only; servers after each cycle
        "dataset": "mnist5k",
        "partition": "iid",
        "model": scale.model,
        "local_steps": scale.local_steps,
        "batch_size": 16,
        "test_size": scale.test_size,
        "seed": seed,
        "vehicle.mobility": "route",
        "vehicle.speed": speed,
        "vehicle.policy": policy,
        # the paper's per-client heterogeneity (Sec. 5.3) and eq. 1 without a client cap
        "train_time_min_fraction": 0.05,
        "route_speed_min": 1.0 / 60.0,
        "mofel_max_clients": 0,
        "mofel_horizon": 2.0,
        "mofel_node_limit": 20_000,
    }


def run_one(settings: dict[str, Any]) -> dict[str, Any]:
    """One run; final NTC/NFC and server accuracies, selection statistics, wall time."""
    started = time.perf_counter()
    model = MobiDFLModel(**settings).run()
    policy = model.learner.policies[settings["vehicle.policy"]][0]
    row = {key: float(value) for key, value in model.policy_metrics.items()}
    row["cycles_selected"] = len(policy.cycle_log) + len(policy.active)
    began = sum(any(c["started"]) for c in policy.cycle_log) + sum(
        bool(r.running and r.started.any()) for r in policy.active
    )
    row["clients_per_cycle"] = row["participants"] / max(1, began)
    row["server_acc_avg"] = float(model.model_table()["server_acc_mean"].mean())
    row["solve_s"] = float(getattr(policy, "solve_seconds", 0.0))
    row["wall_s"] = time.perf_counter() - started
    model.learner.engine.close()
    return row


def run(*, scale: str = "small", seeds: Sequence[int] = (0, 1, 2)) -> pd.DataFrame:
    """Every (seed, speed, policy) of ``scale``; one row per run."""
    if scale not in SCALES:
        raise ConfigError("--scale", scale, "one of " + ", ".join(SCALES))
    torch.set_num_threads(1)
    spec = SCALES[scale]
    rows = []
    for seed in seeds:
        for speed in spec.speeds:
            for policy in POLICIES:
                settings = settings_for(spec, policy=policy, speed=speed, seed=seed)
                rows.append({"seed": seed, "speed": speed, "policy": policy, **run_one(settings)})
            for h in spec.horizons:
                settings = settings_for(spec, policy="mofel", speed=speed, seed=seed)
                settings["mofel_horizon"] = h
                label = f"mofel_h{h:g}"
                rows.append({"seed": seed, "speed": speed, "policy": label, **run_one(settings)})
    return pd.DataFrame(rows)


def _label(policy: str) -> str:
    if policy.startswith("mofel_h"):
        return f"MoFeL Δ={policy.removeprefix('mofel_h')}τ"
    return LABELS[policy]


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Table 2 layout: per speed and algorithm, NTC and NFC (mean ± std over seeds)."""
    out = []
    for (speed, policy), part in df.groupby(["speed", "policy"], sort=True):
        out.append(
            {
                "speed m/s": speed,
                "paper v_max": PAPER_SPEED.get(float(speed), "-"),
                "algorithm": _label(str(policy)),
                "NTC": mean_std(part["ntc"], digits=1),
                "partial cycles": mean_std(part["ntc_partial"], digits=1),
                "NFC": mean_std(part["nfc"], digits=1),
                "clients/cycle": mean_std(part["clients_per_cycle"], digits=2),
                "server acc": mean_std(part["server_acc_mean"], digits=3),
                "acc (run avg)": mean_std(part["server_acc_avg"], digits=3),
                "server acc std": mean_std(part["server_acc_std"], digits=3),
                "paper (text of Table 2)": PAPER_DIRECTION.get(str(policy), "(not in paper)"),
            }
        )
    frame = pd.DataFrame(out)
    rank = {name: k for k, name in enumerate(LABELS.values())}
    frame["_o"] = frame["algorithm"].map(lambda a: rank.get(a, len(rank)))
    return frame.sort_values(["speed m/s", "_o"]).drop(columns="_o").reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = experiment_parser(
        __doc__, sorted(SCALES), out_help="write the per-run rows to this CSV"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    df = run_and_save(lambda: run(scale=args.scale, seeds=args.seeds), args.out)
    print(f"MoFeL, Table 2 (NTC / NFC), scale={args.scale}, seeds={args.seeds}")
    with pd.option_context("display.width", 200, "display.max_colwidth", 50):
        print(table(df).to_string(index=False))
    solver = df[df["policy"] == "mofel"][["solver_milp", "solver_greedy", "solve_s"]].sum()
    print(
        f"\nMoFeL selections: {int(solver['solver_milp'])} exact (MILP), "
        f"{int(solver['solver_greedy'])} greedy; {solver['solve_s']:.1f} s solving in all."
    )
    print(f"Total run time {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
