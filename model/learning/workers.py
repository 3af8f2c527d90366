"""Worker pools of the ``loop`` backend: spawned processes on shared memory, or Ray actors.

Both split the agents to train or evaluate into contiguous chunks, one per worker, and run
the same kernels as the main process (:mod:`mobidfl.model.learning.backends`) on the mini-batches
the main process drew, so ``workers > 1`` gives bit-for-bit the numbers of ``workers = 1``.
Worker processes hold shared-memory views of the engine's stacks: the engine must only ever
write them in place. :func:`auto_workers` decides how many workers ``workers = 0`` starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.connection as mpc
import sys
import time
from typing import Any

import numpy as np
import torch

from mobidfl.cores import idle_cores
from mobidfl.errors import ConfigError
from mobidfl.model.learning.backends import (
    Functional,
    Hyper,
    evaluate_agents,
    evaluate_chunk_sums,
    sum_chunks,
    train_loop_agents,
)
from mobidfl.model.learning.nets import build_net
from mobidfl.model.learning.params import mix_stacks

__all__ = [
    "AUTO_WORKERS_MIN_FLOP",
    "WORKER_BACKENDS",
    "ProcessPool",
    "RayPool",
    "RayWorker",
    "auto_workers",
    "keep_heap",
    "minor_faults",
    "worker_main",
]

WORKER_BACKENDS = ("processes", "ray")


HEAP_MMAP_THRESHOLD = 32 << 20
"""Allocations up to this many bytes come from the heap (glibc's largest allowed value)."""
HEAP_TRIM_THRESHOLD = 256 << 20
"""Free memory kept at the top of the heap before it is given back to the OS."""


def keep_heap() -> bool:
    """Make glibc keep freed activation buffers instead of returning them to the OS.

    Why: in a fresh worker process glibc's adaptive thresholds stay low, so each forward's
    activations (megabytes per evaluation chunk of a conv net) are mapped anew and trimmed
    away again, and the minor page faults cost the worker as much CPU time as the
    evaluation itself (the main process escapes it only when an earlier large free happened
    to raise the thresholds). Fixed thresholds (:data:`HEAP_MMAP_THRESHOLD`,
    :data:`HEAP_TRIM_THRESHOLD`) remove the faults (``benchmarks/peer_profile.py`` counts
    them; the numbers: docs/performance/measurements.md). Returns whether they were set
    (glibc Linux only; elsewhere a no-op).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, HEAP_MMAP_THRESHOLD)) and bool(
        mallopt(m_trim_threshold, HEAP_TRIM_THRESHOLD)
    )


def minor_faults() -> int:
    """Minor page faults of this process so far (0 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def worker_main(
    conn: mpc.Connection,
    net: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    channels_last: bool,
    precision: str,
    params: list[torch.Tensor],
    bufs: list[torch.Tensor],
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    """Loop-backend worker: trains / evaluates the agents it is sent, on shared stacks.

    Replies ``(result, wall s, CPU s, minor page faults)`` of the kernel, or the exception.
    """
    torch.set_num_threads(1)
    keep_heap()
    x, y, x_test, y_test = data
    fn = Functional(
        build_net(net, input_shape, num_classes), channels_last=channels_last, precision=precision
    )
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            t, c, f = time.perf_counter(), time.process_time(), minor_faults()
            if msg[0] == "train":
                _, agents, batches, hp = msg
                res = train_loop_agents(fn, params, bufs, x, y, agents, batches, hp)
            elif msg[0] == "eval_chunks":  # all agents on this worker's share of the test set
                _, agents, chunk, starts = msg
                res = evaluate_chunk_sums(fn, params, x_test, y_test, agents, chunk, starts)
            elif msg[0] == "mix":  # this worker's share of the column blocks, in place
                _, w, part, parts = msg
                mix_stacks(params, w, device=torch.device("cpu"), part=part, parts=parts)
                res = np.zeros(0)
            else:
                _, agents, chunk = msg
                res = evaluate_agents(fn, params, x_test, y_test, agents, chunk)
            conn.send((res, time.perf_counter() - t, time.process_time() - c,
                       minor_faults() - f))  # fmt: skip
        except Exception as exc:  # report instead of hanging the parent
            conn.send(exc)
    conn.close()


AUTO_WORKERS_MIN_FLOP = 1e11
"""``workers = 0`` (auto) starts worker processes only when a step's training + evaluation
is at least this much work (seconds of one core): spawning a worker re-imports torch
(seconds too), which small runs and tests would never earn back."""


def auto_workers(*, flops_per_step: float, n_agents: int, pooled: bool = True) -> int:
    """Worker processes for ``workers = 0``.

    The free cores (at least 1, at most one per agent) when the step is big enough to pay for
    spawning them (:data:`AUTO_WORKERS_MIN_FLOP`), else 1. Always 1 outside the CPU loop backend and
    inside child processes (a sweep's runs already use the cores).
    """
    if not pooled or flops_per_step < AUTO_WORKERS_MIN_FLOP:
        return 1
    if multiprocessing.current_process().daemon or multiprocessing.parent_process() is not None:
        return 1
    return int(max(1, min(n_agents, round(idle_cores()))))


class ProcessPool:
    """Persistent worker processes (spawned) sharing the engine's parameter stacks."""

    def __init__(self, n: int, args: tuple[Any, ...]) -> None:
        ctx = torch.multiprocessing.get_context("spawn")
        self.conns: list[mpc.Connection] = []
        self.procs = []
        self.timings: list[tuple[float, float, int]] = []
        """Per worker of the last :meth:`run`: wall s, CPU s and minor page faults inside its
        kernel (the rest of the call's time is shipping, waking and waiting;
        benchmarks/peer_profile.py prints them)."""
        for _ in range(n):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child, *args), daemon=True)
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    def run(self, kind: str, agents: np.ndarray, *extra: Any) -> np.ndarray:
        """Split ``agents`` into contiguous chunks, one per worker; gather along the last axis.

        ``extra`` arrays whose first axis runs over agents are split the same way.
        """
        chunks = np.array_split(np.arange(len(agents)), len(self.conns))
        used = []
        for conn, c in zip(self.conns, chunks, strict=True):
            if c.size:
                args = [e[c] if isinstance(e, np.ndarray) else e for e in extra]
                conn.send((kind, agents[c], *args))
                used.append((conn, c))
        return np.concatenate(self._gather(used), axis=-1)

    def _gather(self, used: list[tuple[mpc.Connection, Any]]) -> list[np.ndarray]:
        """The workers' replies, in order; raises the first worker's error."""
        parts: list[np.ndarray] = []
        errors = []
        self.timings = []
        for conn, _ in used:
            try:
                res = conn.recv()
            except (EOFError, OSError) as exc:
                self.close()
                raise RuntimeError(
                    "a training worker process exited. Workers are started with the 'spawn' "
                    "method, which re-imports the main script: guard a script that builds an "
                    "engine with workers > 1 by `if __name__ == '__main__':` (and do not use "
                    "workers > 1 inside daemonic processes such as mesa.batch_run's)"
                ) from exc
            if isinstance(res, Exception):
                errors.append(res)
            else:
                parts.append(res[0])
                self.timings.append(res[1:])
        if errors:
            raise RuntimeError(f"training worker failed: {errors[0]!r}") from errors[0]
        return parts

    def evaluate_split(self, agents: np.ndarray, chunk: int, n_test: int) -> np.ndarray:
        """``[2, A]`` like ``run("eval", ...)``, each worker evaluating all ``agents`` on a share.

        Every worker evaluates all ``agents`` on a contiguous share of the test chunks: balanced
        when there are few agents (5 cars on 2 workers would split 3 / 2 by agents). Bit-identical
        (:func:`sum_chunks`).
        """
        starts = np.array_split(np.arange(0, n_test, chunk), len(self.conns))
        used = []
        for conn, share in zip(self.conns, starts, strict=True):
            if share.size:
                conn.send(("eval_chunks", agents, chunk, share.tolist()))
                used.append((conn, share))
        sums = np.concatenate(self._gather(used), axis=-1)
        return sum_chunks(sums, n_test)

    def mix(self, w: Any) -> None:
        """``x <- W x`` on the shared stacks, the column blocks dealt round-robin over the workers.

        As :func:`mobidfl.model.learning.params.mix_stacks` with ``part``/``parts``.
        """
        parts = len(self.conns)
        for part, conn in enumerate(self.conns):
            conn.send(("mix", w, part, parts))
        self._gather([(conn, None) for conn in self.conns])

    def close(self) -> None:
        """Tell every worker to stop and wait for them; workers already gone are skipped."""
        for conn in self.conns:
            try:
                conn.send(None)
                conn.close()
            except (OSError, BrokenPipeError):
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self.conns, self.procs = [], []


class RayWorker:
    """Loop-backend worker as a Ray actor: holds the data, is sent agents' parameter slices.

    No shared memory across machines, so each call carries the slices of its agents and
    returns them updated; the computation per agent is exactly :func:`train_loop_agents`.
    """

    def __init__(
        self,
        net: str,
        input_shape: tuple[int, ...],
        num_classes: int,
        channels_last: bool,
        precision: str,
        data: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    ) -> None:
        torch.set_num_threads(1)
        keep_heap()
        self.fn = Functional(
            build_net(net, input_shape, num_classes),
            channels_last=channels_last,
            precision=precision,
        )
        self.data = data

    def train(
        self,
        params: list[torch.Tensor],
        bufs: list[torch.Tensor],
        batches: np.ndarray,
        hp: Hyper,
    ) -> tuple[np.ndarray, list[torch.Tensor], list[torch.Tensor]]:
        """Train the agents of this worker's share; ``(losses, params, bufs)``.

        The parameters and buffers returned are trained copies of the inputs.
        """
        x, y, _, _ = self.data
        params = [p.clone() for p in params]  # Ray hands out read-only zero-copy buffers
        bufs = [b.clone() for b in bufs]
        local = np.arange(len(batches))
        losses = train_loop_agents(self.fn, params, bufs, x, y, local, batches, hp)
        return losses, params, bufs

    def evaluate(self, params: list[torch.Tensor], chunk: int) -> np.ndarray:
        """Per-agent test accuracy of ``params``, evaluated ``chunk`` agents at a time."""
        _, _, x_test, y_test = self.data
        n = int(params[0].shape[0])
        return evaluate_agents(self.fn, params, x_test, y_test, np.arange(n), chunk)


class RayPool:
    """``workers`` Ray actors (``num_cpus=1`` each) on a local Ray or the cluster at ``address``.

    Same split of agents as :class:`ProcessPool` and the same per-agent computation, so the numbers
    equal those of local worker processes for the same seed.
    """

    def __init__(
        self,
        n: int,
        *,
        address: str | None,
        net: tuple[str, tuple[int, ...], int, bool, str],
        params: list[torch.Tensor],
        bufs: list[torch.Tensor],
        data: tuple[torch.Tensor, ...],
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "worker_backend", "ray", "installed Ray (pip install 'ray>=2.60')"
            ) from None
        self.ray = ray
        self.started_here = not ray.is_initialized()
        if self.started_here:
            from mobidfl.model.ray_local import init_ray

            init_ray(ray, address=address, log_to_driver=False)  # local: 127.0.0.1 only
        actor = ray.remote(num_cpus=1)(RayWorker)
        data_ref = ray.put(tuple(t.cpu() for t in data))
        self.actors = [actor.remote(*net, data_ref) for _ in range(n)]
        self.params, self.bufs = params, bufs

    def run(self, kind: str, agents: np.ndarray, *extra: Any) -> np.ndarray:
        """Like :meth:`ProcessPool.run`; training copies the returned slices into the stacks."""
        chunks = [c for c in np.array_split(np.arange(len(agents)), len(self.actors)) if c.size]
        refs = []
        for actor, c in zip(self.actors, chunks, strict=False):
            sel = torch.from_numpy(agents[c])
            ps = [p.index_select(0, sel) for p in self.params]
            if kind == "train":
                batches, hp = extra
                bs = [b.index_select(0, sel) for b in self.bufs]
                refs.append(actor.train.remote(ps, bs, batches[c], hp))
            else:
                refs.append(actor.evaluate.remote(ps, extra[0]))
        try:
            results = self.ray.get(refs)
        except Exception as exc:
            raise RuntimeError(f"Ray training worker failed: {exc!r}") from exc
        if kind != "train":
            return np.concatenate(results, axis=-1)
        with torch.no_grad():
            for c, (_, ps, bs) in zip(chunks, results, strict=True):
                sel = torch.from_numpy(agents[c])
                for dst, src in zip(self.params, ps, strict=True):
                    dst.index_copy_(0, sel, src)
                for dst, src in zip(self.bufs, bs, strict=True):
                    dst.index_copy_(0, sel, src)
        return np.concatenate([r[0] for r in results])

    def close(self) -> None:
        """Kill the actors and shut Ray down if this pool started it."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # Ray may already be down at interpreter exit
                self.ray.kill(actor)
        self.actors = []
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()
            self.started_here = False
