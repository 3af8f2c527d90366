r"""What crosses a contact, and what it does to learning.

Cached-DFL vs DFL on the authors' Manhattan, unlimited vs 802.11p links, the paper's CNN and a
ResNet-18-size model.

The world is the ``cached_dfl_003`` preset (Wang et al., AAAI 2025,
"Decentralized Federated Learning with Model Caching on Mobile Agents", Fig. 2): 100 cars
on the authors' own Manhattan roads (``manhattan_cdfl``), R = 138 m and 19.23 m/s as their
code drove them, 120 s epochs, cache 10, tau_max 5, shards, the paper's CNN. Policies:
Cached-DFL (``cached_lru``) and DFL (``dpsgd``), with ``local`` (no exchange) as the floor.
Links (:data:`LINKS`):

* ``ideal``: ``fixed_rate`` at ``inf``, the ideal exchange with byte accounting (the same run
  as ``link = "ideal"``: tests/model/test_links.py checks it);
* ``dsrc-cnn``: ``distance_rate`` with the 802.11p profile, the trained CNN on the air;
* ``dsrc-mobilenetv2``: the same link, a MobileNetV2 on the air (3,504,872 parameters,
  14.0 MB; simulated bytes), between the two;
* ``dsrc-resnet18``: the same link, a ResNet-18 on the air (11,689,512 parameters, 46.8 MB;
  ``link.params``: simulated bytes, the CNN still trains);
* ``dsrc-resnet18-resume``: as above with ``link.resume = true`` (a cut model continues at
  the pair's next contact).

Departures from the preset, for a shared 2-core machine (:data:`DEPARTURES`, each with its
reason; docs/studies/links.md): 2 local steps instead of 10, a 200-sample test set evaluated
every 2nd epoch, one worker, 20 epochs instead of up to 1,000.

Two commands. ``run`` trains every (policy, link, seed) and writes each run's ``model.csv``
to ``--out`` as soon as it ends (a finished run is skipped on a re-run, so a crash loses
only the run under way); ``report`` reads them, prints the table (mean over seeds,
min-max in brackets), writes the per-epoch data as one CSV and plots accuracy over
epochs per policy and link (mean with a min-max band)::

    python -m mobidfl.analysis.studies.link_study run --out results/link_study --seeds 0,1,2 --steps
    20 python -m mobidfl.analysis.studies.link_study report --out results/link_study \
        --csv published/studies/links_study.csv --plot docs/studies/links_accuracy.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.atomic import write_csv, write_figure

RESNET18 = 11_689_512
"""Parameters of torchvision's ResNet-18 (He et al., 2016; 1000 classes)."""
MOBILENET_V2 = 3_504_872
"""Parameters of torchvision's MobileNetV2 (Sandler et al., 2018; 1000 classes)."""

LINKS: dict[str, dict[str, Any]] = {
    "ideal": {"link.model": "fixed_rate", "link.fixed_rate.rate_bps": float("inf")},
    "dsrc-cnn": {"link.model": "distance_rate", "link.profile": "dsrc"},
    "dsrc-mobilenetv2": {"link.model": "distance_rate", "link.profile": "dsrc",
                         "link.params": MOBILENET_V2},
    "dsrc-resnet18": {"link.model": "distance_rate", "link.profile": "dsrc",
                      "link.params": RESNET18},
    "dsrc-resnet18-resume": {"link.model": "distance_rate", "link.profile": "dsrc",
                             "link.params": RESNET18, "link.resume": True},
}
POLICIES = {"cached_lru": "Cached-DFL (LRU)", "dpsgd": "DFL (D-PSGD)",
            "local": "local only"}
"""Policies and their labels; ``local`` (no exchange, the floor) runs with ``ideal`` only,
since it sends nothing over any link."""
DEPARTURES: dict[str, Any] = {
    "local_steps": 2,   # preset 10: training is the bulk of an epoch's cost
    "test_size": 200,   # preset 10,000 (mnist5k's test split holds 1,000): evaluation cost
    "eval_every": 2,    # preset 1: evaluation cost; the curve keeps 10 points in 20 epochs
    "workers": 1,       # one core per run on a machine shared by seven
}
COLUMNS = ("step", "contacts", "acc_mean", "acc_min", "cache_size_mean", "bytes_sent",
           "bytes_received", "transfers_aborted", "airtime_s", "energy_j")


def settings_of(policy: str, link: str, seed: int, steps: int) -> dict[str, Any]:
    """The run's settings: the preset, the study's departures, the policy and the link."""
    return {"preset": "cached_dfl_003", "policy": policy, "seed": seed, "steps": steps,
            **DEPARTURES, **LINKS[link]}


def run_one(policy: str, link: str, seed: int, steps: int, out: Path) -> Path:
    """Train one run and write its model table (plus message size, wall and CPU time) to ``out``.

    A run already written is kept as it is.
    """
    path = out / f"{policy}__{link}__s{seed}.csv"
    if path.exists():
        return path
    from mobidfl.model.maths.link import message_bytes
    from mobidfl.model.world import MobiDFLModel

    start, cpu = time.perf_counter(), time.process_time()
    model = MobiDFLModel(**settings_of(policy, link, seed, steps)).run()
    table = model.model_table()
    params = LINKS[link].get("link.params") or model.learner.engine.num_params
    table["message_bytes"] = message_bytes(params, dtype="fp32", overhead=64)
    table["wall_s"] = time.perf_counter() - start
    table["cpu_s"] = time.process_time() - cpu
    table["policy"], table["link"], table["seed"] = policy, link, seed
    write_csv(table, path, index=False)  # whole or absent: a crash never leaves half a run
    return path


