"""Where the time of Cached-DFL's round goes in MobiDFL: per phase, per op, per worker.

Issue 22: ``benchmarks/peer_round.py`` gives the ratios against the authors' code; this
script says what the remaining seconds are spent on, on the same images and the same net
(Cached-DFL's CNN, batch 64, lr 0.1, 10k test images), one thread per process:

1. **Training, one car in-process**: ``--steps`` SGD steps split into batch gather
   (``index_select``), forward (the plan of ``Functional.autograd_step``, CE included),
   backward (``torch.autograd.grad``) and the optimiser update (``sgd_update``), in CPU
   seconds; then torch.profiler's ops by self time, with input shapes (so per layer).
2. **Evaluation, one car in-process**: ``evaluate_agents`` on the test set; ops by self time.
3. **Heap probe**: one car's evaluation in a fresh spawned process with glibc's default heap
   thresholds and with :func:`mobidfl.model.learning.workers.keep_heap` (minor page faults, user and
   system CPU seconds): the cause of the slow evaluation in worker processes.
4. **Workers**: the engine's ``train()`` and ``evaluate()`` over ``--cars`` cars with
   ``workers = 1`` and ``2``: wall and CPU seconds of the call, and per worker the seconds
   and page faults inside its kernel; the rest of the call is shipping and waiting.

CPU seconds are the robust unit on a shared machine (other jobs barely move them); every
percentage of peak is of the 1-thread fp32 matmul peak measured in the same run.
Run: ``python benchmarks/peer_profile.py`` (about 2 minutes on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import mobidfl.model.learning.session as session_module
from mobidfl.model.learning.backends import (
    EVAL_CHUNK_CONV,
    Functional,
    Hyper,
    evaluate_agents,
    nchw_forward,
    sgd_update,
)
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.learning.workers import keep_heap, minor_faults

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_round

BATCH, LR = peer_round.BATCH, peer_round.LR


def _ops_table(prof: profile, total_s: float, per: int, unit: str, rows: int = 10) -> None:
    """The ``rows`` ops of most self CPU time, with input shapes, per ``unit``."""
    avgs = sorted(prof.key_averages(group_by_input_shape=True),
                  key=lambda e: e.self_cpu_time_total, reverse=True)  # fmt: skip
    profiled = sum(e.self_cpu_time_total for e in avgs) / 1e6
    print(f"  {'op':44s}{'input shapes':44s}{'ms/' + unit:>10s}{'%':>6s}")
    for e in avgs[:rows]:
        shapes = ",".join("x".join(map(str, s)) for s in e.input_shapes if s)[:43]
        ms = e.self_cpu_time_total / 1e3 / per
        share = 100 * e.self_cpu_time_total / 1e6 / profiled
        print(f"  {e.key[:43]:44s}{shapes:44s}{ms:10.3f}{share:6.1f}")
    print(f"  (profiled {profiled:.2f} s of ops; unprofiled run {total_s:.2f} s)")


def training_profile(dataset, *, steps: int, peak: float) -> None:
    """One car's local training, phases in CPU seconds, then the op table."""
    torch.manual_seed(0)
    fn = Functional(build_net("cached_cnn", dataset.input_shape, dataset.num_classes))
    assert fn.plan is not None
    x, y = dataset.x_train, dataset.y_train
    rng = np.random.default_rng(0)
    idx = torch.from_numpy(rng.integers(0, len(y), size=(steps, BATCH)))
    hp = Hyper(lr=LR, momentum=0.0, weight_decay=0.0, prox_rho=0.0)
    ps = [p.detach().clone().requires_grad_() for p in fn.template.parameters()]
    phases = dict.fromkeys(("gather", "forward", "backward", "update"), 0.0)

    def step(k: int, clock=time.process_time) -> None:
        t0 = clock()
        xb, yb = x.index_select(0, idx[k]), y.index_select(0, idx[k])
        t1 = clock()
        loss = F.cross_entropy(nchw_forward(fn.plan, ps, xb), yb)
        t2 = clock()
        g = torch.autograd.grad(loss, ps)
        t3 = clock()
        with torch.no_grad():
            sgd_update(ps, g, [], None, hp)
        t4 = clock()
        for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            phases[name] += dt

    with peer_round._threads(1):
        for k in range(min(10, steps)):  # warm-up
            step(k)
        phases.update(dict.fromkeys(phases, 0.0))
        c = time.process_time()
        for k in range(steps):
            step(k)
        total = time.process_time() - c
        timed = dict(phases)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for k in range(steps):
                step(k)
    work = 3 * flops_per_sample(fn.template, dataset.input_shape, backward=False) * BATCH * steps
    print(f"\ntraining, one car: {steps} steps of batch {BATCH}, {total:.2f} CPU s "
          f"({1e3 * total / steps:.2f} ms/step), {work / total / 1e9:.1f} GFLOP/s = "
          f"{100 * work / total / 1e9 / peak:.0f} % of peak")  # fmt: skip
    for name, dt in timed.items():
        print(f"  {name:10s}{1e3 * dt / steps:8.3f} ms/step {100 * dt / total:6.1f} %")
    _ops_table(prof, total, steps, "step")


