"""Training and evaluation kernels shared by the engine's backends and its workers.

Each kernel is a plain function of the parameter stacks, the data and the hyper-parameters,
so the ``loop`` backend, its worker processes, its Ray actors and the ``batched`` backend run
literally the same arithmetic (hence ``workers > 1`` gives bit-for-bit the numbers of
``workers = 1``, and the two backends agree to float rounding):

* :func:`train_loop_agents`: agent after agent, plain autograd on leaf views of the stacks
  (the CPU default, see :mod:`mobidfl.model.learning.engine`).
* :func:`train_batched_agents`: one ``vmap(grad(loss))`` over a chunk of agents per local
  step, updates with ``torch._foreach`` ops (the GPU path).
* :func:`evaluate_agents`: accuracy and mean CE per agent, ``chunk`` test samples per forward.

Local update (Cached-DFL, Alg. 1 lines 1-9; de Heredia 2024, Alg. 1 lines 2-4): K steps of
``x <- x - lr * d`` with ``d = grad CE(x; batch) + rho (x - x_i(t)) + wd x`` (i.e. the loss
``CE + rho/2 ||x - x_i(t)||^2``, ``x_i(t)`` = the agent's parameters when ``train`` starts),
and with momentum ``buf <- mu buf + d; x <- x - lr buf`` (torch.optim.SGD semantics).
With ``optimizer = "adam"`` the same ``d`` drives torch.optim.Adam's update (PSFL
§V: Adam, lr 1e-3, weight decay 1e-4), with per-agent moments and step counts.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value

__all__ = [
    "EVAL_CHUNK_CONV",
    "EVAL_CHUNK_DENSE",
    "OPTIMIZERS",
    "PRECISIONS",
    "Functional",
    "Hyper",
    "adam_update",
    "conv2d_fast_wgrad",
    "evaluate_agents",
    "evaluate_chunk_sums",
    "sum_chunks",
    "sgd_update",
    "threads",
    "hyper_stretches",
    "train_batched_agents",
    "train_loop_agents",
]

EVAL_CHUNK_CONV = 128
"""Test samples per forward for conv nets: small chunks keep a conv's activations in cache,
and throughput falls with the chunk size beyond this (``benchmarks/peer_round.py``
re-measures; the numbers: docs/performance/measurements.md)."""
EVAL_CHUNK_DENSE = 512
"""Test samples per forward for nets without convs: larger matmuls run nearer the peak."""


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Temporarily set torch's intra-op thread count (restored afterwards)."""
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    if old != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if old != n:
            torch.set_num_threads(old)


@dataclass(frozen=True)
class Hyper:
    """The optimiser settings of one ``train`` call.

    Frozen and picklable, because the loop backend sends them to its worker processes and Ray
    actors.
    """

    lr: float
    momentum: float
    weight_decay: float
    prox_rho: float
    optimizer: str = "sgd"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8


OPTIMIZERS = ("sgd", "adam")
PRECISIONS = ("fp32", "fp32_fast", "bf16")
"""Arithmetic of forwards and backwards (setting ``precision``): fp32; fp32 with the first
convolution's weight gradient as one convolution over the batch (:func:`conv2d_fast_wgrad`,
another summation order); or bf16 autocast."""


def adam_update(
    ps: Sequence[torch.Tensor],
    d: Sequence[torch.Tensor],
    exp_avg: Sequence[torch.Tensor],
    exp_avg_sq: Sequence[torch.Tensor],
    *,
    t: float | torch.Tensor,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
) -> None:
    """One Adam step in place (Kingma & Ba 2015, Alg. 1; torch.optim.Adam's formula).

    ``m <- b1 m + (1-b1) d``, ``v <- b2 v + (1-b2) d^2``,
    ``x <- x - lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)``. ``t`` is the step count
    (>= 1): a number, or a tensor ``[A]`` of per-agent counts when ``ps`` are stacks ``[A, ...]``.
    """
    for p, g, m, v in zip(ps, d, exp_avg, exp_avg_sq, strict=True):
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        if isinstance(t, torch.Tensor):
            shape = (-1,) + (1,) * (p.dim() - 1)
            tt = t.to(p.dtype).reshape(shape)
            bc1 = 1.0 - beta1**tt
            bc2 = 1.0 - beta2**tt
            p.sub_(lr * (m / bc1) / (v.sqrt() / bc2.sqrt() + eps))
        else:
            bc1 = 1.0 - beta1**t
            bc2 = 1.0 - beta2**t
            p.addcdiv_(m, v.sqrt().div_(math.sqrt(bc2)).add_(eps), value=-lr / bc1)


