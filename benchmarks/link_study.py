"""What crosses a contact: Cached-DFL vs DFL on Manhattan, unlimited vs 802.11p links.

A transfer study (issue 26, item 7, the part this machine affords): the ``cached_dfl_003``
world (100 cars on the two-way Manhattan grid, the authors' range and speed), Cached-DFL
(``cached_lru``, cache 10) vs DFL (``dpsgd``), each with

* ``unlimited``: ``fixed_rate`` at ``inf`` (the ideal exchange, with byte accounting),
* ``dsrc-cnn``: ``distance_rate`` with the 802.11p profile, Cached-DFL's CNN on the air
  (29,034 parameters, 116 kB in fp32),
* ``dsrc-resnet18``: the same link, ResNet-18 on the air (11,689,512 parameters, 46.8 MB).

Training is cut to the minimum (MLP, one local step, final evaluation only): only bytes,
models delivered and aborted transfers are studied, not accuracy. Prints one row per
policy and link, mean over seeds (min-max in brackets).

Run: ``python benchmarks/link_study.py --seeds 0,1,2 --steps 5``.
"""

from __future__ import annotations

import argparse

import numpy as np

from model.maths.link import message_bytes
from model.world import MobiDFLModel

LINKS = {
    "unlimited": {"link.model": "fixed_rate", "link.rate_bps": float("inf"),
                  "link.params": 29_034},
    "dsrc-cnn": {"link.model": "distance_rate", "link.profile": "dsrc", "link.params": 29_034},
    "dsrc-resnet18": {"link.model": "distance_rate", "link.profile": "dsrc",
                      "link.params": 11_689_512},
}


def run(policy: str, link: str, seed: int, steps: int) -> dict[str, float]:
    settings = {
        "preset": "cached_dfl_003", "policy": policy, "seed": seed, "steps": steps,
        "model": "mlp", "local_steps": 1, "batch_size": 16, "test_size": 200,
        "eval_every": 1000, "early_stop_patience": 0, "lr_plateau_patience": 0, **LINKS[link],
    }
    model = MobiDFLModel(**settings).run()
    table = model.model_table().iloc[1:]
    size = message_bytes(LINKS[link]["link.params"], dtype="fp32", overhead=64)
    contacts = float(table["contacts"].sum())
    return {
        "contacts/step": contacts / steps,
        "models/contact": float(table["bytes_received"].sum()) / size / max(contacts, 1.0),
        "aborted/step": float(table["transfers_aborted"].mean()),
        "MB/car/step": float(table["bytes_received"].mean()) / 100 / 1e6,
        "J/car/step": float(table["energy_j"].mean()) / 100,
        "acc": float(table["acc_mean"].iloc[-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    for policy in ("cached_lru", "dpsgd"):
        for link in LINKS:
            rows = [run(policy, link, seed, args.steps) for seed in seeds]
            text = ", ".join(
                f"{key} {np.mean([r[key] for r in rows]):.3g} "
                f"[{min(r[key] for r in rows):.3g}-{max(r[key] for r in rows):.3g}]"
                for key in rows[0]
            )
            print(f"{policy:10s} {link:14s}: {text}", flush=True)


if __name__ == "__main__":
    main()
