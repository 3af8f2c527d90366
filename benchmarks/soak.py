"""Soak: a small world stepped 1,000+ epochs per policy family; memory and time per step.

Each family runs in its own process (so one family's peak RSS is not another's): a world
of a few agents on a small grid, the MLP on the bundled 8x8 digits, one local step of batch
8, evaluation every 100 steps. Each family runs with the link model its policy honours:
``cached_lru`` and ``dpsgd`` send over ``distance_rate`` (contacts ``during``); PSFL and
MoFeL have no link model of their own (their policies do not honour one: the config
refuses it), so they run ``ideal``. Every ``--every`` steps the process's anonymous RSS and
peak RSS (``ru_maxrss``) and the mean wall time per step of the last interval are printed;
the summary is the least-squares growth per 100 steps after the warm-up
(``--warmup``, default 200 steps) of RSS and of time per step.

With ``--trim`` each sample is followed by ``gc.collect()`` and glibc's ``malloc_trim(0)``
and the *live* RSS is sampled too: RSS that grows without ``--trim`` but not with it is
freed heap that glibc keeps (fragmentation), not memory the run holds.

Run (cheaply, under nice): ``nice -n 10 python benchmarks/soak.py --steps 1200``;
``--family psfl`` for one family, ``--json FILE`` to keep the samples, ``--trim``,
``--set contacts_out=none`` (repeatable) to change one setting of the worlds when
bisecting a growth.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

WORLD: dict[str, Any] = {
    "map": "grid:5x5:100", "vehicles": 6, "pedestrians": 0, "sensors": 0, "uavs": 0,
    "dataset": "digits", "model": "mlp", "local_steps": 1, "batch_size": 8,
    "test_size": 50, "eval_every": 100, "early_stop_patience": 0, "workers": 1,
    "record_every": 1, "radius_m": 150.0,
}
LINK = {"link.model": "distance_rate", "contact": "during"}
FAMILIES: dict[str, dict[str, Any]] = {
    "cache (cached_lru)": {"policy": "cached_lru", "vehicle.mobility": "random_walk", **LINK},
    "mixing (dpsgd)": {"policy": "dpsgd", "vehicle.mobility": "random_walk", **LINK},
    "psfl": {"policy": "psfl", "vehicles": 0, "sensors": 6, "areas": 2,
             "sensor.mobility": "psfl_walker", "contact": "end"},
    "mofel": {"policy": "mofel", "vehicle.mobility": "route", "areas": 2, "mofel.servers": 2,
              "contact": "end"},
}


def rss_mib() -> float:
    """Current anonymous resident memory (``RssAnon`` in ``/proc/self/status``), MiB: the
    heap and tensors; file-backed pages (libraries) are left out, as a loaded machine
    evicts and reloads them regardless of the run."""
    with Path("/proc/self/status").open() as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon in /proc/self/status (Linux only)")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def live_mib() -> float:
    """RSS after a full garbage collection and glibc's ``malloc_trim(0)``: the memory the
    process still uses, without freed heap pages glibc keeps (fragmentation)."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_mib()


def soak(family: str, steps: int, every: int, seed: int, trim: bool = False,
         overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Step one family's world ``steps`` times; sample RSS and time per step every ``every``
    (with ``trim``, also the live RSS after ``malloc_trim``, which then resets the heap)."""
    import torch

    from mobidfl.model.world import MobiDFLModel

    torch.set_num_threads(1)
    settings = {**WORLD, **FAMILIES[family], **(overrides or {}), "steps": steps}
    model = MobiDFLModel(**settings, seed=seed)
    samples = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        model.step()
        if step % every == 0:
            now = time.perf_counter()
            samples.append({"step": step, "rss_mib": rss_mib(), "peak_mib": peak_mib(),
                            "ms_per_step": 1000 * (now - start) / every})
            if trim:
                samples[-1]["live_mib"] = live_mib()
            start = time.perf_counter()
            print(f"{family:20s} step {step:5d}  rss {samples[-1]['rss_mib']:7.1f} MiB  "
                  f"peak {samples[-1]['peak_mib']:7.1f} MiB  "
                  f"{samples[-1]['ms_per_step']:7.2f} ms/step"
                  + (f"  live {samples[-1]['live_mib']:7.1f} MiB" if trim else ""), flush=True)
    return {"family": family, "settings": settings, "samples": samples}


def growth_per_100(samples: list[dict[str, Any]], key: str, warmup: int) -> float:
    """Least-squares slope of ``key`` over steps after ``warmup``, per 100 steps."""
    rows = [s for s in samples if s["step"] > warmup]
    if len(rows) < 2:
        return float("nan")
    x = np.array([s["step"] for s in rows], dtype=float)
    y = np.array([s[key] for s in rows], dtype=float)
    return float(np.polyfit(x, y, 1)[0] * 100)


def _child(family: str, steps: int, every: int, seed: int, trim: bool,
           overrides: dict[str, Any], queue: Any) -> None:
    queue.put(soak(family, steps, every, seed, trim, overrides))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", action="append", choices=list(FAMILIES))
    parser.add_argument("--json", help="write every sample to this file")
    parser.add_argument("--trim", action="store_true",
                        help="also sample the live RSS after gc + malloc_trim at each interval")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override one setting of every family's world (bisecting growth)")
    args = parser.parse_args()
    from mobidfl.model.config import parse_assignments

    overrides = parse_assignments(args.set)
    context = multiprocessing.get_context("spawn")
    results = []
    for family in args.family or list(FAMILIES):
        queue = context.Queue()
        proc = context.Process(target=_child,
                               args=(family, args.steps, args.every, args.seed, args.trim,
                                     overrides, queue))
        proc.start()
        results.append(queue.get())
        proc.join()
    print(f"\n{'family':20s} {'RSS after warm-up':>18s} {'RSS /100 steps':>15s} "
          f"{'peak':>8s} {'ms/step':>8s} {'ms/step /100':>13s}")
    for r in results:
        s = r["samples"]
        after = [x for x in s if x["step"] > args.warmup] or s
        r["rss_growth_mib_per_100"] = growth_per_100(s, "rss_mib", args.warmup)
        r["time_growth_ms_per_100"] = growth_per_100(s, "ms_per_step", args.warmup)
        if args.trim:
            r["live_growth_mib_per_100"] = growth_per_100(s, "live_mib", args.warmup)
        print(f"{r['family']:20s} {after[0]['rss_mib']:15.1f} MiB "
              f"{r['rss_growth_mib_per_100']:+11.2f} MiB {s[-1]['peak_mib']:7.1f} "
              f"{np.median([x['ms_per_step'] for x in after]):8.2f} "
              f"{r['time_growth_ms_per_100']:+10.3f} ms"
              + (f"  live {r['live_growth_mib_per_100']:+.2f} MiB/100" if args.trim else ""))
    if args.json:
        with Path(args.json).open("w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