def sgd_update(
    ps: list[torch.Tensor],
    grads: Sequence[torch.Tensor],
    bufs: list[torch.Tensor],
    anchor: list[torch.Tensor] | None,
    hp: Hyper,
    t: float | torch.Tensor = 1.0,
) -> None:
    """In-place optimiser step on (slices of) the stacks; identical element-wise for both backends.

    With Adam, ``bufs`` holds the first moments then the second moments and ``t`` is the step count
    (see :func:`adam_update`).
    """
    d = list(grads)
    if hp.weight_decay:
        torch._foreach_add_(d, ps, alpha=hp.weight_decay)
    if hp.prox_rho and anchor is not None:
        torch._foreach_add_(d, torch._foreach_sub(ps, anchor), alpha=hp.prox_rho)
    if hp.optimizer == "adam":
        n = len(ps)
        adam_update(
            ps, d, bufs[:n], bufs[n:], t=t, lr=hp.lr, beta1=hp.beta1, beta2=hp.beta2, eps=hp.eps
        )
        return
    if hp.momentum:
        torch._foreach_mul_(bufs, hp.momentum)
        torch._foreach_add_(bufs, d)
        d = bufs
    torch._foreach_add_(ps, d, alpha=-hp.lr)


class Functional:
    """The template net called with given parameters: CE loss and its gradient.

    ``channels_last``: evaluation runs with NHWC inputs and conv weights (CPU loop backend),
    where oneDNN's convs are faster (``benchmarks/peer_round.py``). It only helps when
    *both* the input and the weight are channels-last, so :meth:`layout` converts an agent's
    weights. Training stays NCHW: channels-last gave no clear gain for batches of 64, and
    NCHW keeps training bit-identical to the plain template.

    ``plan`` (:func:`nhwc_plan`): for plain conv stacks, evaluation keeps activations NHWC
    end to end and both training and evaluation take the ReLU after the max-pool (same
    values, same gradients), so no layout conversion sits between layers.
    ``precision``: ``"bf16"`` runs every forward (and so its backward) under
    :meth:`autocast`.
    """

    def __init__(
        self, template: nn.Module, *, channels_last: bool = False, precision: str = "fp32"
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {PRECISIONS}")
        self.template = template
        self.names = [n for n, _ in template.named_parameters()]
        self.channels_last = bool(channels_last)
        self.precision = precision
        self._device_type = next((p.device.type for p in template.parameters()), "cpu")
        self.plan = nhwc_plan(template, self.names)
        self.dense = self.plan if is_dense_plan(self.plan) and precision != "bf16" else None
        """The plan when the net is Linear (with bias) and ReLU layers only, in fp32: its
        gradient is written out (:func:`dense_step`) instead of recorded by autograd."""
        self.grad_and_loss = grad_and_value(self.ce)  # for vmap (batched backend)
        self.grad_and_loss_masked = grad_and_value(self.ce_masked)

    def prep(self, x: torch.Tensor) -> torch.Tensor:
        """An input batch in the layout the net runs fastest with."""
        if self.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def layout(self, p: torch.Tensor) -> torch.Tensor:
        """One agent's parameter tensor: a channels-last copy for conv weights, else ``p``."""
        if self.channels_last and p.dim() == 4:
            return p.contiguous(memory_format=torch.channels_last)
        return p

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """The context the forward passes run in: autocast with ``precision = "bf16"``.

        ``bf16``: torch autocast to bfloat16 on this device (convs and matmuls in bf16, parameters,
        losses and updates stay fp32); fp32: a no-op.
        """
        if self.precision != "bf16":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self._device_type, dtype=torch.bfloat16)

    def _fp32(self, logits: torch.Tensor) -> torch.Tensor:
        return logits if logits.dtype == torch.float32 else logits.float()

    def logits(self, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits of the net with ``params`` on ``x``, as float32 (under autocast when set)."""
        with self.autocast():
            out = functional_call(self.template, dict(zip(self.names, params, strict=True)), (x,))
        return self._fp32(out)

    def eval_logits(self, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits for evaluation.

        The NHWC plan (:func:`nhwc_plan`) when channels-last is on and the template is a plain stack
        of supported layers, else :meth:`logits`.
        """
        if self.channels_last and self.plan is not None and x.dim() == 4:
            with self.autocast():
                out = nhwc_forward(self.plan, params, x)
            return self._fp32(out)
        return self.logits(params, x)

    def ce(self, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the net with ``params`` on ``(x, y)``."""
        return F.cross_entropy(self.logits(params, x), y)

    def ce_masked(
        self, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor:
        """Mean CE over the samples where ``w`` is 1 (padded batches of unequal size)."""
        per = F.cross_entropy(self.logits(params, x), y, reduction="none")
        return (per * w).sum() / w.sum()

    def autograd_step(
        self, leaves: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """Gradient by plain autograd.

        Cheaper per call than ``torch.func.grad`` for small nets on one CPU thread
        (``benchmarks/training.py``), so the loop backend uses it. An MLP (:attr:`dense`) takes
        :func:`dense_step`: the same kernels, no graph.
        """
        if self.dense is not None:
            return dense_step(self.dense, leaves, x, y)
        if self.plan is not None:  # bit-identical gradients, ReLU after the pool (see plan)
            with self.autocast():
                out = nchw_forward(self.plan, leaves, x,
                                   fast_wgrad=self.precision == "fp32_fast")  # fmt: skip
            loss = F.cross_entropy(self._fp32(out), y)
        else:
            loss = self.ce(leaves, x, y)
        return torch.autograd.grad(loss, leaves), loss.detach()


PlanStep = tuple[str, tuple[int, ...], nn.Module | None]


def nhwc_plan(template: nn.Module, names: Sequence[str]) -> list[PlanStep] | None:
    """The evaluation plan of a plain ``nn.Sequential`` of supported layers, else None.

    Supported: Conv2d / ReLU / MaxPool2d(2) / AvgPool2d / Flatten / Linear / Dropout; None for any
    other template.

    Each step is ``(kind, parameter indices, module)``. "ReLU then 2x2 max-pool" becomes one
    ``pool_relu`` step (pool first: ReLU is monotone, so the result is identical and the
    ReLU touches 4x fewer values). oneDNN returns a 1-channel-input conv in NCHW, and a
    max-pool on that layout dominated the evaluation of Cached-DFL's CNN; the plan keeps
    activations NHWC and pools with two ``torch.maximum``.
    """
    if not isinstance(template, nn.Sequential):
        return None
    index = {n: i for i, n in enumerate(names)}
    mods = list(template.named_children())
    plan: list[PlanStep] = []
    k = 0
    while k < len(mods):
        key, m = mods[k]
        nxt = mods[k + 1][1] if k + 1 < len(mods) else None
        ids = tuple(index[f"{key}.{p}"] for p, _ in m.named_parameters())
        if isinstance(m, nn.Conv2d) and m.groups == 1 and m.padding_mode == "zeros":
            plan.append(("conv", ids, m))
        elif isinstance(m, nn.ReLU) and _is_pool2(nxt):
            plan.append(("pool_relu", (), None))
            k += 1
        elif isinstance(m, nn.ReLU):
            plan.append(("relu", (), None))
        elif _is_pool2(m):
            plan.append(("maxpool", (), None))
        elif isinstance(m, nn.AvgPool2d):
            plan.append(("avgpool", (), m))
        elif isinstance(m, nn.Flatten) and m.start_dim == 1 and m.end_dim == -1:
            plan.append(("flatten", (), None))
        elif isinstance(m, nn.Linear):
            plan.append(("linear", ids, None))
        elif not isinstance(m, nn.Dropout):  # dropout is the identity in evaluation
            return None
        k += 1
    return plan


def _is_pool2(m: nn.Module | None) -> bool:
    if not isinstance(m, nn.MaxPool2d):
        return False
    two = (2, (2, 2))
    return (m.kernel_size in two and m.stride in two and m.padding in (0, (0, 0))
            and m.dilation in (1, (1, 1)) and not m.ceil_mode)  # fmt: skip


def max_pool2_nhwc(h: torch.Tensor) -> torch.Tensor:
    """2x2 max-pool, stride 2, floor mode, of a contiguous NHWC ``[B, H, W, C]`` tensor.

    The same values as ``F.max_pool2d(., 2)`` (a max is exact), and faster than torch's
    channels-last max-pool on one thread because both maxima are contiguous vector ops.
    """
    b, hh, ww, c = h.shape
    v = h[:, : hh // 2 * 2, : ww // 2 * 2].reshape(b, hh // 2, 2, ww // 2, 2, c)
    m = torch.maximum(v[:, :, 0], v[:, :, 1])
    return torch.maximum(m[:, :, :, 0], m[:, :, :, 1])


class _MaxPool2(torch.autograd.Function):
    """2x2 max-pool (stride 2, floor mode) of an NCHW tensor for training.

    Torch's own kernels, with the forward on a channels-last copy.

    Why: torch's NCHW ``max_pool2d_with_indices`` forward is not vectorised across the
    window pairs, so on one thread it is a large share of a training step of Cached-DFL's
    CNN; the channels-last kernel plus the copy cost a fraction of it
    (docs/performance/measurements.md). Both kernels scan a
    window in row-major order and keep the first maximum, so values and indices (plane
    offsets ``h * W + w``, layout-independent) are identical, ties included; the backward is
    torch's NCHW ``max_pool2d_with_indices_backward`` with those indices, so the gradient is
    bit-identical to ``F.max_pool2d``'s (tests/model/learning/test_eval_plan.py).
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, h: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out, idx = torch.ops.aten.max_pool2d_with_indices(
            h.contiguous(memory_format=torch.channels_last), [2, 2], [2, 2]
        )
        idx = idx.contiguous()
        ctx.save_for_backward(h, idx)
        return out.contiguous()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        h, idx = ctx.saved_tensors  # type: ignore[attr-defined]
        return torch.ops.aten.max_pool2d_with_indices_backward(
            g.contiguous(), h, [2, 2], [2, 2], [0, 0], [1, 1], False, idx
        )


def max_pool2_nchw(h: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(h, 2)`` of a 4-d NCHW tensor, faster on the CPU (:class:`_MaxPool2`).

    Same values and gradients; other inputs go to ``F.max_pool2d``.
    """
    if h.dim() != 4 or h.device.type != "cpu":
        return F.max_pool2d(h, 2)
    return _MaxPool2.apply(h)


def max_pool2_nchw_to_nhwc(h: torch.Tensor) -> torch.Tensor:
    """``F.max_pool2d(h, 2)`` of an NCHW ``h``, returned NHWC-contiguous.

    The max over row pairs on contiguous rows, the transpose on that half-size tensor, then the max
    over column pairs in NHWC. Same values (a max is exact); the transpose runs on half the values
    that transpose-then-pool would move. Used where oneDNN returns NCHW (a conv of a 1-channel
    input, Cached-DFL's first layer).
    """
    b, c, hh, ww = h.shape
    v = h[:, :, : hh // 2 * 2, : ww // 2 * 2].unflatten(2, (hh // 2, 2))
    rows = torch.maximum(v[:, :, :, 0], v[:, :, :, 1])  # [B, C, H/2, W']
    t = rows.permute(0, 2, 3, 1).contiguous().unflatten(2, (ww // 2, 2))  # [B, H/2, W/2, 2, C]
    return torch.maximum(t[:, :, :, 0], t[:, :, :, 1])


class _FastWgradConv(torch.autograd.Function):
    """A stride-1 convolution of an input that needs no gradient (a net's first layer).

    The forward is oneDNN's, and the weight gradient is one convolution over the batch.

    Why: ``dW[o, c, i, j] = sum_{b, h, w} g[b, o, h, w] x_pad[b, c, h + i, w + j]`` is itself
    a convolution, with the batch as its channels: input ``x_pad`` seen as ``[C, B, H', W']``,
    kernel ``g`` seen as ``[O, B, H, W]``, output ``[C, O, kh, kw]``. oneDNN's backward-weights
    kernel for a 1-channel input (Cached-DFL's and LeNet-5's first layer) runs at about a
    tenth of the matmul peak on a CPU; as a forward convolution with B input channels it runs
    several times faster (``benchmarks/conv_kernels.py``). Same maths, another summation
    order: the gradient agrees with torch's to ~1e-6 relative, not bit for bit
    (``tests/model/learning/test_fast_wgrad.py``).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, w: torch.Tensor,
        b: torch.Tensor | None, padding: tuple[int, int],
    ) -> torch.Tensor:  # fmt: skip
        ctx.save_for_backward(x)
        ctx.padding = padding  # type: ignore[attr-defined]
        ctx.has_bias = b is not None  # type: ignore[attr-defined]
        return F.conv2d(x, w, b, 1, padding)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, g: torch.Tensor
    ) -> tuple[None, torch.Tensor, torch.Tensor | None, None]:
        (x,) = ctx.saved_tensors  # type: ignore[attr-defined]
        ph, pw = ctx.padding  # type: ignore[attr-defined]
        xp = F.pad(x, (pw, pw, ph, ph))
        b, c, hp, wp = xp.shape  # as [C, B, H', W'], with plain strides (what oneDNN expects)
        xp = xp.view(1, b, hp, wp) if c == 1 else xp.transpose(0, 1).contiguous()
        gt = g.transpose(0, 1).contiguous()  # [O, B, H, W]
        dw = F.conv2d(xp, gt).transpose(0, 1)  # [O, C, kh, kw]
        db = gt.sum((1, 2, 3)) if ctx.has_bias else None  # type: ignore[attr-defined]
        return None, dw.contiguous(), db, None


def conv2d_fast_wgrad(
    h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, m: nn.Conv2d
) -> torch.Tensor | None:
    """``m``'s convolution of ``h`` through :class:`_FastWgradConv`, or None where not applicable.

    It does not apply to an input that needs a gradient, a stride, dilation or groups other than 1,
    or a padding that is not a pair of integers.
    """
    pad = m.padding
    if (h.requires_grad or h.device.type != "cpu" or m.groups != 1 or isinstance(pad, str)
            or tuple(m.stride) != (1, 1) or tuple(m.dilation) != (1, 1)):  # fmt: skip
        return None
    return _FastWgradConv.apply(h, w, b, (int(pad[0]), int(pad[1])))


def nchw_forward(
    plan: list[PlanStep], ps: Sequence[torch.Tensor], x: torch.Tensor, *, fast_wgrad: bool = False
) -> torch.Tensor:
    """Run ``plan`` in torch's default layout (training, under autograd).

    The template's ops with "ReLU, max-pool" as "max-pool, ReLU". Same values and the same
    gradients: where a window's max is > 0 both route it to the same (first) maximal element, else
    both give 0. The 2x2 max-pools run as :func:`max_pool2_nchw` (same values, indices and
    gradients, faster forward; ``benchmarks/peer_profile.py`` prints where a step's time goes).
    ``fast_wgrad`` (``precision = "fp32_fast"``): the first convolution's weight gradient by
    :func:`conv2d_fast_wgrad` (same forward values, another summation order).
    """
    h = x
    for kind, ids, m in plan:
        if kind == "conv":
            assert isinstance(m, nn.Conv2d)
            bias = ps[ids[1]] if len(ids) > 1 else None
            out = conv2d_fast_wgrad(h, ps[ids[0]], bias, m) if fast_wgrad else None
            h = out if out is not None else F.conv2d(
                h, ps[ids[0]], bias, m.stride, m.padding, m.dilation)  # fmt: skip
        elif kind == "pool_relu":
            h = F.relu(max_pool2_nchw(h))
        elif kind == "relu":
            h = F.relu(h)
        elif kind == "maxpool":
            h = max_pool2_nchw(h)
        elif kind == "avgpool":
            assert isinstance(m, nn.AvgPool2d)
            h = m(h)
        elif kind == "flatten":
            h = h.flatten(1)
        elif kind == "linear":
            h = F.linear(h, ps[ids[0]], ps[ids[1]] if len(ids) > 1 else None)
    return h


def is_dense_plan(plan: list[PlanStep] | None) -> bool:
    """True for a plan of flatten, Linear-with-bias and ReLU steps only (the MLPs)."""
    return bool(plan) and all(
        kind in ("flatten", "relu") or (kind == "linear" and len(ids) == 2)
        for kind, ids, _ in plan
    )


def dense_step(
    plan: list[PlanStep], ps: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """Mean cross-entropy and its gradient for a dense plan (:func:`is_dense_plan`), by hand.

    The chain rule written out: the kernels autograd runs for ``F.linear`` / ``F.relu`` /
    ``F.cross_entropy`` (``addmm``; ``log_softmax`` and ``nll_loss``; weight gradients as
    ``mm(grad.T, input)``, bias gradients as column sums, ``threshold_backward``), in the same
    order, so the results are bit-identical (``tests/model/learning/test_dense_step.py``), without
    recording and walking a graph, which dominates a small MLP's step on a CPU
    (``benchmarks/dense_step.py``).
    """
    with torch.no_grad():
        h = x
        saved: list[tuple[str, tuple[int, ...], torch.Tensor]] = []
        for kind, ids, _ in plan:
            if kind == "flatten":
                h = h.flatten(1)
            elif kind == "linear":
                saved.append((kind, ids, h))
                h = torch.addmm(ps[ids[1]], h, ps[ids[0]].t())
            else:  # relu: its backward reads the output
                h = torch.relu(h)
                saved.append((kind, ids, h))
        logp = torch.log_softmax(h, 1)
        loss = F.nll_loss(logp, y)
        g = torch.zeros_like(logp)
        g.scatter_(1, y[:, None], -1.0 / y.shape[0])
        g = torch._log_softmax_backward_data(g, logp, 1, logp.dtype)
        grads: list[torch.Tensor | None] = [None] * len(ps)
        for i in range(len(saved) - 1, -1, -1):
            kind, ids, t = saved[i]
            if kind == "relu":
                g = torch.ops.aten.threshold_backward(g, t, 0)
                continue
            grads[ids[0]] = torch.mm(g.t(), t)
            grads[ids[1]] = g.sum(0)
            if i > 0:  # the first layer's input needs no gradient
                g = torch.mm(g, ps[ids[0]])
    return tuple(grads), loss  # type: ignore[return-value]


def nhwc_forward(plan: list[PlanStep], ps: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Run ``plan`` (see :func:`nhwc_plan`) on ``x`` ``[B, C, H, W]``.

    Activations stay NHWC-contiguous, convs get channels-last views (oneDNN's fast layout).
    """
    h = x.permute(0, 2, 3, 1).contiguous()
    skip = False
    for k, (kind, ids, m) in enumerate(plan):
        if skip:  # a pool already taken with the conv before it
            skip = False
            continue
        if kind == "conv":
            assert isinstance(m, nn.Conv2d)
            bias = ps[ids[1]] if len(ids) > 1 else None
            out = F.conv2d(h.permute(0, 3, 1, 2), ps[ids[0]], bias, m.stride, m.padding,
                           m.dilation)  # fmt: skip
            nxt = plan[k + 1][0] if k + 1 < len(plan) else ""
            if nxt in ("pool_relu", "maxpool") and not out.is_contiguous(
                memory_format=torch.channels_last
            ):  # oneDNN chose NCHW (1-channel input): pool half of it before the transpose
                h = max_pool2_nchw_to_nhwc(out)
                h = h.relu_() if nxt == "pool_relu" else h
                skip = True
            else:
                h = out.permute(0, 2, 3, 1).contiguous()  # a no-op unless oneDNN chose NCHW
        # The NCHW branches above, channels-last: one loop per layout keeps each fast path flat.
        elif kind == "pool_relu":
            h = max_pool2_nhwc(h).relu_()
        elif kind == "relu":
            h = F.relu(h)
        elif kind == "maxpool":
            h = max_pool2_nhwc(h)
        elif kind == "avgpool":
            assert isinstance(m, nn.AvgPool2d)
            h = m(h.permute(0, 3, 1, 2)).permute(0, 2, 3, 1).contiguous()
        elif kind == "flatten":
            h = h.permute(0, 3, 1, 2).flatten(1)  # NCHW order, as the Linear expects
        elif kind == "linear":
            h = F.linear(h, ps[ids[0]], ps[ids[1]] if len(ids) > 1 else None)
    return h


def train_loop_agents(
    fn: Functional,
    params: list[torch.Tensor],
    bufs: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    agents: np.ndarray,
    batches: np.ndarray,
    hp: Hyper,
    steps_done: np.ndarray | None = None,
) -> np.ndarray:
    """Train ``agents`` one after the other on ``batches[a, k]``.

    ``batches`` holds global sample indices, padded with -1 where an agent's batch is smaller than
    the widest one.

    Writes into the (possibly shared-memory) stacks through views; returns mean CE per agent.
    ``steps_done``: optimiser steps each agent took before (Adam's bias correction).
    """
    losses = np.empty(len(agents), dtype=np.float64)
    idx_all = torch.from_numpy(batches).to(x.device)
    widths = (batches[:, 0, :] >= 0).sum(axis=1)
    for a, i in enumerate(agents):
        # Leaf views of the stacks: autograd differentiates them, updates land in the stacks.
        # (Training stays NCHW: channels-last gave no clear gain for batches of 64.)
        ps = [p[i].detach().requires_grad_() for p in params]
        bs = [b[i] for b in bufs]
        anchor = [p.detach().clone() for p in ps] if hp.prox_rho else None
        total = 0.0
        t0 = 0 if steps_done is None else int(steps_done[a])
        for k in range(batches.shape[1]):
            idx = idx_all[a, k, : int(widths[a])]
            g, loss = fn.autograd_step(ps, x.index_select(0, idx), y.index_select(0, idx))
            with torch.no_grad():
                sgd_update(ps, g, bs, anchor, hp, t=float(t0 + k + 1))
            total += float(loss)
        losses[a] = total / batches.shape[1]
    return losses


def evaluate_agents(
    fn: Functional,
    params: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    agents: np.ndarray,
    chunk: int,
) -> np.ndarray:
    """``[2, A]``: accuracy and mean CE of each agent's model on (x, y), ``chunk`` at a time.

    Per agent and chunk: one forward, one CE sum, one argmax count; nothing per sample. The
    chunk sums of :func:`evaluate_chunk_sums`, added in order by :func:`sum_chunks`.
    """
    n = int(y.shape[0])
    return sum_chunks(evaluate_chunk_sums(fn, params, x, y, agents, chunk, range(0, n, chunk)), n)


def evaluate_chunk_sums(
    fn: Functional,
    params: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    agents: np.ndarray,
    chunk: int,
    starts: Sequence[int],
) -> np.ndarray:
    """``[2, A, len(starts)]``.

    Correct count and CE sum of each agent on each test chunk ``[s, s + chunk)``: the terms
    :func:`evaluate_agents` adds up, so a worker can take a share of the test set and
    :func:`sum_chunks` adds the shares in the same order (bit-identical to one process).
    """
    out = np.empty((2, len(agents), len(starts)), dtype=np.float64)
    x = fn.prep(x)  # a no-op when the engine stored x channels-last already
    with torch.inference_mode():
        for a, i in enumerate(agents):
            ps = [fn.layout(p[int(i)]) for p in params]
            for k, s in enumerate(starts):
                logits = fn.eval_logits(ps, x[s : s + chunk])
                out[1, a, k] = float(F.cross_entropy(logits, y[s : s + chunk], reduction="sum"))
                out[0, a, k] = int((logits.argmax(1) == y[s : s + chunk]).sum())
    return out


def sum_chunks(sums: np.ndarray, n: int) -> np.ndarray:
    """``[2, A]`` accuracy and mean CE from :func:`evaluate_chunk_sums`' ``[2, A, chunks]``.

    Added chunk after chunk, in the order of the test set.
    """
    out = np.empty(sums.shape[:2], dtype=np.float64)
    for a in range(sums.shape[1]):
        correct, total = 0, 0.0
        for k in range(sums.shape[2]):
            total += float(sums[1, a, k])
            correct += int(sums[0, a, k])
        out[0, a], out[1, a] = correct / n, total / n
    return out


def train_batched_agents(
    vgrad: Callable[..., tuple[tuple[torch.Tensor, ...], torch.Tensor]],
    vgrad_masked: Callable[..., tuple[tuple[torch.Tensor, ...], torch.Tensor]],
    params: list[torch.Tensor],
    bufs: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    agents: np.ndarray,
    batches: np.ndarray,
    hp: Hyper | Sequence[Hyper],
    steps_done: np.ndarray,
    *,
    chunk: int,
) -> np.ndarray:
    """Train ``agents`` ``chunk`` at a time with ``vgrad = vmap(grad_and_value(CE))``.

    ``batches[a, k]`` as in :func:`train_loop_agents`; unequal batches are padded and the
    padded samples masked out of the mean CE (``vgrad_masked``, same gradient). A chunk of all
    agents updates the stacks directly, a smaller one works on copies and writes them back.
    ``hp``: one :class:`Hyper` for all, or one per entry of ``agents`` (runs batched together,
    :mod:`mobidfl.model.learning.multirun`: each run keeps its own learning rate); the gradient is
    still one call per chunk, the update one per stretch of equal settings.
    Returns mean CE per agent.
    """
    n_agents = int(params[0].shape[0])
    device = x.device
    local_steps = int(batches.shape[1])
    losses = np.empty(len(agents), dtype=np.float64)
    idx_all = torch.from_numpy(batches).to(device)
    for start in range(0, len(agents), chunk):
        rows = slice(start, start + chunk)
        part = agents[rows]
        whole = part.size == n_agents
        sel = torch.from_numpy(part).to(device)
        ps = params if whole else [p.index_select(0, sel) for p in params]
        bs = bufs if whole else [b.index_select(0, sel) for b in bufs]
        stretches = hyper_stretches(hp, start, part.size)
        anchor = [p.clone() for p in ps] if any(h.prox_rho for _, h in stretches) else None
        total = torch.zeros(part.size, dtype=torch.float64, device=device)
        t0 = torch.from_numpy(steps_done[part]).to(device)
        valid = idx_all[rows, 0] >= 0  # [A, B_max]; padding only for unequal batches
        padded = not bool(valid.all())
        w = valid.to(x.dtype)
        for k in range(local_steps):
            idx = idx_all[rows, k].clamp(min=0)  # [A, B_max]
            if padded:
                g, loss = vgrad_masked(ps, x[idx], y[idx], w)
            else:
                g, loss = vgrad(ps, x[idx], y[idx])
            with torch.no_grad():
                t = t0 + (k + 1)
                if len(stretches) == 1:  # one run, or runs with equal settings
                    sgd_update(ps, g, bs, anchor, stretches[0][1], t=t)
                else:
                    for cut, h in stretches:  # views: the updates land in ps
                        sgd_update([p[cut] for p in ps], [d[cut] for d in g],
                                   [b[cut] for b in bs],
                                   None if anchor is None else [a[cut] for a in anchor], h,
                                   t=t[cut])  # fmt: skip
            total += loss.double()
        if not whole:
            with torch.no_grad():
                for dst, src in zip(params, ps, strict=True):
                    dst.index_copy_(0, sel, src)
                for dst, src in zip(bufs, bs, strict=True):
                    dst.index_copy_(0, sel, src)
        losses[rows] = (total / local_steps).cpu().numpy()
    return losses


def hyper_stretches(
    hp: Hyper | Sequence[Hyper], start: int, count: int
) -> list[tuple[slice, Hyper]]:
    """Rows ``[start, start + count)`` of a chunk as stretches of equal :class:`Hyper`.

    The stretches are row slices relative to the chunk; one stretch when ``hp`` is a single Hyper.
    """
    if isinstance(hp, Hyper):
        return [(slice(0, count), hp)]
    rows = list(hp[start : start + count])
    out: list[tuple[slice, Hyper]] = []
    first = 0
    for r in range(1, count + 1):
        if r == count or rows[r] != rows[first]:
            out.append((slice(first, r), rows[first]))
            first = r
    return out
