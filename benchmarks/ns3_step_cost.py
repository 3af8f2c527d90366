"""Cost per step of ``link = "ns3"`` (packet-level 802.11p) against ``distance_rate``.

Issue 26, item 5: "where it is affordable, offer link = "ns3" ... for small worlds, with its
cost per step measured". The world is the Cached-DFL preset ``cached_dfl_003`` (the authors'
Manhattan, 120 s steps, R = 138 m) with fewer cars and learning off; after each step both link
models plan the same contact table (``LinkModel.plan``: what each stay can carry). Printed per
step: stays in range, seconds of contact ns-3 replayed, wall and CPU seconds of each plan, and
the bytes both say the stays carry. ns-3's import (seconds, once per process) is timed apart.

Needs the optional extra: ``pip install 'mobidfl[ns3]'``.
Run: ``python benchmarks/ns3_step_cost.py --agents 25,50 --steps 2``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mobidfl.model.config import Config
from mobidfl.model.links import make_link
from mobidfl.model.world import MobiDFLModel

MESSAGE = 116_200
"""Cached-DFL's CNN in fp32 plus 64 B: one model message."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="25,50")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    from ns import ns  # noqa: F401 - the import alone takes seconds: time it apart

    print(f"ns-3 import {time.perf_counter() - started:.1f} s")
    for agents in map(int, args.agents.split(",")):
        m = MobiDFLModel(preset="cached_dfl_003", learning=False, steps=args.steps,
                         seed=args.seed, vehicles=agents, link="ns3")
        rate = make_link(Config.from_settings({"preset": "cached_dfl_003",
                                               "vehicles": agents, "link.model": "distance_rate"}))
        rows = []
        for _ in range(args.steps):
            t = time.perf_counter()
            m.step()
            step_s = time.perf_counter() - t
            table = m.contact_table
            timings = {}
            for name, link in (("distance_rate", rate), ("ns3", m.link)):
                wall, cpu = time.perf_counter(), time.process_time()
                before = getattr(link, "replayed_s", 0.0)
                plan = link.plan(table, kinds=m.kind_of, message_bytes=MESSAGE, n=m.n_agents)
                timings[name] = (time.perf_counter() - wall, time.process_time() - cpu,
                                 float(plan.capacity.sum()), getattr(link, "replayed_s", 0.0)
                                 - before)
            rows.append((len(table), step_s, timings))
            d, s = timings["distance_rate"], timings["ns3"]
            print(f"{agents} cars, step {m.steps}: {len(table)} stays, {s[3]:.0f} s replayed | "
                  f"mobility + contacts {step_s:.2f} s | distance_rate plan {1e3 * d[0]:.1f} ms "
                  f"({d[2] / 1e6:.0f} MB) | ns3 plan {s[0]:.1f} s wall, {s[1]:.1f} s CPU "
                  f"({s[2] / 1e6:.0f} MB)")
        cpu = np.mean([r[2]["ns3"][1] for r in rows])
        replay = np.sum([r[2]["ns3"][3] for r in rows])
        per = np.sum([r[2]["ns3"][1] for r in rows]) / max(replay, 1e-9)
        print(f"{agents} cars: ns3 {cpu:.1f} s CPU per step, {per:.2f} s CPU per second of "
              f"contact replayed")


if __name__ == "__main__":
    main()
