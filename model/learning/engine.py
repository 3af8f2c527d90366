"""The learning engine: local SGD for all agents on stacked parameters, plus mixing.

Agents never own an ``nn.Module``. The parameters of all N agents live in per-layer stacks
``engine.params[l]`` of shape ``[N, *shape_l]``; one template module is called
functionally with an agent's slices. This makes a D-PSGD / FedAvg averaging step one sparse
matmul per layer (:meth:`Engine.mix`) and lets the same state be trained by two backends:

* ``loop``: agent after agent, one thread each (``torch.set_num_threads(1)``), optionally
  spread over ``workers`` processes that update shared-memory stacks in place. On a CPU it
  is at least as fast as ``batched`` (``benchmarks/training.py``), needs no N-fold
  activation memory, and uses plain autograd, which is cheaper per call than
  ``torch.func.grad`` for small batches; so it is the CPU default.
* ``batched``: one ``vmap(grad(loss))`` over the stacked parameters per local step, updates
  with ``torch._foreach`` ops; runs on ``device`` (``cuda`` when available): the GPU path.

Loop-backend performance paths (``benchmarks/peer_round.py`` measures them): conv nets run
channels-last (NHWC) on the CPU, evaluation goes :data:`EVAL_CHUNK_CONV` samples per forward,
``workers = 0`` picks the free cores for big steps (:func:`auto_workers`), and
``worker_backend = "ray"`` makes the workers Ray actors (a local Ray or a cluster).

Both draw identical mini-batches (per-agent numpy Generators, consumed in the main process
only), so they agree to float rounding; ``workers > 1`` (processes or Ray actors) gives
bit-for-bit the same numbers as ``workers = 1``.

Local update (Cached-DFL, Alg. 1 lines 1-9; de Heredia 2024, Alg. 1 lines 2-4): K steps of
``x <- x - lr * d`` with ``d = grad CE(x; batch) + rho (x - x_i(t)) + wd x`` (i.e. the loss
``CE + rho/2 ||x - x_i(t)||^2``, ``x_i(t)`` = the agent's parameters when ``train`` starts),
and with momentum ``buf <- mu buf + d; x <- x - lr buf`` (torch.optim.SGD semantics).
With ``optimizer = "adam"`` the same ``d`` drives torch.optim.Adam's update (PSFL
§V: Adam, lr 1e-3, weight decay 1e-4), with per-agent moments and step counts.

Batch size per agent is ``min(B, |D_i|)``; ``B = 0`` means full-batch gradient descent on
all of the agent's data (DAM/DCM, Reza et al. §V). The loop backend slices each agent's batch;
the batched backend pads to the chunk's largest batch and masks the padded samples out of
the mean CE (same gradient).

Invariant: the stacks are allocated once and only ever written in place (``copy_``), because
worker processes hold shared-memory views of them. Never rebind ``engine.params[l]``.

This module holds the :class:`Engine` (its state, batch drawing, validation), the two backend
classes and :func:`make_engine`; the pieces live beside it: :mod:`mobidfl.model.learning.params`
(stacks, mixing, averaging), :mod:`mobidfl.model.learning.backends` (training and evaluation
kernels, optimiser updates) and :mod:`mobidfl.model.learning.workers` (process and Ray worker
pools). Their public names are re-exported here, so ``from mobidfl.model.learning.engine import
...`` keeps working.
"""

from __future__ import annotations

import math
import multiprocessing
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import vmap

from mobidfl.errors import ConfigError, bad_argument
from mobidfl.model.learning.backends import (
    EVAL_CHUNK_CONV,
    EVAL_CHUNK_DENSE,
    OPTIMIZERS,
    Functional,
    Hyper,
    adam_update,
    evaluate_agents,
    threads,
    train_batched_agents,
    train_loop_agents,
)
from mobidfl.model.learning.data import Dataset
from mobidfl.model.learning.nets import build_net, flops_per_sample
from mobidfl.model.learning.params import (
    DENSE_MIX_DENSITY,
    Params,
    average_stacks,
    combine_snapshots,
    consensus_distance,
    init_stacks,
    mix_stacks,
    mix_stacks_fp64,
    mixing_operator,
    nudge_last_bit,
    rng_restore,
    rng_state,
    shared_zeros,
    splits_mixing,
)
from mobidfl.model.learning.partition import label_histograms
from mobidfl.model.learning.workers import (
    AUTO_WORKERS_MIN_FLOP,
    WORKER_BACKENDS,
    ProcessPool,
    RayPool,
    auto_workers,
    keep_heap,
)

