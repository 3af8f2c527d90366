"""Cached-DFL's own round: a re-implementation of its loop vs MobiDFL, side by side.

The round (issue 15): ``cars`` cars on Fashion-MNIST shards, the Cached-DFL CNN (MobiDFL
``cached_cnn``), ``steps`` SGD steps of batch 64 per car, LRU cache 10, tau_max 5, then every
car evaluated on the test set. ``--scale 1`` is the paper round (100 cars, 100 steps, 10k test
images: 16.6 TFLOP); ``--scale 0.2`` (20 cars, 20 steps, 2k test images) fits a busy machine.

The peer side is written in the peer's style (read in its code, ../shared/notes/stack.md):
one ``nn.Module`` per car made with ``copy.deepcopy``, ``torch.optim.SGD``, a
``torch.utils.data.DataLoader`` per car and a per-epoch Python loop, caches of
``copy.deepcopy``'d ``state_dict``s merged key by key, evaluation one test sample per
forward. It is generous to the peer in one point: samples come from an in-memory
``TensorDataset`` (no per-sample PIL transform). Both sides use the same partition, the
same contacts (MobiDFL's street-map step) and the same FLOPs.

Without Fashion-MNIST (``make fashion-mnist``) both sides use a stand-in of the same shape:
the bundled MNIST subset tiled to 60,000 / 10,000 images (timing depends on shapes only).

Run: ``python benchmarks/peer_round.py --scale 0.2`` (``--scale 1`` for the paper round;
``--workers 1,0`` MobiDFL worker settings to compare, 0 = auto; ``--repeats R`` alternates).
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, TensorDataset

import model.learning.session as session_module
from model.learning.data import Dataset, load_dataset
from model.learning.nets import build_net, flops_per_sample
from model.world import MobiDFLModel

FASHION = Path("/usr/share/datasets/fashion-mnist")
CACHE_SIZE, TAU_MAX, BATCH, LR = 10, 5, 64, 0.1


def matmul_peak(size: int = 512, repeats: int = 5) -> float:
    """Best-of-``repeats`` fp32 GFLOP/s of a square matmul on one thread."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    best = float("inf")
    with _threads(1):
        for _ in range(repeats):
            t = time.perf_counter()
            for _ in range(20):
                a @ b
            best = min(best, (time.perf_counter() - t) / 20)
    return 2 * size**3 / best / 1e9


class _threads:  # noqa: N801 - a tiny context manager
    def __init__(self, n: int) -> None:
        self.n, self.old = n, torch.get_num_threads()

    def __enter__(self) -> None:
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.old)