def evaluation_profile(dataset, *, peak: float) -> None:
    """One car tested on the test set in-process, then the op table."""
    torch.manual_seed(0)
    fn = Functional(build_net("cached_cnn", dataset.input_shape, dataset.num_classes),
                    channels_last=True)  # fmt: skip
    ps = [p.detach()[None].clone() for p in fn.template.parameters()]
    x, y = fn.prep(dataset.x_test), dataset.y_test
    one = np.zeros(1, np.int64)
    with peer_round._threads(1):
        evaluate_agents(fn, ps, x, y, one, EVAL_CHUNK_CONV)
        c, f = time.process_time(), minor_faults()
        evaluate_agents(fn, ps, x, y, one, EVAL_CHUNK_CONV)
        total, faults = time.process_time() - c, minor_faults() - f
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            evaluate_agents(fn, ps, x, y, one, EVAL_CHUNK_CONV)
    work = flops_per_sample(fn.template, dataset.input_shape, backward=False) * len(y)
    print(f"\nevaluation, one car: {len(y)} images, chunk {EVAL_CHUNK_CONV}: {total:.2f} CPU s, "
          f"{work / total / 1e9:.1f} GFLOP/s = {100 * work / total / 1e9 / peak:.0f} % of peak, "
          f"{faults} page faults")  # fmt: skip
    _ops_table(prof, total, -(-len(y) // EVAL_CHUNK_CONV), "chunk")


def _heap_probe(keep: bool, x: torch.Tensor, y: torch.Tensor, queue) -> None:
    """In a fresh process: one car's evaluation, CPU seconds and faults (see heap_probe)."""
    import resource

    torch.set_num_threads(1)
    kept = keep_heap() if keep else False
    fn = Functional(build_net("cached_cnn", (1, 28, 28), 10), channels_last=True)
    ps = [p.detach()[None].clone() for p in fn.template.parameters()]
    one = np.zeros(1, np.int64)
    evaluate_agents(fn, ps, x, y, one, EVAL_CHUNK_CONV)
    r0, f0 = resource.getrusage(resource.RUSAGE_SELF), minor_faults()
    evaluate_agents(fn, ps, x, y, one, EVAL_CHUNK_CONV)
    r1, f1 = resource.getrusage(resource.RUSAGE_SELF), minor_faults()
    queue.put((kept, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, f1 - f0))


def heap_probe(dataset) -> None:
    """A spawned process (as a worker is) evaluating one car, default heap vs keep_heap."""
    ctx = multiprocessing.get_context("spawn")
    x = dataset.x_test.contiguous(memory_format=torch.channels_last)
    print("\nheap probe: one car's evaluation in a fresh spawned process")
    for keep in (False, True):
        queue = ctx.Queue()
        proc = ctx.Process(target=_heap_probe, args=(keep, x, dataset.y_test, queue))
        proc.start()
        kept, user, system, faults = queue.get(timeout=600)
        proc.join()
        label = "keep_heap()" if keep else "glibc default"
        print(f"  {label:14s}: user {user:.2f} s, system {system:.2f} s, "
              f"{faults} minor page faults" + ("" if kept or not keep else " (not applied)"))


def workers_profile(dataset, *, cars: int) -> None:
    """The engine's train() and evaluate() with 1 and 2 workers on the same ``cars`` cars."""
    print(f"\nworkers: the engine's train() and evaluate(), {cars} cars, 100 steps each")
    print(f"  {'':12s}{'call':10s}{'wall s':>8s}{'CPU s':>8s}  "
          "per worker: kernel wall s / CPU s / faults")  # fmt: skip
    for w in (1, 2):
        model = peer_round.build_model(cars=cars, steps=100, test_size=len(dataset.y_test),
                                       workers=w)  # fmt: skip
        engine = model.learner.engine
        engine.evaluate(agents=np.arange(min(2, cars)))  # starts the workers (once per run)
        pool = getattr(engine, "_pool", None)
        pids = [p.pid for p in getattr(pool, "procs", [])]
        for name, call in (("train", engine.train), ("evaluate", engine.evaluate)):
            t, c, f = time.perf_counter(), peer_round.cpu_seconds(pids), minor_faults()
            call()
            wall, cpu = time.perf_counter() - t, peer_round.cpu_seconds(pids) - c
            if pool is None:
                detail = f"in-process, {minor_faults() - f} faults"
            else:
                kernels = " | ".join(f"{kw:.2f} / {kc:.2f} / {kf}" for kw, kc, kf in pool.timings)
                shipping = wall - max(kw for kw, _, _ in pool.timings)
                detail = f"{kernels}; outside the kernels {shipping:.3f} s"
            print(f"  workers={w:<4d}{name:10s}{wall:8.2f}{cpu:8.2f}  {detail}", flush=True)
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100, help="SGD steps profiled")
    parser.add_argument("--cars", type=int, default=4, help="cars in the workers section")
    parser.add_argument("--no-workers", action="store_true", help="skip sections 3 and 4")
    args = parser.parse_args()
    dataset = peer_round.stand_in(10_000)
    session_module.load_dataset = lambda *a, **k: dataset  # the engine gets the same images
    print(f"machine: {peer_round.machine()}")
    peak, peak_cpu = peer_round.matmul_peak()
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}; 1-thread fp32 matmul peak "
          f"{peak:.1f} GFLOP/s per wall second, {peak_cpu:.1f} per CPU second "
          f"(percentages below: of the CPU-second peak)")  # fmt: skip
    training_profile(dataset, steps=args.steps, peak=peak_cpu)
    evaluation_profile(dataset, peak=peak_cpu)
    if not args.no_workers:
        heap_probe(dataset)
        workers_profile(dataset, cars=args.cars)
    print(f"load after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