__all__ = [
    "AUTO_WORKERS_MIN_FLOP",
    "BACKENDS",
    "DENSE_MIX_DENSITY",
    "EVAL_CHUNK_CONV",
    "EVAL_CHUNK_DENSE",
    "OPTIMIZERS",
    "STATE_FORMAT",
    "WORKER_BACKENDS",
    "BatchedEngine",
    "Engine",
    "LoopEngine",
    "Params",
    "TrainingSettings",
    "adam_update",
    "agent_batch_sizes",
    "auto_workers",
    "make_engine",
    "mixing_operator",
]

STATE_FORMAT = 1

SPLIT_TEST_BELOW = 8
"""Worker processes share the *test set* instead of the agents when fewer than this many
agents per worker are evaluated and they do not divide evenly (5 cars on 2 workers: 3 / 2
by agents, 1.67 x at best; by test chunks, 2 x): same numbers, bit for bit."""


@dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """How every agent trains: the engine's options as one frozen value.

    A run builds it from its config with :meth:`of`, which reads each field by its own name
    (``net`` is the config's ``model``), so a core learning setting declared in
    :class:`mobidfl.model.config.ConfigFields` under the same name as a field here reaches
    the engine without a line in between. Tests and benchmarks build it directly.

    Attributes
    ----------
    net
        A name in :data:`mobidfl.model.learning.nets.NETS`.
    lr, batch_size, local_steps
        step size, batch size B (per agent min(B, |D_i|);
        0 = full batch), K steps per ``train``.
    momentum, weight_decay
        torch.optim.SGD-style options (buffers kept per agent).
    prox_rho
        proximal coefficient rho of Cached-DFL, Alg. 1 (0 = plain SGD).
    optimizer
        ``sgd`` or ``adam`` (torch.optim.Adam's update, state per agent).
    optimizer_state
        ``keep`` (state persists across rounds) or ``reset`` (zeroed before
        each ``train``).
    device
        ``cpu`` or ``cuda``.
    seed
        fixes the initial model(s) and every agent's batch sampling.
    workers
        processes for the loop backend (1 = in this process, 0 = auto:
        :func:`auto_workers`).
    same_init
        all agents start from one model (else N independent inits).
    agent_chunk
        batched backend only, agents per vmap call (None: 64 on CPU, all on
        CUDA); bounds activation memory.
    eval_chunk
        test samples per forward (0 = measured default, :data:`EVAL_CHUNK_CONV`).
    channels_last
        NHWC convs (None = on for conv nets on the CPU loop, where it wins).
    worker_backend
        ``processes`` (shared memory, this machine) or ``ray`` (actors on
        a local Ray or the cluster at ``ray_address``; ``workers`` actors).
    precision
        ``fp32`` or ``bf16`` (autocast of every forward and backward to
        bfloat16; parameters, optimiser state and losses stay fp32).
    perturb
        a controlled floating-point perturbation (:data:`PERTURBATIONS`): ``none``;
        ``init_last_bit`` (every initial parameter one unit in the last place toward +inf);
        ``fp64_aggregate`` (:meth:`Engine.mix`, :meth:`Engine.average` and
        :meth:`Engine.combine` sum in float64). Shows whether a result depends
        on rounding (``mobidfl.analysis.stability``).
    """

    net: str
    lr: float
    batch_size: int
    local_steps: int
    seed: int
    momentum: float = 0.0
    weight_decay: float = 0.0
    prox_rho: float = 0.0
    optimizer: str = "sgd"
    optimizer_state: str = "keep"
    device: str = "cpu"
    workers: int = 1
    same_init: bool = True
    agent_chunk: int | None = None
    eval_chunk: int = 0
    channels_last: bool | None = None
    worker_backend: str = "processes"
    ray_address: str | None = None
    precision: str = "fp32"
    perturb: str = "none"

    @classmethod
    def of(cls, config: Any, **engine_only: Any) -> TrainingSettings:
        """The training settings of a resolved run config.

        Parameters
        ----------
        config
            A :class:`mobidfl.model.config.Config` (typed ``Any``: the config is on the
            ground floor and needs no engine).
        **engine_only
            Options that are not run settings (``same_init``, ``agent_chunk``,
            ``channels_last``), as keywords.

        Returns
        -------
        TrainingSettings
            Every field the config has, by name; ``net`` from ``model``.
        """
        read = {f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)}
        return cls(**{**read, "net": config.model, **engine_only})


