"""Several runs' learning as one program: the engine side of ``--batch-runs`` .

A sweep's runs that share the net, the dataset and the learning settings (e.g. two variants x
two seeds of a ``mobidfl reproduce`` spec) each keep their own world, RNG streams, policy,
early stop and learning-rate schedule, but their parameter stacks become consecutive rows of
one set of stacks ``[sum_r N_r, *shape]``: run ``r``'s engine keeps working on views
``big[o_r : o_r + N_r]``, so mixing, snapshots, policies and checkpoints of a run see only
its own agents, while a local-training round of all runs is **one** call of the same kernels
a run alone uses (:mod:`mobidfl.model.learning.backends`): one ``vmap`` over runs x agents per local
step on the ``batched`` backend (the GPU path), the concatenated agents one after the other on
the ``loop`` backend. An evaluation is one call per distinct test sample (one when the runs
share it), each agent one forward as alone.

Why the numbers equal the runs alone: each run still draws its mini-batches from its own
per-agent Generators (:meth:`Engine._draw_batches`, called by the run's own ``train``), and
every kernel is per agent (no reduction across agents), so only float rounding inside a
batched matmul can differ; the loop backend gives bit-identical results. Each run's
learning rate (ReduceLROnPlateau, Cached-DFL) is applied to its own rows
(:func:`mobidfl.model.learning.backends.hyper_stretches`).

Lockstep: each run steps its Mesa model in its own thread (the world, mobility and policies
stay unchanged), one thread at a time (:meth:`RunGroup.enter`). A run's ``engine.train`` /
``engine.evaluate`` blocks in :meth:`RunGroup.train` / :meth:`RunGroup.evaluate` until every
run still running has asked (or finished); the last one to arrive executes all requests as
one call per kind and releases the others. A run that stops early (or fails) calls
:meth:`RunGroup.leave` and the others go on without it.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from mobidfl.errors import bad_argument
from mobidfl.model.learning.backends import (
    evaluate_agents,
    hyper_stretches,
    threads,
    train_batched_agents,
    train_loop_agents,
)

__all__ = [
    "CUDA_SAMPLES_PER_CALL", "RunGroup", "group_chunk", "group_key", "lockstep", "plan_groups",
]


CUDA_SAMPLES_PER_CALL = 32_768
"""Training samples per ``vmap`` call of a group on CUDA, unless one run alone takes more
(a run alone vmaps all its agents at once: Cached-DFL's 100 cars x 64 = 6,400). An
estimate, not a measurement (no GPU here): Cached-DFL's CNN keeps ~44k activations per
sample, ~0.5 MB with the backward, so 32k samples are ~16 GB of an 80 GB H100; 15 runs of
100 cars in one call would be ~50 GB."""


def group_chunk(agent_chunk: int | None, *, device: str, width: int, largest: int) -> int:
    """Agents per ``vmap`` call of a group's training.

    ``agent_chunk`` when set, 64 on the CPU (as a run alone), on CUDA every agent of the largest run
    and more up to :data:`CUDA_SAMPLES_PER_CALL` samples of ``width`` (the widest batch).
    """
    if agent_chunk is not None:
        return int(agent_chunk)
    if device != "cuda":
        return 64
    return max(int(largest), CUDA_SAMPLES_PER_CALL // max(int(width), 1))


def group_key(engine: Any) -> tuple | None:
    """What runs must share to be batched.

    Backend, device, precision, net and input, batch and local steps, optimiser kind, evaluation
    chunk. ``None``: this engine runs alone (worker processes or Ray actors own its stacks).
    Learning rates, seeds, partitions and test samples may differ.
    """
    if engine.workers > 1 or engine.worker_backend != "processes":
        return None
    return (
        engine.backend, str(engine.device), engine.precision, engine.net_name,
        engine.dataset_name, engine._input_shape, engine._num_classes, engine.batch_size,
        engine.local_steps, engine.optimizer, bool(engine.momentum_buffers), engine.eval_chunk,
        engine.channels_last, engine.agent_chunk, tuple(engine.shapes),
    )  # fmt: skip


def _unique(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[int], list[int]]:
    """Index of each pair's first equal pair, and the distinct ones.

    The same data is stored once: every seed of a preset usually trains on the same training split.
    """
    first: list[int] = []
    distinct: list[int] = []
    for i, (x, y) in enumerate(pairs):
        for j in distinct:
            u, v = pairs[j]
            if (u is x and v is y) or (
                u.shape == x.shape and v.shape == y.shape and torch.equal(v, y)
                and torch.equal(u, x)
            ):  # fmt: skip
                first.append(j)
                break
        else:
            distinct.append(i)
            first.append(i)
    return first, distinct


class RunGroup:
    """The concatenated stacks of several runs' engines and their lockstep gate.

    Built from engines of equal :func:`group_key` (their models already constructed, seeded
    and partitioned); from then on each engine's ``params``, optimiser buffers and data are
    views into the group's, and ``engine.host`` is this group.
    """

    def __init__(self, engines: Sequence[Any]) -> None:
        keys = {group_key(e) for e in engines}
        if len(engines) < 1 or None in keys or len(keys) != 1:
            raise bad_argument("batch_runs", len(engines), "engines of one group_key (not None)")
        self.engines = list(engines)
        lead = self.engines[0]
        self.backend = lead.backend
        self.device = lead.device
        self._fn = lead._fn
        self._vgrad = getattr(lead, "_vgrad", None)
        self._vgrad_masked = getattr(lead, "_vgrad_masked", None)
        self.local_steps = lead.local_steps
        self.agent_chunk = lead.agent_chunk
        sizes = [e.n_agents for e in self.engines]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_agents = int(self.offsets[-1])
        self._slot = {id(e): r for r, e in enumerate(self.engines)}
        with torch.no_grad():
            self.params = self._concat([e.params for e in self.engines])
            self.momentum_buffers = self._concat([e.momentum_buffers for e in self.engines])
            self.adam_buffers = self._concat([e.adam_buffers for e in self.engines])
        self._opt_buffers = self.adam_buffers if lead.optimizer == "adam" else self.momentum_buffers
        self._share_data()
        for e in self.engines:
            e.host = self
        self._cv = threading.Condition()
        self._active = len(self.engines)
        self._pending: list[tuple[int, str, Any, tuple]] = []
        self._done: dict[int, Any] = {}
        self._ticket = 0
        self._turn = False
        self.calls = {"train": 0, "evaluate": 0}
        """Batched calls made (each covers every run that asked at that point)."""

    # --- set-up -----------------------------------------------------------------------------
    def _concat(self, per_engine: Sequence[list[torch.Tensor]]) -> list[torch.Tensor]:
        """One stack per layer, rows of run after run; each engine's list now holds views."""
        if not per_engine[0]:
            return []
        layers = range(len(per_engine[0]))
        big = [torch.cat([stacks[k] for stacks in per_engine]) for k in layers]
        for r, stacks in enumerate(per_engine):
            lo, hi = int(self.offsets[r]), int(self.offsets[r + 1])
            for k in layers:
                stacks[k] = big[k][lo:hi]  # in place in the engine's list: never rebound after
        return big

    def _share_data(self) -> None:
        """Store training data once per distinct split and test samples once per distinct sample.

        Runs index the training data with their own offset; each engine's ``_x``/``_y`` become
        views.
        """
        first, distinct = _unique([(e._x, e._y) for e in self.engines])
        starts, xs, ys, at = {}, [], [], 0
        for j in distinct:
            starts[j] = at
            xs.append(self.engines[j]._x)
            ys.append(self.engines[j]._y)
            at += int(self.engines[j]._y.shape[0])
        self.x = xs[0] if len(xs) == 1 else torch.cat(xs)
        self.y = ys[0] if len(ys) == 1 else torch.cat(ys)
        self.data_offset = np.array([starts[j] for j in first], dtype=np.int64)
        for e, lo in zip(self.engines, self.data_offset, strict=True):
            n = int(e._y.shape[0])
            e._x, e._y = self.x[lo : lo + n], self.y[lo : lo + n]
        first, distinct = _unique([(e._x_test, e._y_test) for e in self.engines])
        self.test_of = first
        """Per run: the index of the run whose test sample it shares."""
        for e, j in zip(self.engines, first, strict=True):
            e._x_test, e._y_test = self.engines[j]._x_test, self.engines[j]._y_test

    # --- lockstep -------------------------------------------------------------------------
    def train(self, engine: Any, agents: np.ndarray, batches: np.ndarray) -> np.ndarray:
        """Mean CE per agent of ``engine``'s K local steps, trained with the other runs'.

        Every other run's training of this round is in the same call; blocks until they have all
        asked.
        """
        return self._submit("train", engine, (agents, batches))

    def evaluate(self, engine: Any, agents: np.ndarray, chunk: int) -> np.ndarray:
        """``[2, A]`` accuracy and CE of ``engine``'s ``agents``, batched like :meth:`train`."""
        return self._submit("evaluate", engine, (agents, chunk))

    def enter(self) -> None:
        """A run's thread starts: wait for the turn (one run's Python code at a time)."""
        with self._cv:
            self._take_turn()

    def leave(self) -> None:
        """Say the run is over (finished, stopped early or failed): stop waiting for it."""
        with self._cv:
            self._active -= 1
            self._turn = False
            if self._pending and len(self._pending) >= self._active:
                self._flush()
            self._cv.notify_all()

    def _take_turn(self) -> None:
        """WHY one run at a time.

        The runs' own steps (mobility, policies, mixing) are Python with many small torch calls; run
        side by side they convoy on the GIL (each call gives it up and waits to get it back) and ran
        slower than one after the other.
        """
        while self._turn:
            self._cv.wait()
        self._turn = True

    def _submit(self, kind: str, engine: Any, payload: tuple) -> Any:
        with self._cv:
            ticket = self._ticket
            self._ticket += 1
            self._pending.append((ticket, kind, engine, payload))
            self._turn = False
            if len(self._pending) >= self._active:  # every running run is waiting: go
                self._flush()
            self._cv.notify_all()
            while ticket not in self._done:
                self._cv.wait()
            result = self._done.pop(ticket)
            self._take_turn()
        if isinstance(result, BaseException):
            raise result
        return result

    def _flush(self) -> None:
        """Run every pending request (lock held; all other runs are waiting)."""
        pending = sorted(self._pending, key=lambda p: self._slot[id(p[2])])
        self._pending = []
        for kind, run in (("train", self._train_all), ("evaluate", self._evaluate_all)):
            requests = [(t, e, payload) for t, k, e, payload in pending if k == kind]
            if not requests:
                continue
            try:
                results = run(requests)
            except Exception as exc:  # every run of the call fails alike, the others go on
                results = [exc] * len(requests)
            self.calls[kind] += 1
            for (ticket, *_), result in zip(requests, results, strict=True):
                self._done[ticket] = result
        self._cv.notify_all()

    # --- the batched calls -------------------------------------------------------------------
    def _train_all(self, requests: list[tuple[int, Any, tuple]]) -> list[np.ndarray]:
        counts = [len(agents) for _, _, (agents, _) in requests]
        width = max(int(b.shape[2]) for _, _, (_, b) in requests)
        agents = np.concatenate(
            [self.offsets[self._slot[id(e)]] + a for _, e, (a, _) in requests]
        ).astype(np.int64)
        batches = np.full((agents.size, self.local_steps, width), -1, dtype=np.int64)
        steps = np.zeros(self.n_agents, dtype=np.int64)
        hypers = []
        row = 0
        for (_, e, (a, b)), n in zip(requests, counts, strict=True):
            shift = self.data_offset[self._slot[id(e)]]
            batches[row : row + n, :, : b.shape[2]] = np.where(b >= 0, b + shift, -1)
            steps[agents[row : row + n]] = e.adam_steps[a]
            hypers += [e._hyper] * n
            row += n
        if self.backend == "batched":
            chunk = group_chunk(self.agent_chunk, device=self.device.type, width=width,
                                largest=max(e.n_agents for e in self.engines))  # fmt: skip
            losses = train_batched_agents(
                self._vgrad, self._vgrad_masked, self.params, self._opt_buffers, self.x, self.y,
                agents, batches, hypers, steps, chunk=chunk,
            )  # fmt: skip
        else:
            losses = np.empty(agents.size)
            with threads(1):
                for cut, hp in hyper_stretches(hypers, 0, agents.size):
                    losses[cut] = train_loop_agents(
                        self._fn, self.params, self._opt_buffers, self.x, self.y, agents[cut],
                        batches[cut], hp, steps[agents[cut]],
                    )  # fmt: skip
        return list(np.split(losses, np.cumsum(counts)[:-1]))

    def _evaluate_all(self, requests: list[tuple[int, Any, tuple]]) -> list[np.ndarray]:
        """One :func:`evaluate_agents` call per distinct test sample (and chunk)."""
        results: list[np.ndarray | None] = [None] * len(requests)
        groups: dict[tuple[int, int], list[int]] = {}
        for i, (_, e, (_, chunk)) in enumerate(requests):
            groups.setdefault((self.test_of[self._slot[id(e)]], int(chunk)), []).append(i)
        for (test, chunk), members in groups.items():
            owner = self.engines[test]
            agents = np.concatenate([
                self.offsets[self._slot[id(requests[i][1])]] + requests[i][2][0] for i in members
            ]).astype(np.int64)  # fmt: skip
            with threads(1) if self.backend == "loop" else threads(None):
                out = evaluate_agents(
                    self._fn, self.params, owner._x_test, owner._y_test, agents, chunk
                )
            at = 0
            for i in members:
                n = len(requests[i][2][0])
                results[i] = out[:, at : at + n]
                at += n
        return [r for r in results if r is not None]


def plan_groups(models: Sequence[Any]) -> tuple[list[list[int]], list[int]]:
    """Indices of ``models`` that can run as one program, and of those that run alone.

    ``models`` are built :class:`mobidfl.model.world.MobiDFLModel`; groups are of >= 2 with equal
    :func:`group_key`, in order; the others have no learning, worker processes, or no partner.
    """
    groups: dict[tuple, list[int]] = {}
    alone: list[int] = []
    for i, model in enumerate(models):
        key = None if model.learner is None else group_key(model.learner.engine)
        if key is None:
            alone.append(i)
        else:
            groups.setdefault(key, []).append(i)
    together = [g for g in groups.values() if len(g) > 1]
    alone += [g[0] for g in groups.values() if len(g) == 1]
    return together, sorted(alone)


def lockstep(runs: Sequence[tuple[Any, int]], group: RunGroup | None) -> list[str | None]:
    """Step every ``(model, steps)`` to ``steps`` (or its early stop), as ``mesa.batch_run`` does.

    Each in its own thread taking turns when ``group`` holds their engines, one after the other when
    ``None``. Returns the traceback of each run that raised, else ``None``. On Ctrl-C every run
    stops after its current step and the KeyboardInterrupt goes on.
    """
    errors: list[str | None] = [None] * len(runs)
    stop = threading.Event()

    def drive(i: int, model: Any, steps: int) -> None:
        try:
            if group is not None:
                group.enter()
            while not stop.is_set() and model.running and model.steps < steps:
                model.step()
        except Exception:
            errors[i] = traceback.format_exc()
        finally:
            if group is not None:
                group.leave()

    if group is None:
        for i, (model, steps) in enumerate(runs):
            drive(i, model, steps)
        return errors
    workers = [threading.Thread(target=drive, args=(i, model, steps), name=f"run-{i}",
                                daemon=True) for i, (model, steps) in enumerate(runs)]  # fmt: skip
    for thread in workers:
        thread.start()
    try:
        for thread in workers:
            thread.join()
    except KeyboardInterrupt:  # Ctrl-C: every run ends its current step
        stop.set()
        for thread in workers:
            thread.join()
        raise
    return errors
