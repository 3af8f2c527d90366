"""Cached-DFL's round: the authors' real code beside MobiDFL, timed per phase in one run.

The round (issues 15, 22): cars on Fashion-MNIST shards, Cached-DFL's CNN, 100 SGD steps of
batch 64 per car (lr 0.1; their ``local_ep = 10`` epochs over a 640-sample shard), then every
car tested on the 10k test set. Per car the work is the paper round's (2.2 GFLOP training,
57 GFLOP testing, 3x forward per trained sample); ``--scale`` is the fraction of the paper's
100 cars that is timed (``--scale 0.05``: 5 cars, a couple of minutes on this 2-core box).

**The peer is the authors' own code** (``liemak363/Cached-DFL`` at a pinned commit, read from
a cache folder, never copied here; :mod:`_peer`), imported unmodified and called as their
``trainer_single.py`` calls it: ``model.CNNFashion_Mnist`` deep-copied per car,
``torch.optim.SGD``, loaders from their ``data_loader.get_permute_dataset`` over their
``DatasetSplit`` (torchvision ``FashionMNIST`` with ``ToTensor`` + ``Normalize((0.5,),
(0.5,))``, the transform of their ``get_fashionmnist_non_iid``, batch 64),
``aggregation.normal_training_process`` for training and ``utils_cnn.test`` for testing.
Shims: those in :data:`_peer.SHIMS` (printed; none needed today). One thread each side.

Images: Fashion-MNIST when installed (``make fashion-mnist``), else the bundled MNIST
subset tiled to 60,000 / 10,000 images (timing depends on shapes only); the peer reads the
same images as uint8 idx files written to a temporary torchvision root.

MobiDFL runs the same round (``model.step()``: move, contacts, train, exchange, test) at
each ``--workers`` setting; with ``w > 1`` workers it runs ``w`` times the cars (at most 100)
and reports per ``cars`` cars, i.e. the time the same work takes on ``w`` cores.
``--reimpl`` adds the older re-implementation of the peer (per-sample testing) as a row.

Run: ``python benchmarks/peer_round.py --scale 0.05`` (``--workers 1,2``; ``--scale 1`` for
the whole paper round; ``--layouts`` adds the chunk-size / channels-last sweep).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from machine import cpu_model, matmul_peak, onednn_peak, theoretical_peak
from torch.utils.data import DataLoader, Subset, TensorDataset

import mobidfl.model.learning.session as session_module
from mobidfl.model.learning.data import Dataset, load_dataset
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.world import MobiDFLModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import _peer

FASHION = Path("/usr/share/datasets/fashion-mnist")
CACHE_SIZE, TAU_MAX, BATCH, LR = 10, 5, 64, 0.1


def cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) used so far by this process and the processes ``pids``
    (its worker processes), from /proc; this process alone where /proc is missing."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class _threads:
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


def build_model(
    *, cars: int, steps: int, test_size: int, workers: int, precision: str = "fp32"
) -> MobiDFLModel:
    """MobiDFL set to the round (every setting it depends on given explicitly)."""
    return MobiDFLModel(
        map="nyc_uws", vehicles=cars, pedestrians=0, sensors=0, uavs=0,
        model="cached_cnn", policy="cached_lru", partition="shards", dataset="mnist5k",
        local_steps=steps, batch_size=BATCH, lr=LR, cache_size=CACHE_SIZE, tau_max=TAU_MAX,
        test_size=test_size, eval_every=1, eval_initial=False, steps=1, workers=workers,
        backend="loop", precision=precision, seed=0,
    )  # fmt: skip


def mobidfl_round(
    *, cars: int, steps: int, test_size: int, workers: int, precision: str = "fp32"
) -> dict[str, float]:
    """One MobiDFL step (move, contacts, train, exchange, evaluate), phases timed."""
    t0 = time.perf_counter()
    model = build_model(cars=cars, steps=steps, test_size=test_size, workers=workers,
                        precision=precision)  # fmt: skip
    setup = time.perf_counter() - t0
    engine = model.learner.engine
    t0 = time.perf_counter()
    engine.evaluate(agents=np.arange(min(2, cars)))  # starts worker processes, if any
    setup += time.perf_counter() - t0  # paid once per run, not per round
    timed: dict[str, float] = {"train": 0.0, "evaluate": 0.0, "train_cpu": 0.0,
                               "evaluate_cpu": 0.0}  # fmt: skip
    pool = getattr(engine, "_pool", None)
    pids = [p.pid for p in getattr(pool, "procs", [])]

    def wrap(name: str, fn):
        def inner(*args, **kwargs):
            t, c = time.perf_counter(), cpu_seconds(pids)
            try:
                return fn(*args, **kwargs)
            finally:
                timed[name] += time.perf_counter() - t
                timed[name + "_cpu"] += cpu_seconds(pids) - c

        return inner

    engine.train = wrap("train", engine.train)
    engine.evaluate = wrap("evaluate", engine.evaluate)
    timed |= {"learn": 0.0, "learn_cpu": 0.0}
    model.learner.step = wrap("learn", model.learner.step)  # train, exchange, evaluate
    t, c = time.perf_counter(), cpu_seconds(pids)
    model.step()
    total, total_cpu = time.perf_counter() - t, cpu_seconds(pids) - c
    # the exchange: Cached-DFL's cache update and aggregation (snapshots, combine, set)
    exchange = timed["learn"] - timed["train"] - timed["evaluate"]
    exchange_cpu = timed["learn_cpu"] - timed["train_cpu"] - timed["evaluate_cpu"]
    out = {
        "setup": setup,
        **timed,
        "exchange": exchange,
        "exchange_cpu": exchange_cpu,
        "step": timed["train"] + exchange + timed["evaluate"],
        "step_cpu": timed["train_cpu"] + exchange_cpu + timed["evaluate_cpu"],
        "move_contacts": total - timed["learn"],
        "rest": total - timed["train"] - timed["evaluate"],
        "round": total,
        "round_cpu": total_cpu,
        "workers": float(engine.workers),
        "acc": float(np.mean(model.accuracy)),
    }
    engine.close()
    return out


class PeerCar:
    """A re-implementation car (``--reimpl``): its own module, optimiser, loader and cache."""

    def __init__(self, base: torch.nn.Module, data: Subset, seed: int) -> None:
        self.model = copy.deepcopy(base)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR)
        gen = torch.Generator().manual_seed(seed)
        self.loader = DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True,
                                 generator=gen)  # fmt: skip
        self.samples = len(data)
        self.cache: dict[int, tuple[dict, int, int]] = {}  # origin -> (state, time, samples)


def reimpl_round(dataset: Dataset, parts: list[np.ndarray], contacts, *, steps: int,
                 threads: int) -> dict[str, float]:  # fmt: skip
    """The older re-implementation of the peer's loop (issue 15, written in its style: one
    module, optimiser and ``DataLoader`` per car, ``state_dict`` caches merged key by key,
    testing one sample per forward): train ``steps`` batches, LRU exchange, test."""
    train_set = TensorDataset(dataset.x_train, dataset.y_train)
    test_set = TensorDataset(dataset.x_test, dataset.y_test)
    torch.manual_seed(0)
    base = build_net("cached_cnn", dataset.input_shape, dataset.num_classes)
    cars = [PeerCar(base, Subset(train_set, p.tolist()), i) for i, p in enumerate(parts)]
    times = {}
    with _threads(threads):
        t, c = time.perf_counter(), time.process_time()
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
        times["train"], times["train_cpu"] = time.perf_counter() - t, time.process_time() - c

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

        t, c = time.perf_counter(), time.process_time()
        accs = []
        for car in cars:  # evaluation: one test sample per forward, as in the peer's code
            car.model.eval()
            correct = 0
            with torch.no_grad():
                for x, y in DataLoader(test_set, batch_size=1):
                    correct += int(car.model(x).argmax(1).item() == y.item())
            accs.append(correct / len(test_set))
        times["evaluate"] = time.perf_counter() - t
        times["evaluate_cpu"] = time.process_time() - c
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
            for name, m, xs in (
                ("nchw", net, xb),
                ("nhwc", nhwc, xb.contiguous(memory_format=torch.channels_last)),
            ):
                t = time.perf_counter()
                for _ in range(20):
                    m.zero_grad()
                    F.cross_entropy(m(xs), dataset.y_train[:64]).backward()
                train[name] = min(train.get(name, float("inf")), time.perf_counter() - t)
    print(
        f"training, batch 64 (1 thread): nchw {20 / train['nchw']:.1f} steps/s, "
        f"nhwc {20 / train['nhwc']:.1f} steps/s: {train['nchw'] / train['nhwc']:.2f}x"
    )


SHARD = 640  # samples per car: 10 batches of 64, so their 10 local epochs are 100 SGD steps
LOCAL_EP = 10


def _write_idx(path: Path, data: np.ndarray) -> None:
    """An idx file as torchvision's MNIST reader expects it (uint8 images or labels)."""
    magic = 0x0801 if data.ndim == 1 else 0x0803
    header = np.array([magic, *data.shape], dtype=">i4").tobytes()
    path.write_bytes(header + np.ascontiguousarray(data, dtype=np.uint8).tobytes())