def stand_in(test_size: int) -> Dataset:
    """Fashion-MNIST when installed, else the MNIST subset tiled to 60k / 10k images."""
    if FASHION.exists():
        return load_dataset("fashion_mnist", test_size=test_size, seed=0)
    small = load_dataset("mnist5k", test_size=1000, seed=0)
    reps_train = -(-60_000 // small.n_train)
    reps_test = -(-10_000 // int(small.y_test.shape[0]))
    return Dataset(
        name="mnist5k_tiled",
        x_train=small.x_train.repeat(reps_train, 1, 1, 1)[:60_000].contiguous(),
        y_train=small.y_train.repeat(reps_train)[:60_000].contiguous(),
        x_test=small.x_test.repeat(reps_test, 1, 1, 1)[:test_size].contiguous(),
        y_test=small.y_test.repeat(reps_test)[:test_size].contiguous(),
        num_classes=10,
        input_shape=small.input_shape,
    )


def build_model(*, cars: int, steps: int, test_size: int, workers: int) -> MobiDFLModel:
    """MobiDFL set to the round (every setting it depends on given explicitly)."""
    return MobiDFLModel(
        map="nyc_uws", vehicles=cars, pedestrians=0, sensors=0, uavs=0,
        model="cached_cnn", policy="cached_lru", partition="shards", dataset="mnist5k",
        local_steps=steps, batch_size=BATCH, lr=LR, cache_size=CACHE_SIZE, tau_max=TAU_MAX,
        test_size=test_size, eval_every=1, eval_initial=False, steps=1, workers=workers,
        backend="loop", seed=0,
    )  # fmt: skip


def mobidfl_round(*, cars: int, steps: int, test_size: int, workers: int) -> dict[str, float]:
    """One MobiDFL step (move, contacts, train, exchange, evaluate), phases timed."""
    t0 = time.perf_counter()
    model = build_model(cars=cars, steps=steps, test_size=test_size, workers=workers)
    setup = time.perf_counter() - t0
    engine = model.learner.engine
    t0 = time.perf_counter()
    engine.evaluate(agents=np.arange(min(2, cars)))  # starts worker processes, if any
    setup += time.perf_counter() - t0  # paid once per run, not per round
    timed: dict[str, float] = {"train": 0.0, "evaluate": 0.0}

    def wrap(name: str, fn):  # noqa: ANN001, ANN202
        def inner(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timed[name] += time.perf_counter() - t

        return inner

    engine.train = wrap("train", engine.train)
    engine.evaluate = wrap("evaluate", engine.evaluate)
    t = time.perf_counter()
    model.step()
    total = time.perf_counter() - t
    out = {
        "setup": setup,
        "train": timed["train"],
        "evaluate": timed["evaluate"],
        "rest": total - timed["train"] - timed["evaluate"],
        "round": total,
        "workers": float(engine.workers),
        "acc": float(np.mean(model.accuracy)),
    }
    engine.close()
    return out


class PeerCar:
    """A car as in the peer's code: its own module, optimiser, loader and cache."""

    def __init__(self, base: torch.nn.Module, data: Subset, seed: int) -> None:
        self.model = copy.deepcopy(base)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR)
        gen = torch.Generator().manual_seed(seed)
        self.loader = DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True,
                                 generator=gen)  # fmt: skip
        self.samples = len(data)
        self.cache: dict[int, tuple[dict, int, int]] = {}  # origin -> (state, time, samples)


def peer_round(dataset: Dataset, parts: list[np.ndarray], contacts, *, steps: int,
               threads: int) -> dict[str, float]:  # fmt: skip
    """The peer's loop over cars: train ``steps`` batches, LRU exchange, per-sample test."""
    train_set = TensorDataset(dataset.x_train, dataset.y_train)
    test_set = TensorDataset(dataset.x_test, dataset.y_test)
    torch.manual_seed(0)
    base = build_net("cached_cnn", dataset.input_shape, dataset.num_classes)
    cars = [PeerCar(base, Subset(train_set, p.tolist()), i) for i, p in enumerate(parts)]
    times = {}
    with _threads(threads):
        t = time.perf_counter()
        for car in cars:  # local training: epochs over the car's loader until `steps` batches
            car.model.train()
            done = 0
            while done < steps:
                for x, y in car.loader:
                    car.optimizer.zero_grad()
                    loss = F.cross_entropy(car.model(x), y)
                    loss.backward()
                    car.optimizer.step()
                    done += 1
                    if done == steps:
                        break
        times["train"] = time.perf_counter() - t

        t = time.perf_counter()
        now = 1
        rows, cols = contacts.nonzero()
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):  # i receives j's model
            cars[i].cache[j] = (copy.deepcopy(cars[j].model.state_dict()), now, cars[j].samples)
            for origin, (state, stamp, n) in list(cars[j].cache.items()):
                mine = cars[i].cache.get(origin)
                if origin != i and (mine is None or mine[1] < stamp):  # keep the fresher copy
                    cars[i].cache[origin] = (copy.deepcopy(state), stamp, n)
        for car in cars:  # drop stale, evict oldest, aggregate weighted by samples
            car.cache = {o: v for o, v in car.cache.items() if now - v[1] <= TAU_MAX}
            while len(car.cache) > CACHE_SIZE:
                del car.cache[min(car.cache, key=lambda o: car.cache[o][1])]
            states = [car.model.state_dict()] + [v[0] for v in car.cache.values()]
            weights = [car.samples] + [v[2] for v in car.cache.values()]
            total = float(sum(weights))
            merged = {k: sum(s[k] * (w / total) for s, w in zip(states, weights, strict=True))
                      for k in states[0]}  # fmt: skip
            car.model.load_state_dict(merged)
        times["exchange"] = time.perf_counter() - t

        t = time.perf_counter()
        accs = []
        for car in cars:  # evaluation: one test sample per forward, as in the peer's code
            car.model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in DataLoader(test_set, batch_size=1):
                    correct += int(car.model(x).argmax(1).item() == y.item())
            accs.append(correct / len(test_set))
        times["evaluate"] = time.perf_counter() - t
    times["round"] = times["train"] + times["exchange"] + times["evaluate"]
    times["acc"] = float(np.mean(accs))
    return times