class Engine:
    """Parameters and optimiser state of all agents; see the module docstring.

    Attributes
    ----------
    params
        per-layer stacks ``[N, *shape]`` (write in place only).
    momentum_buffers
        per-layer stacks like ``params`` (empty list without momentum).
        Buffers stay with their agent: :meth:`mix` does not average them (optimiser state
        is local, as in torch.optim.SGD / decentralizepy).
    data_sizes
        samples per agent. label_hist: ``[N, C]`` label counts.
    """

    backend = "base"

    def __init__(
        self, training: TrainingSettings, *, dataset: Dataset, parts: Sequence[np.ndarray]
    ) -> None:
        """Build every agent's model and optimiser state.

        Parameters
        ----------
        training
            How every agent trains (:class:`TrainingSettings`).
        dataset
            From :func:`mobidfl.model.learning.data.load_dataset`.
        parts
            Training-sample indices per agent (:mod:`mobidfl.model.learning.partition`).
        """
        self.training = training
        """The frozen settings this engine was built with: ``training.lr`` is the *initial*
        rate, never the current one (a schedule moves :attr:`lr` with :meth:`set_lr`)."""
        _validate(training=training, parts=parts, n_train=dataset.n_train)
        self._take_settings(training, dataset=dataset, parts=parts)
        template, shared = self._init_stacks(training, dataset=dataset)
        self._place_net(template, training, dataset=dataset, shared=shared)
        self._take_data(dataset)
        self._pool: ProcessPool | RayPool | None = None
        self._finalizer: weakref.finalize | None = None
        self.host: Any = None
        """The :class:`mobidfl.model.learning.multirun.RunGroup` this engine's run trains and
        evaluates in (``--batch-runs``): its stacks are then rows of the group's, and :meth:`train`
        /
        :meth:`evaluate` go through the group's one batched call. ``None``: alone."""
        self._prepare()

    def _take_settings(
        self, t: TrainingSettings, *, dataset: Dataset, parts: Sequence[np.ndarray]
    ) -> None:
        """Copy the settings the hot paths read, and each agent's share of the data."""
        self.optimizer = str(t.optimizer)
        self.precision = str(t.precision)
        self.optimizer_state = str(t.optimizer_state)
        self.net_name = t.net
        self.dataset_name = dataset.name
        self.device = torch.device(t.device)
        self._lr = float(t.lr)  # the current rate's one home: lr, set_lr, _hyper read it
        self.batch_size = int(t.batch_size)
        self.local_steps = int(t.local_steps)
        self.momentum, self.weight_decay = float(t.momentum), float(t.weight_decay)
        self.prox_rho = float(t.prox_rho)
        self.agent_chunk = t.agent_chunk
        self.worker_backend = str(t.worker_backend)
        self.ray_address = t.ray_address
        self.seed = int(t.seed)
        self._input_shape = tuple(dataset.input_shape)
        self._num_classes = int(dataset.num_classes)

        self.parts = [np.asarray(p, dtype=np.int64).reshape(-1) for p in parts]
        self.n_agents = len(self.parts)
        self.data_sizes = np.array([p.size for p in self.parts], dtype=np.int64)
        self.batch_sizes = agent_batch_sizes(self.data_sizes, self.batch_size)
        self.label_hist = label_histograms(dataset.train_labels, self.parts, dataset.num_classes)

    def _init_stacks(self, t: TrainingSettings, *, dataset: Dataset) -> tuple[nn.Module, bool]:
        """Build the template net and every agent's initial parameters from :attr:`seed`.

        Returns the template and whether the stacks are in shared memory (for workers).
        """
        with torch.random.fork_rng(devices=[]):  # leave the global RNG untouched
            torch.manual_seed(self.seed)
            template = build_net(t.net, dataset.input_shape, dataset.num_classes)
            self.flops_per_sample = flops_per_sample(
                template, self._input_shape, backward=False
            )
            self.workers = (
                int(t.workers)
                if t.workers
                else auto_workers(
                    flops_per_step=self.n_agents
                    * self.flops_per_sample
                    * (3 * self.local_steps * self.batch_size + int(dataset.y_test.shape[0])),
                    n_agents=self.n_agents,
                    # Adam's moments live in this process: never spread over workers
                    pooled=self.backend == "loop" and self.device.type == "cpu"
                    and self.optimizer == "sgd",
                )
            )
            # Worker processes map the stacks: allocate them in shared memory at once, so
            # they are never held twice (a later share_memory_() copies them).
            shared = (
                self.workers > 1 and self.backend == "loop" and self.device.type == "cpu"
                and t.worker_backend == "processes"
            )  # fmt: skip
            self.params: list[torch.Tensor] = init_stacks(
                template, self.n_agents, t.same_init, shared=shared
            )
        self.perturb = str(t.perturb)  # checked by the config (ConfigFields.perturb), trusted here
        if self.perturb == "init_last_bit":
            nudge_last_bit(self.params)
        return template, shared

    def _place_net(
        self, template: nn.Module, t: TrainingSettings, *, dataset: Dataset, shared: bool
    ) -> None:
        """Freeze the template, pick the memory layout and chunks, move the stacks to the device."""
        for p in template.parameters():
            p.requires_grad_(False)
        if list(template.buffers()):
            raise ConfigError("model", t.net, "a net without buffers (no BatchNorm)")
        has_conv = any(isinstance(m, nn.Conv2d) for m in template.modules())
        channels_last = t.channels_last
        if channels_last is None:  # measured to win only for convs on the CPU loop
            channels_last = has_conv and self.backend == "loop" and self.device.type == "cpu"
        self.channels_last = bool(channels_last)
        auto_chunk = EVAL_CHUNK_CONV if has_conv else EVAL_CHUNK_DENSE
        if self.device.type == "cuda":  # one forward per agent: small chunks starve a GPU
            auto_chunk = int(dataset.y_test.shape[0])
        self.eval_chunk = int(t.eval_chunk) or auto_chunk
        self._fn = Functional(
            template.to(self.device), channels_last=self.channels_last, precision=self.precision
        )
        self.params = [p.to(self.device).contiguous() for p in self.params]
        zeros = shared_zeros if shared else torch.zeros_like
        self.momentum_buffers: list[torch.Tensor] = (
            [zeros(p) for p in self.params] if self.momentum and self.optimizer == "sgd" else []
        )
        # Adam: first moments of every layer, then second moments; optimiser steps per agent.
        self.adam_buffers: list[torch.Tensor] = (
            [torch.zeros_like(p) for p in self.params] + [torch.zeros_like(p) for p in self.params]
            if self.optimizer == "adam"
            else []
        )
        self.adam_steps = np.zeros(self.n_agents, dtype=np.int64)
        self.shapes = [tuple(p.shape[1:]) for p in self.params]
        self.num_params = int(sum(math.prod(s) for s in self.shapes))

    def _take_data(self, dataset: Dataset) -> None:
        """The dataset on the device, and the per-agent batch and loss-order generators."""
        self._x = dataset.x_train.to(self.device)
        self._y = dataset.y_train.to(self.device)
        self._x_test = self._fn.prep(dataset.x_test.to(self.device))
        self._y_test = dataset.y_test.to(self.device)
        seqs = np.random.SeedSequence([self.seed, 0xBA7C4]).spawn(self.n_agents)
        self._rngs = [np.random.Generator(np.random.PCG64(s)) for s in seqs]
        eval_rng = np.random.default_rng([self.seed, 0x1055])
        self._loss_order = [p[eval_rng.permutation(p.size)] for p in self.parts]

    def _prepare(self) -> None:
        """What a backend sets up once the stacks exist (default: nothing)."""

    # --- training ------------------------------------------------------------------------
    @property
    def lr(self) -> float:
        """The current learning rate: the next :meth:`train` steps with it.

        Read-only: a schedule changes it with :meth:`set_lr`, so one attribute holds it and
        :attr:`training` keeps the initial rate.
        """
        return self._lr

    def set_lr(self, value: float) -> None:
        """Make ``value`` the rate of every later :meth:`train` (a ReduceLROnPlateau cut).

        Raises
        ------
        ValueError
            ``value`` is not a finite number > 0.
        """
        rate = float(value)
        if not (math.isfinite(rate) and rate > 0.0):
            raise ValueError(f"set_lr needs a finite learning rate > 0, got {value!r}")
        self._lr = rate

    @property
    def _hyper(self) -> Hyper:
        """The optimiser settings of the next ``train`` call, built from the current :attr:`lr`."""
        return Hyper(
            self._lr, self.momentum, self.weight_decay, self.prox_rho, optimizer=self.optimizer
        )

    @property
    def _opt_buffers(self) -> list[torch.Tensor]:
        return self.adam_buffers if self.optimizer == "adam" else self.momentum_buffers

    def _agents_of(self, mask: np.ndarray | None) -> np.ndarray:
        if mask is None:
            return np.arange(self.n_agents)
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != (self.n_agents,):
            raise bad_argument("mask", m.shape, f"a boolean array of length {self.n_agents}")
        return np.flatnonzero(m)

    def _draw_batches(self, agents: np.ndarray) -> np.ndarray:
        """``[A, K, B_max]`` global sample indices, drawn without replacement per step.

        Agent ``a`` uses the first ``min(B, |D_a|)`` entries, the rest are -1.

        Cached-DFL Alg. 1 line 5 / de Heredia 2024 Alg. 1 line 2: each step samples a fresh
        batch from the agent's own data. Drawn here, in the main process, from the agent's own
        Generator, so every backend and worker count sees the same batches. A full batch
        (``B = 0``, Reza et al.) is the agent's whole data, in its stored order.
        """
        k = self.local_steps
        widths = self.batch_sizes[agents]
        out = np.full((len(agents), k, int(widths.max(initial=1))), -1, dtype=np.int64)
        for a, i in enumerate(agents):
            rng, part, b = self._rngs[i], self.parts[i], int(widths[a])
            for s in range(k):
                if b == part.size and self.batch_size == 0:
                    out[a, s, :b] = part
                else:
                    out[a, s, :b] = part[rng.choice(part.size, size=b, replace=False)]
        return out

    def reset_optimizer_state(self, agents: np.ndarray) -> None:
        """Zero these agents' momentum / Adam moments and Adam step counts.

        ``optimizer_state = reset`` calls it before every round: the optimiser then starts
        afresh each round, as in FL code that builds it inside the local-training call.
        With one local step per round (Reza et al. §V: one full-batch GD step) momentum has
        no effect then, which is the paper's Sec. III update x - eta g.
        """
        idx = torch.as_tensor(np.asarray(agents, dtype=np.int64), device=self.device)
        for buf in self._opt_buffers:
            buf.index_fill_(0, idx, 0.0)
        self.adam_steps[np.asarray(agents, dtype=np.int64)] = 0

    def train(self, *, mask: np.ndarray | None = None) -> np.ndarray:
        """K local SGD steps for every agent where ``mask`` is true (all if ``None``).

        Returns the mean training CE over the K steps per agent (NaN where not trained).
        """
        agents = self._agents_of(mask)
        losses = np.full(self.n_agents, np.nan)
        if agents.size:
            if self.optimizer_state == "reset":
                self.reset_optimizer_state(agents)
            batches = self._draw_batches(agents)
            if self.host is not None:
                losses[agents] = self.host.train(self, agents, batches)
            else:
                losses[agents] = self._train(agents, batches)
            self.adam_steps[agents] += self.local_steps
        return losses

    def _train(self, agents: np.ndarray, batches: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # --- mixing ----------------------------------------------------------------------------
    def mix(self, w: sp.spmatrix) -> None:
        """``x_i <- sum_j W_ij x_j`` for all agents: one matmul per layer.

        W is applied as a torch sparse CSR matrix, or dense when more than
        :data:`DENSE_MIX_DENSITY` of it is non-zero (:func:`mixing_operator`).

        De Heredia 2024 Alg. 1 line 6; Reza et al. ``X(t) = X(t-1/2) W(t)``. ``W`` must be N x N
        (row-stochastic; rows of agents that do not mix are the identity). Momentum buffers
        are left as they are (local optimiser state).
        """
        m = sp.csr_matrix(w)
        if m.shape != (self.n_agents, self.n_agents):
            raise bad_argument("W", m.shape, f"an {self.n_agents} x {self.n_agents} matrix")
        if self.perturb == "fp64_aggregate":  # the same mix, another rounding (training.perturb)
            mix_stacks_fp64(self.params, m, device=self.device)
            return
        self._mix(m)

    def _mix(self, m: sp.csr_matrix) -> None:
        mix_stacks(self.params, m, device=self.device)

    def average(self, *, agents: np.ndarray, weights: np.ndarray | None = None) -> Params:
        """Weighted average of the given agents' models (FedAvg: weights = sample counts)."""
        idx = np.asarray(agents, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            raise bad_argument("agents", [], "at least one agent to average")
        w = np.ones(idx.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != idx.shape or (w < 0).any() or w.sum() <= 0:
            raise bad_argument("weights", w.shape, f"{idx.size} non-negative weights, sum > 0")
        return average_stacks(
            self.params, idx, w, device=self.device, fp64=self.perturb == "fp64_aggregate"
        )

    # --- single models -----------------------------------------------------------------------
    def snapshot(self, i: int) -> Params:
        """An immutable copy of agent i's parameters (caches share these tuples)."""
        return tuple(p[i].detach().clone() for p in self.params)

    def set_agent(self, i: int, tensors: Sequence[torch.Tensor]) -> None:
        """Overwrite agent i's parameters (copied in place)."""
        if len(tensors) != len(self.params):
            raise bad_argument("tensors", len(tensors), f"{len(self.params)} parameter tensors")
        with torch.no_grad():
            for p, t in zip(self.params, tensors, strict=True):
                p[i].copy_(t)

    def combine(self, snapshots: Sequence[Params], weights: Sequence[float]) -> Params:
        """``sum_k weights[k] * snapshots[k]`` per layer (weights used as given)."""
        if len(snapshots) == 0 or len(snapshots) != len(weights):
            raise bad_argument(
                "weights", len(weights), f"one weight per snapshot ({len(snapshots)}), >= 1"
            )
        return combine_snapshots(snapshots, weights, n_layers=len(self.params), device=self.device,
                                 fp64=self.perturb == "fp64_aggregate")  # fmt: skip

    def loss_of(self, model: int | Params, *, on_agent: int, max_samples: int = 256) -> float:
        """CE of ``model`` (an agent index or a parameter tuple) on agent ``on_agent``'s data.

        Uses a fixed random subset of at most ``max_samples`` of that agent's training
        samples (PSFL eq. 3: ``L(D_i, nn_j)``).
        """
        if isinstance(model, int | np.integer):
            params: Sequence[torch.Tensor] = [p[int(model)] for p in self.params]
        else:
            params = model
        idx = torch.from_numpy(self._loss_order[on_agent][:max_samples]).to(self.device)
        with torch.no_grad():
            return float(self._fn.ce(params, self._x[idx], self._y[idx]))

    def loss_order(self, agent: int) -> np.ndarray:
        """``agent``'s sample indices in the fixed order :meth:`loss_of` reads them (a copy)."""
        return self._loss_order[agent].copy()

    def logits(self, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The shared network's outputs on training-set inputs ``x`` with ``params``."""
        return self._fn.logits(params, x)

    @property
    def param_names(self) -> list[str]:
        """Name of every parameter tensor, in the order of :attr:`params`."""
        return list(self._fn.names)

    def sample_losses(
        self, model: int | Params, *, on_agent: int, max_samples: int | None = None
    ) -> np.ndarray:
        """Per-sample CE of ``model`` on agent ``on_agent``'s training samples.

        Samples are read in the agent's fixed random order (the one :meth:`loss_of` uses),
        at most ``max_samples`` of them (``None`` = all). PSFL (Domini et al., ACSOS 2024)
        reduces these to the L(D_i, nn_j) of its eq. 3 (:func:`mobidfl.model.maths.psfl.eq3_loss`).
        """
        if isinstance(model, int | np.integer):
            params: Sequence[torch.Tensor] = [p[int(model)] for p in self.params]
        else:
            params = model
        order = self._loss_order[on_agent]
        order = order if max_samples is None else order[:max_samples]
        idx = torch.from_numpy(order).to(self.device)
        with torch.no_grad():
            logits = self._fn.logits(params, self._x[idx])
            return F.cross_entropy(logits, self._y[idx], reduction="none").double().cpu().numpy()

    def set_data(self, agent: int, indices: np.ndarray) -> None:
        """Give ``agent`` new local training data (a moving sensor senses a new area).

        ``indices`` are training-set sample indices, in the order :meth:`loss_of` and
        :meth:`sample_losses` read them. Updates the agent's partition, its size and label
        histogram in place (``data_sizes``/``label_hist`` are shared with agent tables).
        """
        order = np.asarray(indices, dtype=np.int64).reshape(-1)
        if not 0 <= int(agent) < self.n_agents:
            raise bad_argument("agent", agent, f"an agent id in [0, {self.n_agents})")
        if order.size < self.batch_size:
            raise bad_argument("indices", order.size, f">= batch_size ({self.batch_size}) samples")
        n_train = int(self._y.shape[0])
        if order.min() < 0 or order.max() >= n_train or np.unique(order).size != order.size:
            raise bad_argument("indices", order.size, f"distinct sample ids in [0, {n_train})")
        labels = self._y.cpu().numpy()
        self.parts[agent] = np.sort(order)
        self.data_sizes[agent] = order.size
        self.label_hist[agent] = np.bincount(labels[order], minlength=self.label_hist.shape[1])
        self._loss_order[agent] = order.copy()

    # --- evaluation ------------------------------------------------------------------------
    def evaluate_params(
        self, params: Sequence[torch.Tensor], *, labels: Sequence[int] | None = None
    ) -> tuple[float, float]:
        """Accuracy and mean CE of one parameter tuple (not an agent's) on the test sample.

        Infrastructure models (MoFeL's edge servers) and federation models use this.
        ``labels`` restricts the test sample to those classes (PSFL tests each node on its
        area's labels); NaN, NaN when no test sample has one of them.
        """
        if len(params) != len(self.params):
            raise bad_argument("params", len(params), f"{len(self.params)} parameter tensors")
        x, y = self._x_test, self._y_test
        if labels is not None:
            keep = torch.isin(y, torch.as_tensor(list(labels), dtype=y.dtype, device=y.device))
            if not bool(keep.any()):
                return float("nan"), float("nan")
            x, y = x[keep], y[keep]
        stacks = [torch.as_tensor(p).to(self.device).unsqueeze(0) for p in params]
        out = evaluate_agents(self._fn, stacks, x, y, np.zeros(1, np.int64), 2048)
        return float(out[0, 0]), float(out[1, 0])

    def evaluate(
        self, *, agents: np.ndarray | None = None, chunk: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Accuracy and mean CE of each agent's model on the shared test sample.

        A loop over agents, each with the whole test sample as one batch (``chunk`` samples
        at most): on CPU such big-batch matmuls/convs already run near peak, so a vmap over
        agents gains nothing (it is slower for a CNN) while needing N times the activation
        memory. The loop backend spreads agents over its
        workers. Cached-DFL evaluates every agent on one shared test set. ``chunk``: samples
        per forward (default ``eval_chunk``, chosen by measurement: :data:`EVAL_CHUNK_CONV`).
        """
        idx = np.arange(self.n_agents) if agents is None else np.asarray(agents).reshape(-1)
        if idx.size == 0:
            return np.empty(0), np.empty(0)
        idx, chunk = idx.astype(np.int64), int(chunk or self.eval_chunk)
        if self.host is not None:
            res = self.host.evaluate(self, idx, chunk)
        else:
            res = self._evaluate(idx, chunk)
        return res[0], res[1]

    def _evaluate(self, agents: np.ndarray, chunk: int) -> np.ndarray:
        return evaluate_agents(self._fn, self.params, self._x_test, self._y_test, agents, chunk)

    def consensus(self) -> float:
        """Mean distance of the agents' models to their average: mean_i ||x_i - x_bar||."""
        return consensus_distance(self.params, device=self.device)

    # --- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain Python values only (readable by ``torch.load(weights_only=True)``)."""
        return {
            "format": STATE_FORMAT,
            "net": self.net_name,
            "n_agents": self.n_agents,
            "params": [p.detach().cpu().clone() for p in self.params],
            "momentum": [b.detach().cpu().clone() for b in self.momentum_buffers],
            "adam": [b.detach().cpu().clone() for b in self.adam_buffers],
            "adam_steps": torch.from_numpy(self.adam_steps.copy()),
            "rng": [rng_state(r) for r in self._rngs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore parameters, momentum buffers and batch-sampling RNGs (in place)."""
        if state.get("format") != STATE_FORMAT or state.get("net") != self.net_name:
            raise bad_argument(
                "state",
                (state.get("format"), state.get("net")),
                f"an engine state of format {STATE_FORMAT} for net {self.net_name}",
            )
        if state.get("n_agents") != self.n_agents or len(state["params"]) != len(self.params):
            raise bad_argument("state", state.get("n_agents"), f"{self.n_agents} agents")
        if len(state["momentum"]) != len(self.momentum_buffers):
            raise bad_argument("state", "momentum", "the same momentum setting as this engine")
        with torch.no_grad():
            for dst, src in zip(self.params, state["params"], strict=True):
                dst.copy_(src)
            for dst, src in zip(self.momentum_buffers, state["momentum"], strict=True):
                dst.copy_(src)
            adam = state.get("adam", [])
            if len(adam) != len(self.adam_buffers):
                raise bad_argument("state", "adam", "the same optimizer setting as this engine")
            for dst, src in zip(self.adam_buffers, adam, strict=True):
                dst.copy_(src)
        if "adam_steps" in state:
            self.adam_steps[:] = np.asarray(state["adam_steps"], dtype=np.int64)
        for r, s in zip(self._rngs, state["rng"], strict=True):
            r.bit_generator.state = rng_restore(s)

    def close(self) -> None:
        """Stop worker processes (if any); the engine stays usable (it restarts them)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LoopEngine(Engine):
    """Per-agent loop, one thread per agent; ``workers`` processes share the stacks."""

    backend = "loop"

    def _prepare(self) -> None:
        if self.device.type == "cpu":  # no page faults per forward, as in the workers
            keep_heap()

    def _pooled(self) -> bool:
        return self.workers > 1 or self.worker_backend == "ray"

    def _train(self, agents: np.ndarray, batches: np.ndarray) -> np.ndarray:
        if not self._pooled():
            with threads(1):
                return train_loop_agents(
                    self._fn,
                    self.params,
                    self._opt_buffers,
                    self._x,
                    self._y,
                    agents,
                    batches,
                    self._hyper,
                    self.adam_steps[agents],
                )
        return self._get_pool().run("train", agents, batches, self._hyper)

    def _mix(self, m: sp.csr_matrix) -> None:
        """Worker processes share a sparse W's column blocks (bit-identical to one process)."""
        if self.workers > 1 and self.worker_backend == "processes" and splits_mixing(
            m, self.params
        ):
            pool = self._get_pool()
            assert isinstance(pool, ProcessPool)
            pool.mix(m)
            return
        super()._mix(m)

    def _evaluate(self, agents: np.ndarray, chunk: int) -> np.ndarray:
        if not self._pooled():
            with threads(1):
                return super()._evaluate(agents, chunk)
        pool = self._get_pool()
        n_test = int(self._y_test.shape[0])
        if (isinstance(pool, ProcessPool) and len(agents) < SPLIT_TEST_BELOW * self.workers
                and len(agents) % self.workers and n_test >= chunk * self.workers):  # fmt: skip
            return pool.evaluate_split(agents, chunk, n_test)
        return pool.run("eval", agents, chunk)

    def _get_pool(self) -> ProcessPool | RayPool:
        if self._pool is None:
            data = (self._x, self._y, self._x_test, self._y_test)
            net = (
                self.net_name, self._input_shape, self._num_classes, self.channels_last,
                self.precision,
            )  # fmt: skip
            if self.worker_backend == "ray":
                self._pool = RayPool(
                    self.workers,
                    address=self.ray_address,
                    net=net,
                    params=self.params,
                    bufs=self.momentum_buffers,
                    data=data,
                )
            else:
                for t in (*self.params, *self.momentum_buffers, *data):
                    t.share_memory_()
                args = (*net, self.params, self.momentum_buffers, data)
                self._pool = ProcessPool(self.workers, args)
            self._finalizer = weakref.finalize(self, type(self._pool).close, self._pool)
        return self._pool


class BatchedEngine(Engine):
    """``vmap`` over agents of ``grad(CE)``; one call per local step and chunk of agents."""

    backend = "batched"

    def _prepare(self) -> None:
        self._vgrad = vmap(self._fn.grad_and_loss, in_dims=(0, 0, 0))
        self._vgrad_masked = vmap(self._fn.grad_and_loss_masked, in_dims=(0, 0, 0, 0))

    def _chunk(self) -> int:
        if self.agent_chunk is not None:
            return self.agent_chunk
        return self.n_agents if self.device.type == "cuda" else 64

    def _train(self, agents: np.ndarray, batches: np.ndarray) -> np.ndarray:
        return train_batched_agents(
            self._vgrad,
            self._vgrad_masked,
            self.params,
            self._opt_buffers,
            self._x,
            self._y,
            agents,
            batches,
            self._hyper,
            self.adam_steps,
            chunk=self._chunk(),
        )


BACKENDS: dict[str, type[Engine]] = {"loop": LoopEngine, "batched": BatchedEngine}


def make_engine(
    backend: str,
    training: TrainingSettings,
    *,
    dataset: Dataset,
    parts: Sequence[np.ndarray],
) -> Engine:
    """Build the learning engine of all agents.

    Parameters
    ----------
    backend
        ``loop`` (CPU default: per-agent loop, ``workers`` processes) or ``batched``
        (vmap over agents; the GPU path).
    training
        How every agent trains (:class:`TrainingSettings`; from a run's config:
        :meth:`TrainingSettings.of`).
    dataset
        From :func:`mobidfl.model.learning.data.load_dataset`.
    parts
        Training-sample indices per agent (:mod:`mobidfl.model.learning.partition`).

    Returns
    -------
    Engine
        A :class:`LoopEngine` or :class:`BatchedEngine`.

    Raises
    ------
    ConfigError
        an unknown backend or net, an agent without data, no CUDA here for ``device = cuda``.
        The settings themselves are trusted: the config checked each and their combinations.
    ValueError
        ``parts`` or an engine-only option (``agent_chunk``) is wrong: the calling code's fault.
    """
    if backend not in BACKENDS:
        raise ConfigError("backend", backend, "one of " + ", ".join(BACKENDS))
    return BACKENDS[backend](training, dataset=dataset, parts=parts)


# --- helpers ------------------------------------------------------------------------------------
def _validate(*, training: TrainingSettings, parts: Sequence[np.ndarray], n_train: int) -> None:
    """Refuse what no setting check could know: this machine, this process, the partition.

    WHY: ``training`` is trusted; each setting and each combination of settings is checked
    once, by the config (:func:`mobidfl.model.config.validated`). Here: the engine-only options
    and the arguments (``parts``), and whether this machine and process can do it.
    """
    if len(parts) < 1:
        raise ValueError("the engine needs parts for at least one agent, got none")
    if training.agent_chunk is not None and int(training.agent_chunk) < 1:
        chunk = training.agent_chunk
        raise ValueError(f"agent_chunk must be an integer >= 1 or None, got {chunk!r}")
    dev = torch.device(training.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", training.device, "cpu (no CUDA device is available here)")
    workers = training.workers
    if workers > 1 and multiprocessing.current_process().daemon:
        raise ConfigError(
            "workers", workers, "1 inside a daemonic process (e.g. a mesa.batch_run worker)"
        )
    for i, p in enumerate(parts):
        arr = np.asarray(p)
        if arr.size and (arr.min() < 0 or arr.max() >= n_train):
            raise ValueError(f"parts[{i}] holds sample indices outside [0, {n_train})")
    sizes = np.array([np.asarray(p).size for p in parts])
    small = int(np.argmin(sizes))
    if sizes[small] < 1:
        raise ConfigError(
            "partition", f"agent {small} with 0 samples", "a partition that gives every agent data"
        )


def agent_batch_sizes(data_sizes: np.ndarray, batch_size: int) -> np.ndarray:
    """Per-agent batch ``min(B, |D_i|)``; ``B = 0`` = full batch ``|D_i|`` (Reza et al. §V)."""
    sizes = np.asarray(data_sizes, dtype=np.int64)
    if batch_size == 0:
        return sizes.copy()
    return np.minimum(sizes, int(batch_size))
