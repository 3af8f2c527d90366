"""Move + contacts for 1k / 10k / 100k vehicles on a city-sized street grid, side by side.

Issue 15, item 3: ``map = grid:134x134`` (17,956 intersections), Manhattan mobility at
13.89 m/s, 120 s steps, ``during`` contacts with R = 100 m (34 sub-samples a step), learning
off. Times one step's mobility (``advance``) and contact detection (``contact_matrix``)
separately, the contact pairs found and pairs/s, and memory per agent: the tracemalloc peak
of one step (numpy buffers are traced) and the RSS growth of creating the agents, divided by
the agent count. ``--dense`` adds the bundled ``nyc_uws`` map (46 intersections) with 10k
agents, the crowded case whose candidate search is blocked to bound memory
(:data:`model.contacts.PAIR_BUDGET`).

Run: ``python benchmarks/city_scale.py [--sizes 1000,10000,100000] [--steps 2] [--dense]
[--contact during|end]`` (``end``: positions at the step's end only, one sub-sample).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc

import numpy as np

import model.contacts as contacts
from agents.mobility import MobilityContext, make_mobility
from model.config import Config
from model.contacts import contact_matrix, sub_samples
from model.world import shared_world_map


def rss_mb() -> float:
    """Current resident set size (Linux /proc), MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(
    map_name: str, n: int, steps: int, *, contact: str, threads: bool = False
) -> dict[str, float]:
    """Median seconds per step of moving and of contacts, pairs, memory per agent."""
    config = Config().updated(
        {"map": map_name, "vehicles": n, "pedestrians": 0, "sensors": 0, "uavs": 0,
         "learning": False, "contact": contact, "radius_m": 100.0, "step_s": 120.0,
         "seed": 0}
    )  # fmt: skip
    world = shared_world_map(config)
    rng = np.random.default_rng(0)
    before = rss_mb()
    mobility = make_mobility(
        "manhattan", world=world, kind="vehicle", count=n, settings=config, rng=rng
    )
    created = rss_mb() - before
    count = sub_samples(
        max_step_distance=mobility.max_step_distance(config.step_s), radius_m=config.radius_m
    ) if contact == "during" else 1
    ctx = MobilityContext(
        world=None, step_s=config.step_s, fractions=np.arange(1, count + 1) / count, rng=rng
    )
    move, found, pairs, peak = [], [], [], 0
    for _ in range(steps):
        tracemalloc.start()
        trajectory = np.empty((count + 1, n, 2))
        trajectory[0] = mobility.position
        t = time.perf_counter()
        trajectory[1:] = mobility.advance(ctx)
        move.append(time.perf_counter() - t)
        t = time.perf_counter()
        adjacency = contact_matrix(trajectory, radius_m=config.radius_m, mode=contact)
        found.append(time.perf_counter() - t)
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        pairs.append(adjacency.nnz // 2)
        if threads:  # the same trajectory on 1 and 2 threads, alternating: same pairs
            times: dict[int, float] = {}
            for k in (1, 2, 1, 2):
                contacts.CONTACT_THREADS, contacts.THREADED_FROM = k, 0
                t = time.perf_counter()
                again = contact_matrix(trajectory, radius_m=config.radius_m, mode=contact)
                times[k] = min(times.get(k, float("inf")), time.perf_counter() - t)
                assert (again != adjacency).nnz == 0
            contacts.CONTACT_THREADS, contacts.THREADED_FROM = 1, 20_000  # the defaults
            print(f"  contacts on 1 thread {times[1]:.2f} s, 2 threads {times[2]:.2f} s: "
                  f"{times[1] / times[2]:.2f}x (load {os.getloadavg()[0]:.2f})")
        del trajectory, adjacency
    return {
        "move": float(np.median(move)),
        "contacts": float(np.median(found)),
        "pairs": float(np.median(pairs)),
        "sub": float(count),
        "peak_b": peak / n,
        "rss_b": created * 2**20 / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--map", default="grid:134x134")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--dense", action="store_true", help="also nyc_uws with 10k agents")
    parser.add_argument("--contact", default="during", choices=("during", "end"))
    parser.add_argument("--threads", action="store_true",
                        help="also time contacts on 1 vs 2 threads at the largest size")
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}; map {args.map}; one 120 s step, R = 100 m, "
          f"contact = {args.contact}")
    t = time.perf_counter()
    world = shared_world_map(Config().updated({"map": args.map, "seed": 0}))
    print(f"map set-up {time.perf_counter() - t:.1f} s; {world.graph.number_of_nodes()} "
          f"intersections, drive network {len(world.drive.edge_len)} edges")
    header = (f"{'map':>14s}{'agents':>8s}{'move s':>8s}{'contacts s':>11s}{'step s':>8s}"
              f"{'pairs':>11s}{'pairs/s':>11s}{'peak B/agent':>13s}"
              f"{'RSS B/agent':>12s}{'sub':>5s}")  # fmt: skip
    print(header)
    cases: list[tuple] = [(args.map, int(v)) for v in args.sizes.split(",")]
    if args.dense:  # crowded: with and without skipping pairs already found (same pairs)
        cases += [("nyc_uws", 10_000, False), ("nyc_uws", 10_000, True)]
    for map_name, n, *skip in cases:
        contacts.SKIP_KNOWN = skip[0] if skip else True
        if skip:
            print(f"  (SKIP_KNOWN = {contacts.SKIP_KNOWN})")
        largest = n == max(c[1] for c in cases) and map_name == args.map
        r = measure(map_name, n, args.steps, contact=args.contact,
                    threads=args.threads and largest)  # fmt: skip
        step = r["move"] + r["contacts"]
        print(f"{map_name:>14s}{n:8d}{r['move']:8.2f}{r['contacts']:11.2f}{step:8.2f}"
              f"{r['pairs']:11.0f}{r['pairs'] / r['contacts']:11.0f}{r['peak_b']:13.0f}"
              f"{r['rss_b']:12.0f}{r['sub']:5.0f}", flush=True)  # fmt: skip
    print(f"load after {os.getloadavg()[0]:.2f}; max RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