def layout_sweep(dataset: Dataset, *, repeats: int = 3) -> None:
    """Cached-DFL's CNN on 1 thread: evaluation samples/s per chunk size and layout, and
    training steps of batch 64, NCHW vs channels-last (weights and input), interleaved."""
    net = build_net("cached_cnn", dataset.input_shape, dataset.num_classes).eval()
    nhwc = copy.deepcopy(net).to(memory_format=torch.channels_last)
    x, y = dataset.x_test[:2048], dataset.y_test[:2048]
    x_cl = x.contiguous(memory_format=torch.channels_last)
    chunks = (128, 256, 512, 2048)
    best: dict[tuple[int, str], float] = {}
    with _threads(1), torch.no_grad():
        for _ in range(repeats):
            for chunk in chunks:
                for name, m, xs in (("nchw", net, x), ("nhwc", nhwc, x_cl)):
                    t = time.perf_counter()
                    for s in range(0, len(xs), chunk):
                        out = m(xs[s : s + chunk])
                        F.cross_entropy(out, y[s : s + chunk], reduction="sum")
                        (out.argmax(1) == y[s : s + chunk]).sum()
                    rate = len(xs) / (time.perf_counter() - t)
                    best[chunk, name] = max(best.get((chunk, name), 0.0), rate)
    print("evaluation, samples/s (1 thread): " + ", ".join(
        f"{c} {n} {best[c, n]:.0f}" for c in chunks for n in ("nchw", "nhwc")))  # fmt: skip
    print(f"  best/old default (2048 nchw): "
          f"{max(best.values()) / best[2048, 'nchw']:.2f}x")  # fmt: skip
    xb = dataset.x_train[:64]
    train: dict[str, float] = {}
    with _threads(1):
        for _ in range(repeats):
            for name, m, xs in (("nchw", net, xb),
                                ("nhwc", nhwc, xb.contiguous(memory_format=torch.channels_last))):
                t = time.perf_counter()
                for _ in range(20):
                    m.zero_grad()
                    F.cross_entropy(m(xs), dataset.y_train[:64]).backward()
                train[name] = min(train.get(name, float("inf")), time.perf_counter() - t)
    print(f"training, batch 64 (1 thread): nchw {20 / train['nchw']:.1f} steps/s, "
          f"nhwc {20 / train['nhwc']:.1f} steps/s: {train['nchw'] / train['nhwc']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.2, help="1 = 100 cars, 100 steps, 10k")
    parser.add_argument("--workers", default="1,0", help="MobiDFL worker settings (0 = auto)")
    parser.add_argument("--peer-threads", type=int, default=1,
                        help="torch threads of the peer (1: on a shared box 2 threads ran "
                        "its per-sample evaluation ~50x slower than measured quiet)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-peer", action="store_true", help="MobiDFL only")
    parser.add_argument("--layouts-only", action="store_true",
                        help="only the chunk-size / channels-last sweep")
    args = parser.parse_args()
    cars = max(2, round(100 * args.scale))
    steps = max(1, round(100 * args.scale))
    test_size = max(100, round(10_000 * args.scale))
    dataset = stand_in(test_size)
    session_module.load_dataset = lambda *a, **k: dataset  # both sides: the same images
    fps = flops_per_sample(build_net("cached_cnn", dataset.input_shape, 10), dataset.input_shape,
                           backward=False)  # fmt: skip
    work = cars * fps * (3 * steps * BATCH + test_size)
    train_work, eval_work = cars * fps * 3 * steps * BATCH, cars * fps * test_size
    peak = matmul_peak()
    print(f"round: {cars} cars x {steps} steps x batch {BATCH}, test {test_size} "
          f"({dataset.name}), {work / 1e12:.3f} TFLOP; load {os.getloadavg()[0]:.2f}; "
          f"1-thread matmul peak {peak:.1f} GFLOP/s (2 cores: {2 * peak:.0f})")  # fmt: skip

    layout_sweep(dataset)
    if args.layouts_only:
        return
    runs: dict[str, list[dict[str, float]]] = {}
    reference = build_model(cars=cars, steps=steps, test_size=test_size, workers=1)
    reference.step()  # the contacts of the round (same map, seed, step)
    parts, contacts = reference.learner.engine.parts, reference.adjacency
    for _ in range(args.repeats):
        if not args.no_peer:
            runs.setdefault("peer", []).append(
                peer_round(dataset, parts, contacts, steps=steps, threads=args.peer_threads)
            )
        for w in (int(v) for v in args.workers.split(",")):
            res = mobidfl_round(cars=cars, steps=steps, test_size=test_size, workers=w)
            runs.setdefault(f"mobidfl workers={w} ({int(res['workers'])})", []).append(res)

    print(f"{'':34s}{'train s':>9s}{'eval s':>9s}{'rest s':>8s}{'round s':>9s}"
          f"{'GFLOP/s':>9s}{'x peer':>8s}{'acc':>7s}")  # fmt: skip
    peer = min(r["round"] for r in runs["peer"]) if "peer" in runs else float("nan")
    for name, results in runs.items():
        best = min(results, key=lambda r: r["round"])
        rest = best.get("rest", best.get("exchange", 0.0))
        print(f"{name:34s}{best['train']:9.2f}{best['evaluate']:9.2f}{rest:8.2f}"
              f"{best['round']:9.2f}{work / best['round'] / 1e9:9.1f}"
              f"{peer / best['round']:8.2f}{best['acc']:7.3f}")  # fmt: skip
        print(f"{'':34s}train {train_work / best['train'] / 1e9:.1f} GFLOP/s "
              f"({100 * train_work / best['train'] / 1e9 / peak:.0f}% of 1 core), eval "
              f"{eval_work / best['evaluate'] / 1e9:.1f} GFLOP/s "
              f"({100 * eval_work / best['evaluate'] / 1e9 / peak:.0f}% of 1 core)"
              + (f"; set-up {best['setup']:.1f} s" if "setup" in best else ""))  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