def load(out: Path) -> pd.DataFrame:
    """Every finished run under ``out``, one row per run and epoch (epoch 0 dropped)."""
    frames = [pd.read_csv(p) for p in sorted(out.glob("*__*__s*.csv"))]
    if not frames:
        raise SystemExit(f"{out}: no finished runs")
    data = pd.concat(frames, ignore_index=True)
    keep = [c for c in (*COLUMNS, "message_bytes", "wall_s", "cpu_s", "policy", "link", "seed")
            if c in data.columns]
    return data.loc[data["step"] > 0, keep].reset_index(drop=True)


def per_run(data: pd.DataFrame, cars: int = 100) -> pd.DataFrame:
    """The study's numbers per run.

    Models delivered per contact (bytes received over the message size; a resumed model counts only
    its last part), transfers cut per epoch, MB and joules per car per epoch, the final accuracy and
    the best seen.
    """
    rows = []
    for (policy, link, seed), g in data.groupby(["policy", "link", "seed"], sort=False):
        size = float(g["message_bytes"].iloc[0])
        contacts = float(g["contacts"].sum())
        acc = g["acc_mean"].dropna()
        rows.append({
            "policy": policy, "link": link, "seed": seed, "epochs": int(g["step"].max()),
            "contacts/epoch": contacts / len(g),
            "models/contact": float(g["bytes_received"].sum()) / size / max(contacts, 1.0),
            "cut/epoch": float(g["transfers_aborted"].mean()),
            "MB/car/epoch": float(g["bytes_received"].mean()) / cars / 1e6,
            "radio s/car/epoch": float(g["airtime_s"].mean()) / cars,
            "J/car/epoch": float(g["energy_j"].mean()) / cars,
            "acc final": float(acc.iloc[-1]), "acc best": float(acc.max()),
            "wall_s": float(g["wall_s"].iloc[0]),
        })
    return pd.DataFrame(rows)


def table_text(runs: pd.DataFrame) -> str:
    """A markdown table, one row per policy and link: mean over seeds [min-max]."""
    keys = [c for c in runs.columns if c not in ("policy", "link", "seed", "epochs", "wall_s")]
    lines = ["| policy | link | seeds | " + " | ".join(keys) + " |",
             "|---|---|---|" + "---|" * len(keys)]
    for policy, label in POLICIES.items():
        for link in LINKS:
            g = runs[(runs["policy"] == policy) & (runs["link"] == link)]
            if g.empty:
                continue
            cells = []
            for key in keys:
                lo, mean, hi = g[key].min(), g[key].mean(), g[key].max()
                cells.append(f"{mean:.3g}" if np.isclose(lo, hi, rtol=5e-3, atol=1e-12)
                             else f"{mean:.3g} [{lo:.3g}-{hi:.3g}]")
            lines.append(f"| {label} | {link} | {len(g)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(data: pd.DataFrame, path: Path) -> None:
    """Accuracy over epochs, one panel per link, one line per policy.

    Mean over seeds with a min-max band (evaluated epochs only: ``model.csv`` repeats the last
    accuracy between evaluations).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    links = [link for link in LINKS if link in set(data["link"])]
    fig, axes = plt.subplots(1, len(links), figsize=(3.3 * len(links), 3.2), sharey=True,
                             squeeze=False)
    floor = data[(data["policy"] == "local") & (data["step"] % DEPARTURES["eval_every"] == 0)]
    floor = floor.dropna(subset=["acc_mean"]).groupby("step")["acc_mean"].mean()
    for ax, link in zip(axes[0], links, strict=True):
        if len(floor):
            ax.plot(floor.index, floor.values, color="grey", ls="--", lw=1,
                    label=POLICIES["local"] + " (mean)")
        for policy, label in POLICIES.items():
            if policy == "local":
                continue
            g = data[(data["link"] == link) & (data["policy"] == policy)
                     & (data["step"] % DEPARTURES["eval_every"] == 0)].dropna(subset=["acc_mean"])
            if g.empty:
                continue
            curve = g.groupby("step")["acc_mean"].agg(["mean", "min", "max"])
            line, = ax.plot(curve.index, curve["mean"], marker="o", ms=3,
                            label=f"{label} ({g['seed'].nunique()} seeds)")
            ax.fill_between(curve.index, curve["min"], curve["max"], alpha=0.25,
                            color=line.get_color())
        ax.set_title(link, fontsize=10)
        ax.set_xlabel("epoch (120 s)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean accuracy of the 100 cars")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    write_figure(fig, path, dpi=110)
    plt.close(fig)


def main() -> None:
    """Command line of the study: ``run`` or ``report``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("--out", type=Path, default=Path("results/link_study"),
                        help="folder of the per-run model.csv files")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=20, help="epochs per run")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--links", default=",".join(LINKS))
    parser.add_argument("--csv", type=Path, help="report: write the per-epoch data here")
    parser.add_argument("--plot", type=Path, help="report: write the accuracy plot here")
    args = parser.parse_args()
    if args.command == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        for seed in (int(s) for s in args.seeds.split(",")):  # whole seeds first
            for policy in args.policies.split(","):
                for link in args.links.split(","):
                    if policy == "local" and link != "ideal":
                        continue  # sends nothing: every link gives the same run
                    path = run_one(policy, link, seed, args.steps, args.out)
                    print(f"{path.name}: {json.dumps(per_run(load_one(path)).iloc[0].to_dict())}",
                          flush=True)
        return
    data = load(args.out)
    print(table_text(per_run(data)))
    if args.csv:
        write_csv(data, args.csv, index=False, float_format="%.6g")
    if args.plot:
        plot(data, args.plot)


def load_one(path: Path) -> pd.DataFrame:
    """One run's rows as :func:`load` gives them."""
    data = pd.read_csv(path)
    return data[data["step"] > 0].reset_index(drop=True)


if __name__ == "__main__":
    main()
