"""Move + contacts for 1k / 10k / 100k vehicles on a city-sized street grid, old vs new.

Issue 15, item 3: ``map = grid:134x134`` (17,956 intersections), Manhattan mobility at
13.89 m/s, 120 s steps, ``during`` contacts with R = 100 m (34 sub-samples a step), learning
off. For each size one step is moved and its contacts found twice from the same state, with
the current code and with the code before the item-3 rewrite, side by side in this process:

* move: ``Manhattan.advance`` with the current ``StreetNetwork.xy`` / ``TurnTable.sample``
  and with the former binary-search versions (:func:`old_xy`, :func:`old_sample`, patched in);
  the two trajectories must be identical;
* contacts: :func:`mobidfl.model.contacts.contact_matrix` and the former code, kept verbatim as
  ``tests/contacts_oracle.py``; the two contact sets must be identical.

Printed: seconds (old, new, old / new), the contact pairs and pairs/s (new), and memory per
agent: the tracemalloc peak of each contact search (numpy buffers are traced, a separate
untimed pass) divided by the agents, and the RSS growth of creating the agents. ``--dense``
adds the bundled ``nyc_uws`` map (46 intersections) with 10k agents, the crowded case (a
dense bitmap, bounded memory). ``--contact end``: positions at the step's end only.

Run: ``python benchmarks/city_scale.py [--sizes 1000,10000,100000] [--repeat 1] [--dense]
[--contact during|end] [--no-old]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mobidfl.agents.mobility import MobilityContext, make_mobility
from mobidfl.maps.network import StreetNetwork, TurnTable
from mobidfl.model.config import Config
from mobidfl.model.contacts import contact_matrix, sub_samples
from mobidfl.model.world import shared_world_map
from tests.contacts_oracle import contact_matrix as old_contact_matrix


def old_xy(self: StreetNetwork, edges: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``StreetNetwork.xy`` before item 3: one binary search over all edge points."""
    keys = self.edge_base[edges] + offsets
    k = np.searchsorted(self.pts_key, keys, side="right") - 1
    k = np.clip(k, self.edge_pt0[edges], self.edge_pt1[edges] - 2)
    a, b = self.pts_xy[k], self.pts_xy[k + 1]
    span = np.maximum(self.pts_key[k + 1] - self.pts_key[k], 1e-12)
    t = np.clip((keys - self.pts_key[k]) / span, 0.0, 1.0)[:, None]
    return a + t * (b - a)