def _as_uint8(x: torch.Tensor) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return ((x[:, 0] - lo) / (hi - lo) * 255).round().clamp(0, 255).to(torch.uint8).numpy()


def torchvision_root(dataset: Dataset, root: Path) -> Path:
    """Write ``dataset``'s images as the four Fashion-MNIST idx files under ``root``."""
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    _write_idx(raw / "train-images-idx3-ubyte", _as_uint8(dataset.x_train))
    _write_idx(raw / "train-labels-idx1-ubyte", dataset.y_train.numpy())
    _write_idx(raw / "t10k-images-idx3-ubyte", _as_uint8(dataset.x_test))
    _write_idx(raw / "t10k-labels-idx1-ubyte", dataset.y_test.numpy())
    return root


def shards(labels: np.ndarray, cars: int, *, seed: int = 0) -> dict[int, np.ndarray]:
    """Two label-sorted shards of ``SHARD / 2`` samples per car (their non-IID split's shape)."""
    order = np.argsort(labels, kind="stable")
    half = SHARD // 2
    picks = np.random.default_rng(seed).permutation(len(labels) // half)[: 2 * cars]
    return {i: np.concatenate([order[s * half : (s + 1) * half] for s in picks[2 * i : 2 * i + 2]])
            for i in range(cars)}  # fmt: skip


def authors_round(dataset: Dataset, *, cars: int, modules: dict) -> dict[str, float]:
    """The authors' code: per car their training process, then their test, timed by phase."""
    from torchvision import datasets, transforms

    utils_cnn, aggregation = modules["utils_cnn"], modules["aggregation"]
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
    with tempfile.TemporaryDirectory(prefix="peer_round_") as tmp:
        root = torchvision_root(dataset, Path(tmp))
        train_set = datasets.FashionMNIST(
            str(root), train=True, download=False, transform=transform
        )
        test_set = datasets.FashionMNIST(
            str(root), train=False, download=False, transform=transform
        )
        test_idx = list(range(len(test_set)))
        parts = shards(train_set.targets.numpy(), cars)
        train_loader, _, test_loader = modules["data_loader"].get_permute_dataset(
            train_set, test_set, test_idx, parts, BATCH, 0.1
        )
        global_model = modules["model"].CNNFashion_Mnist()
        nets = [copy.deepcopy(global_model) for _ in range(cars)]
        optimizers = [torch.optim.SGD(params=m.parameters(), lr=LR) for m in nets]
        losses: list[list[float]] = [[] for _ in range(cars)]
        with _threads(1):
            t, c = time.perf_counter(), time.process_time()
            for i in range(cars):  # as in their Decentralized_Cache_process
                aggregation.normal_training_process(nets[i], optimizers[i], train_loader[i],
                                                    LOCAL_EP, losses[i])  # fmt: skip
            t_train, c_train = time.perf_counter() - t, time.process_time() - c
            t, c = time.perf_counter(), time.process_time()
            accs = [utils_cnn.test(m, test_loader)[0] for m in nets]  # their final_test
            t_eval, c_eval = time.perf_counter() - t, time.process_time() - c
    steps = LOCAL_EP * len(train_loader[0])
    return {"train": t_train, "evaluate": t_eval, "train_cpu": c_train, "evaluate_cpu": c_eval,
            "acc": float(np.mean(accs)), "steps": steps, "test": len(test_set)}  # fmt: skip


def machine() -> str:
    """One line saying which machine, CPU and torch build ran the benchmark."""
    isa = torch.backends.cpu.get_cpu_capability()
    return (f"{platform.node()}: {os.cpu_count()} CPUs ({cpu_model()}, {isa}), "
            f"torch {torch.__version__}, Python {platform.python_version()}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=0.05,
        help="fraction of the paper's 100 cars timed (per-car work: the paper's)",
    )
    parser.add_argument("--workers", default="1,2", help="MobiDFL worker settings (0 = auto)")
    parser.add_argument("--steps", type=int, default=100, help="MobiDFL SGD steps per car")
    parser.add_argument(
        "--precisions",
        default="fp32",
        help="MobiDFL's precision settings, one row each (fp32, fp32_fast, bf16)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="repeat and keep the best")
    parser.add_argument("--no-peer", action="store_true", help="MobiDFL only")
    parser.add_argument("--reimpl", action="store_true", help="add the re-implementation row")
    parser.add_argument("--layouts", action="store_true", help="the layout sweep first")
    parser.add_argument(
        "--peer-dir",
        type=Path,
        default=None,
        help="checkout of Cached-DFL at the pinned commit (default: the cache)",
    )
    args = parser.parse_args()
    cars = max(1, round(100 * args.scale))
    steps, test_size = args.steps, 10_000
    modules = None
    if not args.no_peer:
        try:
            modules = _peer.import_cached_dfl(args.peer_dir)
        except _peer.PeerUnavailable as exc:
            raise SystemExit(str(exc)) from None
    dataset = stand_in(test_size)
    session_module.load_dataset = lambda *a, **k: dataset  # both sides: the same images
    fps = flops_per_sample(build_net("cached_cnn", dataset.input_shape, 10), dataset.input_shape,
                           backward=False)  # fmt: skip
    train_work, eval_work = cars * fps * 3 * steps * BATCH, cars * fps * test_size
    print(f"machine: {machine()}")
    print(
        f"peer: {_peer.REPO}@{_peer.COMMIT[:7]} from {_peer.peer_dir(args.peer_dir)}; "
        f"shims: {', '.join(_peer.SHIMS) or 'none'}"
        if modules
        else "peer: not run"
    )
    peak, peak_cpu = best_gemm()
    theoretical = theoretical_peak()
    print(f"round: {cars} cars x {steps} steps x batch {BATCH}, test {test_size} "
          f"({dataset.name}), {(train_work + eval_work) / 1e12:.3f} TFLOP; "
          f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}; best 1-thread fp32 GEMM "
          f"(MKL sgemm or oneDNN) {peak:.1f} GFLOP/s per wall second, {peak_cpu:.1f} per CPU "
          f"second; theoretical fp32 FMA peak of one core {theoretical:.1f} GFLOP/s")
    if args.layouts:
        layout_sweep(dataset)

    runs: dict[str, list[dict[str, float]]] = {}
    reference = None
    for _ in range(args.repeats):
        if modules is not None:
            runs.setdefault("Cached-DFL (authors' code)", []).append(
                authors_round(dataset, cars=cars, modules=modules))  # fmt: skip
        if args.reimpl:
            if reference is None:
                reference = build_model(cars=cars, steps=steps, test_size=test_size, workers=1)
                reference.step()  # the contacts of the round (same map, seed, step)
            engine = reference.learner.engine
            runs.setdefault("re-implementation (issue 15)", []).append(
                reimpl_round(dataset, engine.parts, reference.adjacency, steps=steps, threads=1)
            )
        for prec, w in ((p, int(v)) for p in args.precisions.split(",")
                        for v in args.workers.split(",")):  # fmt: skip
            n = cars if w == 1 else min(100, max(cars, w * cars))
            res = mobidfl_round(cars=n, steps=steps, test_size=test_size, workers=w,
                                precision=prec)  # fmt: skip
            for key in ("train", "evaluate", "rest", "round", "train_cpu", "evaluate_cpu",
                        "exchange", "exchange_cpu", "step", "step_cpu", "move_contacts",
                        "round_cpu"):  # fmt: skip
                res[key] *= cars / n
            label = f"MobiDFL workers={w} ({int(res['workers'])})" + (
                f" {n} cars, per {cars}" if n != cars else ""
            ) + ("" if prec == "fp32" else f" {prec}")
            runs.setdefault(label, []).append(res)
        for label, results in runs.items():  # progress, in case a long run is cut short
            r = results[-1]
            print(f"  done: {label}: train {r['train']:.2f} s, evaluate {r['evaluate']:.2f} s",
                  flush=True)  # fmt: skip
    end_wall, end_cpu = best_gemm()
    peak, peak_cpu = max(peak, end_wall), max(peak_cpu, end_cpu)
    if max(peak, peak_cpu) > theoretical:  # the core ran above its nominal clock (turbo)
        print(f"the best GEMM ({max(peak, peak_cpu):.1f} GFLOP/s) beat the theoretical peak at "
              f"the nominal clock ({theoretical:.1f}): %theo is against the GEMM instead")
        theoretical = max(peak, peak_cpu)
    report(runs, train_work=train_work, eval_work=eval_work, peak=peak, peak_cpu=peak_cpu,
           theoretical=theoretical)
    print(f"best GEMM (best of start/end): {peak:.1f} GFLOP/s per wall second, "
          f"{peak_cpu:.1f} per CPU second; load after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")  # fmt: skip


def best_gemm() -> tuple[float, float]:
    """The best 1-thread fp32 GEMM of MKL's sgemm and oneDNN's (wall, CPU GFLOP/s): on AMD
    oneDNN's AVX-512 kernels outrun MKL, and a yardstick a net can beat is no limit."""
    mkl, dnn = matmul_peak(), onednn_peak()
    return max(mkl.wall, dnn.wall), max(mkl.cpu, dnn.cpu)


def report(runs: dict[str, list[dict[str, float]]], *, train_work: float, eval_work: float,
           peak: float, peak_cpu: float, theoretical: float) -> None:  # fmt: skip
    """Two tables: wall seconds (what a user waits) and CPU seconds (all processes of the
    row; robust when other jobs share the cores). %gemm: of the best measured 1-thread GEMM
    (MKL or oneDNN); %theo: of the core's theoretical fp32 FMA peak (machine.py). Per wall
    second, a row with n workers is held against n cores' peaks."""
    for unit, sfx, pk in (("wall", "", peak), ("CPU", "_cpu", peak_cpu)):
        print(f"{unit + ' seconds':44s}{'train':>8s}{'GFLOP/s':>8s}{'%gemm':>6s}{'%theo':>6s}"
              f"{'eval':>8s}{'GFLOP/s':>8s}{'%gemm':>6s}{'%theo':>6s}{'t+e':>8s}{'x peer':>7s}"
              f"{'acc':>7s}")  # fmt: skip
        base = None
        for name, results in runs.items():
            best = min(results, key=lambda r: r.get("train" + sfx, r["train"])
                       + r.get("evaluate" + sfx, r["evaluate"]))  # fmt: skip
            tr = best.get("train" + sfx, best["train"])
            ev = best.get("evaluate" + sfx, best["evaluate"])
            both = tr + ev
            base = base or (both if name.startswith("Cached-DFL") else None)
            tg, eg = train_work / tr / 1e9, eval_work / ev / 1e9
            ratio = f"{base / both:7.2f}" if base else f"{'-':>7s}"
            # per wall second, a row on n worker processes uses n cores: its yardsticks are
            # n one-core peaks (per CPU second they are one core's)
            cores = max(1.0, best.get("workers", 1.0)) if unit == "wall" else 1.0
            gemm, theo = pk * cores, theoretical * cores
            print(f"{name:44s}{tr:8.2f}{tg:8.1f}{100 * tg / gemm:6.0f}"
                  f"{100 * tg / theo:6.0f}{ev:8.2f}{eg:8.1f}{100 * eg / gemm:6.0f}"
                  f"{100 * eg / theo:6.0f}{both:8.2f}{ratio}{best['acc']:7.3f}")
            if "setup" in best and unit == "wall":
                print(f"{'':44s}(rest of the step {best['rest']:.2f} s: exchange and "
                      f"aggregation {best['exchange']:.3f} s, move and contacts "
                      f"{best['move_contacts']:.3f} s; set-up {best['setup']:.1f} s)")  # fmt: skip
    held_out(runs)


def held_out(runs: dict[str, list[dict[str, float]]]) -> None:
    """The held-out accounting: the step with its exchange and aggregation (train +
    exchange + evaluate of ``model.step()``, as a harness timing the whole learning step
    does) against the authors' train + test, and per phase how much two workers gain."""
    peer = next((min(r, key=lambda x: x["train"] + x["evaluate"]) for name, r in runs.items()
                 if name.startswith("Cached-DFL")), None)  # fmt: skip
    rows = {name: min(r, key=lambda x: x["step"]) for name, r in runs.items()
            if name.startswith("MobiDFL")}  # fmt: skip
    if not rows:
        return
    print(f"{'step with exchange (wall s)':44s}{'train':>8s}{'exch.':>8s}{'eval':>8s}"
          f"{'step':>8s}{'x peer':>7s}{'t+e x':>7s}{'diff':>7s}")  # fmt: skip
    for name, r in rows.items():
        base = peer["train"] + peer["evaluate"] if peer else None
        step_x = base / r["step"] if base else float("nan")
        te_x = base / (r["train"] + r["evaluate"]) if base else float("nan")
        print(f"{name:44s}{r['train']:8.2f}{r['exchange']:8.3f}{r['evaluate']:8.2f}"
              f"{r['step']:8.2f}{step_x:7.2f}{te_x:7.2f}{100 * (step_x / te_x - 1):6.1f}%")
    names = list(rows)
    for first, second in itertools.pairwise(names):  # one worker, then more, per precision
        if "workers=1 " not in first or "workers=1 " in second:
            continue
        one, two = rows[first], rows[second]
        print(f"{second} over {first}, per phase: " + ", ".join(
            f"{k} {one[k] / max(two[k], 1e-12):.2f}x"
            for k in ("train", "exchange", "evaluate", "step")))  # fmt: skip

if __name__ == "__main__":
    main()
