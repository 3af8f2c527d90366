"""A city that learns: N learning cars on the Cached-DFL authors' Manhattan, seconds per epoch.

Issue 34, item 3. ``map = manhattan_cdfl`` (the authors' road CSV), Manhattan mobility at
13.89 m/s, 120 s epochs, ``during`` contacts with R = 100 m, the default learning settings
(5 local SGD steps of batch 16, lr 0.05), Fashion-MNIST when installed (else ``mnist5k``)
split by ``shards_resampled`` (Cached-DFL's 4/3/2/1 shard mix, samples drawn with replacement
within each shard's label, so any fleet size has data), evaluation every ``--eval-every``
epochs on a shared ``--test-size``-image test set. For each (net, N, policy) one fresh
process builds the world, runs ``--epochs`` epochs and prints:

* seconds per epoch split into **move** (mobility), **contacts** (``during`` search and
  encounter times), **train** (local SGD), **exchange** (the policy: caches, snapshots,
  aggregation, mixing), **evaluate** (every agent on the test set, amortised: the time of
  the evaluations over all epochs / epochs) and **other** (data collection, records);
  wall seconds, and CPU seconds of the process and its workers (the robust unit on a
  shared machine);
* memory: the process's peak RSS minus its RSS before the world was built, per agent, the
  workers' peak RSS (shared stacks are counted there too), and
  :func:`mobidfl.model.bounds.estimate_memory_bytes` per agent for comparison; with a caching policy
  the distinct model snapshots the caches hold (shared ones counted once) per car.

Run: ``python benchmarks/city_learning.py [--sizes 1000,10000] [--nets mlp,cached_cnn]
[--policies dpsgd,cached_lru] [--epochs 2] [--workers 2]``. Each configuration is a child
process (``--one NET,N,POLICY`` runs one in this process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mobidfl.cores import cpu_model

FASHION = Path("/usr/share/datasets/fashion-mnist")
PHASES = ("move", "contacts", "train", "exchange", "evaluate", "other")


def _rss_bytes() -> int:
    with Path("/proc/self/statm").open() as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cpu_of(pids: list[int]) -> float:
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _hwm_bytes(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _pss_bytes(pid: int | str) -> int:
    """Proportional set size: shared pages (the workers' shared-memory stacks) divided
    among the processes that map them, so the sum over processes is what the run holds."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def settings(net: str, n: int, policy: str, args: argparse.Namespace) -> dict:
    """The world of one row (every setting it depends on given explicitly)."""
    return {
        "map": "manhattan_cdfl", "vehicles": n, "pedestrians": 0, "sensors": 0, "uavs": 0,
        "model": net, "policy": policy, "partition": "shards_resampled",
        "dataset": "fashion_mnist" if FASHION.exists() else "mnist5k",
        "test_size": args.test_size, "eval_every": args.eval_every, "eval_initial": False,
        "steps": 10_000, "record_every": 10_000, "contact": "during", "radius_m": 100.0,
        "workers": args.workers, "backend": args.backend, "seed": 0,
    }  # fmt: skip


def run_one(net: str, n: int, policy: str, args: argparse.Namespace) -> dict:
    """Build the world and run ``args.epochs`` epochs with every phase timed."""
    from mobidfl.model import bounds, world
    from mobidfl.model.config import Config
    from mobidfl.model.world import MobiDFLModel

    config = Config().updated(settings(net, n, policy, args))
    estimate = bounds.estimate_memory_bytes(config)
    base = _rss_bytes()
    t0 = time.perf_counter()
    model = MobiDFLModel(config=config)
    build = time.perf_counter() - t0
    learner = model.learner
    engine = learner.engine
    engine.evaluate(agents=np.arange(min(2, n)))  # starts the workers, if any (set-up)
    pool = getattr(engine, "_pool", None)
    pids = [p.pid for p in getattr(pool, "procs", [])]
    wall = dict.fromkeys(PHASES, 0.0)
    cpu = dict.fromkeys(PHASES, 0.0)

    def timed(name: str, fn):
        def inner(*a, **k):
            t, c = time.perf_counter(), _cpu_of(pids)
            try:
                return fn(*a, **k)
            finally:
                wall[name] += time.perf_counter() - t
                cpu[name] += _cpu_of(pids) - c

        return inner

    for _, _, mobility in model.groups:
        mobility.advance = timed("move", mobility.advance)
    for name in ("contact_matrix", "contact_times"):
        setattr(world, name, timed("contacts", getattr(world, name)))
    engine.train = timed("train", engine.train)
    learner.evaluate = timed("evaluate", learner.evaluate)
    learner.step = timed("exchange", learner.step)  # train and evaluate run inside: see below
    total_wall, total_cpu = 0.0, 0.0
    for _ in range(args.epochs):
        t, c = time.perf_counter(), _cpu_of(pids)
        model.step()
        total_wall += time.perf_counter() - t
        total_cpu += _cpu_of(pids) - c
    for name in ("train", "evaluate"):  # the learning step's rest is the exchange
        wall["exchange"] -= wall[name]
        cpu["exchange"] -= cpu[name]
    wall["other"] = total_wall - sum(wall[p] for p in PHASES if p != "other")
    cpu["other"] = total_cpu - sum(cpu[p] for p in PHASES if p != "other")
    if wall["evaluate"] == 0.0:  # no evaluation fell in these epochs: time one, amortise it
        learner.evaluate()
        total_wall += wall["evaluate"] * args.epochs / args.eval_every
        total_cpu += cpu["evaluate"] * args.epochs / args.eval_every
        wall["evaluate"] *= args.epochs / args.eval_every
        cpu["evaluate"] *= args.epochs / args.eval_every
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    workers_peak = sum(_hwm_bytes(pid) for pid in pids)
    held_now = _pss_bytes("self") + sum(_pss_bytes(pid) for pid in pids)
    snapshots = float("nan")
    policy_obj = learner.policies[policy][0]
    caches = getattr(policy_obj, "caches", None)
    if caches is not None:
        held = {id(e.payload) for cache in caches.values() for e in cache.values()}
        snapshots = len(held) / n
    epochs = args.epochs
    out = {
        "net": net, "n": n, "policy": policy, "epochs": epochs, "build_s": build,
        "workers": int(engine.workers), "params": int(engine.num_params),
        "wall": {p: wall[p] / epochs for p in PHASES}, "cpu": {p: cpu[p] / epochs for p in PHASES},
        "epoch_wall": total_wall / epochs, "epoch_cpu": total_cpu / epochs,
        "peak_per_agent": peak / n, "peak_bytes": peak, "workers_peak_bytes": workers_peak,
        "pss_end_bytes": held_now,
        "estimate_per_agent": estimate / n, "snapshots_per_car": snapshots,
        "degree": float(model.adjacency.nnz / n), "acc": float(np.nanmean(model.accuracy)),
    }  # fmt: skip
    engine.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--nets", default="mlp,cached_cnn")
    parser.add_argument("--policies", default="dpsgd,cached_lru")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--test-size", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default="loop", choices=("loop", "batched"),
                        help="training backend (batched: every agent's step in one grouped kernel)")
    parser.add_argument("--one", default=None, help="NET,N,POLICY: one row in this process")
    args = parser.parse_args()
    if args.one:
        net, n, policy = args.one.split(",")
        print("RESULT " + json.dumps(run_one(net, int(n), policy, args)), flush=True)
        return
    cpu = cpu_model()
    print(f"machine: {os.cpu_count()} CPUs ({cpu}); load before "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {time.strftime('%Y-%m-%d %H:%M')} "
          f"UTC; {args.epochs} epochs, evaluation every {args.eval_every} on "
          f"{args.test_size} images, workers={args.workers}, backend={args.backend}", flush=True)
    head = (f"{'net':11s}{'N':>8s}{'policy':>11s}" + "".join(f"{p:>9s}" for p in PHASES)
            + f"{'epoch s':>9s}{'CPU s':>8s}{'MB/agent':>9s}{'est.':>7s}{'snap':>6s}"
            f"{'deg':>6s}{'load':>6s}")  # fmt: skip
    rows = []
    for net in args.nets.split(","):
        for n in (int(v) for v in args.sizes.split(",")):
            for policy in args.policies.split(","):
                cmd = [sys.executable, __file__, "--one", f"{net},{n},{policy}",
                       "--epochs", str(args.epochs), "--eval-every", str(args.eval_every),
                       "--test-size", str(args.test_size),
                       "--workers", str(args.workers), "--backend", args.backend]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")),
                            None)  # fmt: skip
                if line is None:
                    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
                    print(f"{net} {n} {policy}: failed: {' '.join(tail)}", flush=True)
                    continue
                r = json.loads(line[7:])
                r["load"] = os.getloadavg()[0]
                rows.append(r)
                print(f"  done: {net} {n} {policy}: {r['epoch_wall']:.2f} s/epoch, "
                      f"{r['epoch_cpu']:.2f} CPU s; " + ", ".join(
                          f"{p} {r['cpu'][p]:.2f}" for p in PHASES) + " CPU s; "
                      f"{r['peak_per_agent'] / 1e6:.3f} MB/agent (estimate "
                      f"{r['estimate_per_agent'] / 1e6:.3f}); held at the end (PSS, main + "
                      f"workers) {r['pss_end_bytes'] / 2**30:.2f} GiB, workers' peak RSS "
                      f"{r['workers_peak_bytes'] / 2**30:.2f} GiB (shared stacks counted in "
                      "each)", flush=True)  # fmt: skip
    print("seconds per epoch (wall; evaluation amortised over --eval-every epochs)")
    print(head)
    for r in rows:
        print(f"{r['net']:11s}{r['n']:8d}{r['policy']:>11s}"
              + "".join(f"{r['wall'][p]:9.2f}" for p in PHASES)
              + f"{r['epoch_wall']:9.2f}{r['epoch_cpu']:8.2f}{r['peak_per_agent'] / 1e6:9.3f}"
              f"{r['estimate_per_agent'] / 1e6:7.3f}{r['snapshots_per_car']:6.2f}"
              f"{r['degree']:6.1f}{r['load']:6.2f}")  # fmt: skip
    print("CPU seconds per epoch (main process + workers)")
    for r in rows:
        print(f"{r['net']:11s}{r['n']:8d}{r['policy']:>11s}"
              + "".join(f"{r['cpu'][p]:9.2f}" for p in PHASES))  # fmt: skip
    print(f"load after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for r in rows:
        print("JSON " + json.dumps(r))


if __name__ == "__main__":
    main()