def old_sample(self: TurnTable, edges: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """``TurnTable.sample`` before item 3: one binary search over all turn entries."""
    keys = edges + np.minimum(uniforms, 1.0 - 1e-12)
    idx = np.searchsorted(self.cum, keys, side="right")
    idx = np.clip(idx, self.ptr[edges], self.ptr[edges + 1] - 1)
    return self.nxt[idx]


@contextmanager
def old_network():
    """The former position and turn-draw code patched in."""
    saved = StreetNetwork.xy, TurnTable.sample
    StreetNetwork.xy, TurnTable.sample = old_xy, old_sample
    try:
        yield
    finally:
        StreetNetwork.xy, TurnTable.sample = saved


def rss_mb() -> float:
    """Current resident set size (Linux /proc), MB."""
    with Path("/proc/self/statm").open() as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def traced_peak(fn, *args, **kwargs) -> int:
    """tracemalloc peak (bytes) of one call."""
    tracemalloc.start()
    fn(*args, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(map_name: str, n: int, *, contact: str, repeat: int, old: bool) -> dict:
    """One step moved and searched by the new (and old) code from the same state."""
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
    ) if contact == "during" else 1  # fmt: skip
    state = (mobility.edge.copy(), mobility.offset.copy(), mobility.position.copy())
    seed = rng.bit_generator.state

    def move(*, with_old: bool) -> tuple[np.ndarray, float]:
        mobility.edge, mobility.offset, mobility.position = (a.copy() for a in state)
        rng.bit_generator.state = seed
        ctx = MobilityContext(
            world=None, step_s=config.step_s, fractions=np.arange(1, count + 1) / count, rng=rng
        )
        trajectory = np.empty((count + 1, n, 2))
        trajectory[0] = mobility.position
        if with_old:
            with old_network():
                trajectory[1:], seconds = timed(mobility.advance, ctx)
        else:
            trajectory[1:], seconds = timed(mobility.advance, ctx)
        return trajectory, seconds

    r: dict = {"sub": count, "rss_b": created * 2**20 / n}
    kinds = (False, True) if old else (False,)
    best: dict = {}
    for _ in range(repeat):  # alternating, best of `repeat`
        for with_old in kinds:
            trajectory, seconds = move(with_old=with_old)
            search = old_contact_matrix if with_old else contact_matrix
            adjacency, found = timed(search, trajectory, radius_m=100.0, mode=contact)
            tag = "old" if with_old else "new"
            best[f"move_{tag}"] = min(best.get(f"move_{tag}", np.inf), seconds)
            best[f"contacts_{tag}"] = min(best.get(f"contacts_{tag}", np.inf), found)
            best[f"trajectory_{tag}"], best[f"adjacency_{tag}"] = trajectory, adjacency
    if old:
        assert np.array_equal(best["trajectory_old"], best["trajectory_new"]), "moves differ"
        assert (best["adjacency_old"] != best["adjacency_new"]).nnz == 0, "contacts differ"
    r |= {k: v for k, v in best.items() if k.startswith(("move", "contacts"))}
    r["pairs"] = best["adjacency_new"].nnz // 2
    trajectory = best["trajectory_new"]
    del best
    r["peak_new"] = traced_peak(contact_matrix, trajectory, radius_m=100.0, mode=contact) / n
    if old:
        r["peak_old"] = traced_peak(
            old_contact_matrix, trajectory, radius_m=100.0, mode=contact
        ) / n  # fmt: skip
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--map", default="grid:134x134")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs, best of")
    parser.add_argument("--dense", action="store_true", help="also nyc_uws with 10k agents")
    parser.add_argument("--contact", default="during", choices=("during", "end"))
    parser.add_argument("--no-old", action="store_true", help="the new code only")
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}; map {args.map}; one 120 s step, R = 100 m, "
          f"contact = {args.contact}; seconds: old / new = ratio")  # fmt: skip
    t = time.perf_counter()
    world = shared_world_map(Config().updated({"map": args.map, "seed": 0}))
    print(f"map set-up {time.perf_counter() - t:.1f} s; {world.graph.number_of_nodes()} "
          f"intersections, drive network {len(world.drive.edge_len)} edges")
    print(f"{'map':>14s}{'agents':>8s}{'sub':>4s} | {'move s':>19s} | {'contacts s':>21s} | "
          f"{'step s':>21s} | {'pairs':>10s}{'pairs/s':>10s} | {'peak B/agent':>15s}"
          f"{'RSS B/agent':>12s}{'load':>6s}")  # fmt: skip
    cases = [(args.map, int(v)) for v in args.sizes.split(",")]
    if args.dense:
        cases.append(("nyc_uws", 10_000))

    def trio(old: float | None, new: float, digits: int = 2) -> str:
        if old is None:
            return f"{'-':>7s} {new:6.{digits}f} {'':>6s}"
        return f"{old:7.{digits}f} {new:6.{digits}f} {old / new:5.1f}x"

    for map_name, n in cases:
        r = measure(map_name, n, contact=args.contact, repeat=args.repeat, old=not args.no_old)
        old = not args.no_old
        step_new = r["move_new"] + r["contacts_new"]
        step_old = r["move_old"] + r["contacts_old"] if old else None
        peak = f"{r['peak_old']:7.0f}/{r['peak_new']:7.0f}" if old else f"{r['peak_new']:15.0f}"
        print(f"{map_name:>14s}{n:8d}{r['sub']:4d} | "
              f"{trio(r.get('move_old'), r['move_new'])} | "
              f"{trio(r.get('contacts_old'), r['contacts_new'])} | "
              f"{trio(step_old, step_new)} | "
              f"{r['pairs']:10d}{r['pairs'] / r['contacts_new']:10.0f} | {peak:>15s}"
              f"{r['rss_b']:12.0f}{os.getloadavg()[0]:6.2f}", flush=True)  # fmt: skip
    print(f"load after {os.getloadavg()[0]:.2f}; max RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; peak B/agent: "
          "tracemalloc peak of one contact search (old/new) / agents")  # fmt: skip


if __name__ == "__main__":
    main()
