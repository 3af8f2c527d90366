"""Parameter stacks of all agents, and the pure functions that mix and combine them.

The parameters of all N agents live in per-layer stacks ``[N, *shape_l]`` (see
:mod:`mobidfl.model.learning.engine`). The functions here read stacks and return new tensors or
write into stacks in place (never rebinding them, because worker processes hold shared-memory
views); they know nothing of training, so mixing rules can be read and tested on their own.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

__all__ = [
    "DENSE_MIX_DENSITY",
    "PERTURBATIONS",
    "Params",
    "average_stacks",
    "combine_snapshots",
    "consensus_distance",
    "init_stacks",
    "mix_columns",
    "mix_stacks",
    "mix_stacks_fp64",
    "nudge_last_bit",
    "splits_mixing",
    "mixing_operator",
    "rng_restore",
    "rng_state",
    "shared_zeros",
]

Params = tuple[torch.Tensor, ...]
"""One model's parameters, one tensor per layer (an agent's snapshot, an average)."""

DENSE_MIX_DENSITY = 0.05
"""Above this fraction of non-zeros a dense W matmul beats torch's CSR kernel (break-even
measured with benchmarks/aggregation.py: docs/performance/measurements.md)."""

PERTURBATIONS = ("none", "init_last_bit", "fp64_aggregate")
"""Controlled floating-point perturbations of a run (setting ``perturb``): none; every
initial parameter one unit in the last place up (:func:`nudge_last_bit`); every aggregation
of models (mixing, averaging, combining cached snapshots) summed in float64
(:func:`mix_stacks_fp64`, ``fp64`` of :func:`average_stacks` and :func:`combine_snapshots`).
Each changes the rounding only, so a result that moves under one depends on rounding, not
on the model."""


def nudge_last_bit(stacks: Sequence[torch.Tensor]) -> None:
    """Move every value one unit in the last place toward +inf, in place.

    WHY: the smallest deterministic change of a run's start (``numpy.nextafter(x, inf)``
    elementwise); a verdict that flips under it is decided by rounding. Every value, not one:
    no choice of which weight, and the change reaches every agent and layer.
    """
    with torch.no_grad():
        for s in stacks:
            s.copy_(torch.nextafter(s, torch.full_like(s, float("inf"))))


def mix_stacks_fp64(
    stacks: Sequence[torch.Tensor], w: sp.csr_matrix, *, device: torch.device
) -> None:
    """``x_i <- sum_j W_ij x_j`` in place, summed in float64 and rounded once to the stacks' dtype.

    The same mix as :func:`mix_stacks` with another rounding (setting ``perturb = fp64_aggregate``);
    dense, one layer at a time, so meant for the small fleets whose verdicts it checks.
    """
    n = int(w.shape[0])
    wt = torch.from_numpy(np.asarray(w.toarray(), dtype=np.float64)).to(device)
    with torch.no_grad():
        for p in stacks:
            flat = p.reshape(n, -1).to(torch.float64)
            p.copy_((wt @ flat).reshape(p.shape).to(p.dtype))


def shared_zeros(like: torch.Tensor) -> torch.Tensor:
    """Zeros shaped like ``like`` in shared memory, allocated there directly.

    Never a second private copy: ``share_memory_()`` of an untouched buffer reads no page.
    """
    return torch.empty(like.shape, dtype=like.dtype).share_memory_().zero_()


def init_stacks(
    template: nn.Module, n: int, same_init: bool, *, shared: bool = False
) -> list[torch.Tensor]:
    """Per-layer stacks: N copies of one init, or N successive inits from the seeded RNG.

    ``shared``: in shared memory from the start (worker processes map them), so a big fleet's
    stacks are never held twice.
    """
    empty = (
        (lambda *shape: torch.empty(*shape).share_memory_()) if shared else torch.empty
    )  # fmt: skip
    if same_init:
        stacks = [empty(n, *p.shape) for p in template.parameters()]
        for s, p in zip(stacks, template.parameters(), strict=True):
            s.copy_(p.detach().unsqueeze(0).expand_as(s))
        return stacks
    stacks = [empty(n, *p.shape) for p in template.parameters()]
    for i in range(n):
        for m in template.modules():
            if hasattr(m, "reset_parameters") and m is not template:
                m.reset_parameters()
        for s, p in zip(stacks, template.parameters(), strict=True):
            s[i] = p.detach()
    return stacks


def mixing_operator(w: sp.csr_matrix, *, device: torch.device | str = "cpu") -> torch.Tensor:
    """W as the torch operator that multiplies fastest: dense if dense enough, else CSR."""
    n_rows, n_cols = w.shape
    if w.nnz > DENSE_MIX_DENSITY * n_rows * n_cols:
        return torch.from_numpy(w.toarray().astype(np.float32)).to(device)
    w = w.copy()
    w.sort_indices()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(
            torch.from_numpy(w.indptr.astype(np.int64)),
            torch.from_numpy(w.indices.astype(np.int64)),
            torch.from_numpy(w.data.astype(np.float32)),
            size=w.shape,
            device=device,
            check_invariants=False,
        )


MIX_BLOCK_BYTES = 2 << 20
"""Sparse mixing works on column blocks of about this many bytes (``N x b`` floats, at
least :data:`MIX_MIN_COLUMNS` wide): the block stays in cache while every row gathers its
neighbours from it, and the extra memory is one block, not a second copy of the stacks.
Bit-identical to one matmul over all columns (same kernel, same per-row order), and
faster on large stacks (docs/performance/measurements.md)."""
MIX_MIN_COLUMNS = 16


def mix_columns(n: int) -> int:
    """Columns per block of sparse mixing for ``n`` agents (:data:`MIX_BLOCK_BYTES`)."""
    return max(MIX_MIN_COLUMNS, MIX_BLOCK_BYTES // (4 * max(1, n)))


def mix_stacks(
    stacks: Sequence[torch.Tensor],
    w: sp.csr_matrix,
    *,
    device: torch.device,
    part: int = 0,
    parts: int = 1,
) -> None:
    """``x_i <- sum_j W_ij x_j`` in place, one matmul per layer (W is N x N, checked by the caller).

    In place because workers share the stacks' memory. A sparse W goes column block by column block
    (:data:`MIX_BLOCK_BYTES`): a block's result depends only on that block, so it is written back at
    once and the memory needed beyond the stacks is one block, whatever N (a dense W, small fleets
    only, is one matmul per layer). The block goes through two buffers allocated once (a fresh 2 MB
    tensor per block costs page faults as large as the copy): the same kernel on the same values, so
    bit-identical.

    ``part`` of ``parts``: only every ``parts``-th block from ``part`` (worker processes
    share the blocks of a sparse W; the blocks and their arithmetic are the same whatever
    ``parts``, so the result is bit-identical).
    """
    n = int(w.shape[0])
    wt = mixing_operator(w, device=device)
    width = mix_columns(n)
    buffers: list[torch.Tensor] = []  # one block in, one out, allocated once per call
    with torch.no_grad():
        for p in stacks:
            flat = p.reshape(n, -1)
            if wt.layout == torch.strided or flat.shape[1] <= width:
                if part == 0:
                    p.copy_((wt @ flat).reshape(p.shape))
                continue
            if not buffers:
                buffers = [torch.empty(n, width, dtype=p.dtype, device=p.device) for _ in "io"]
            for s in range(part * width, flat.shape[1], parts * width):
                block = flat[:, s : s + width]
                k = block.shape[1]
                src, dst = (b.view(-1)[: n * k].view(n, k) for b in buffers)  # contiguous
                src.copy_(block)  # contiguous rows: the gathers below stay in cache and TLB
                torch.mm(wt, src, out=dst)
                block.copy_(dst)


def splits_mixing(w: sp.csr_matrix, stacks: Sequence[torch.Tensor]) -> bool:
    """Whether :func:`mix_stacks` would go block by block (sparse W, wide layers).

    Only then is sharing it between worker processes worth the shipping of W.
    """
    n = int(w.shape[0])
    if w.nnz > DENSE_MIX_DENSITY * n * n:
        return False
    return any(p[0].numel() > mix_columns(n) for p in stacks)


def average_stacks(
    stacks: Sequence[torch.Tensor],
    agents: np.ndarray,
    weights: np.ndarray,
    *,
    device: torch.device,
    fp64: bool = False,
) -> Params:
    """``sum_k weights[k] x_{agents[k]}`` per layer, weights normalised to sum 1.

    The caller checks the weights; FedAvg with weights = sample counts. ``fp64``: summed in
    float64, rounded once to the stacks' dtype (setting ``perturb = fp64_aggregate``).
    """
    idx = np.asarray(agents, dtype=np.int64).reshape(-1)
    w = np.asarray(weights, dtype=np.float64)
    sums = torch.float64 if fp64 else torch.float32
    wt = torch.as_tensor(w / w.sum(), dtype=sums, device=device)
    sel = torch.as_tensor(idx, device=device)
    with torch.no_grad():
        return tuple(
            (wt @ p.index_select(0, sel).reshape(idx.size, -1).to(sums))
            .reshape(p.shape[1:])
            .to(p.dtype)
            for p in stacks
        )


def combine_snapshots(
    snapshots: Sequence[Params],
    weights: Sequence[float],
    *,
    n_layers: int,
    device: torch.device,
    fp64: bool = False,
) -> Params:
    """``sum_k weights[k] * snapshots[k]`` per layer, weights used as given.

    Caches mix stored snapshots that are no longer any agent's current model. ``fp64``:
    summed in float64, rounded once to float32 (setting ``perturb = fp64_aggregate``).
    """
    sums = torch.float64 if fp64 else torch.float32
    w = torch.as_tensor(np.asarray(weights, dtype=np.float64), dtype=sums)
    out = []
    with torch.no_grad():
        for layer in range(n_layers):
            stack = torch.stack([s[layer].to(device) for s in snapshots])
            kept = stack.dtype
            out.append(torch.tensordot(w.to(device), stack.to(sums), dims=1).to(kept))
    return tuple(out)


def consensus_distance(stacks: Sequence[torch.Tensor], *, device: torch.device) -> float:
    """Mean distance of the agents' models to their average: mean_i ||x_i - x_bar||."""
    n = int(stacks[0].shape[0])
    with torch.no_grad():
        sq = torch.zeros(n, dtype=torch.float64, device=device)
        for p in stacks:
            flat = p.reshape(n, -1)
            mean = flat.mean(0, keepdim=True)
            for s in range(0, n, 256):  # bounded temporaries at large N
                diff = flat[s : s + 256] - mean
                sq[s : s + 256] += diff.mul_(diff).sum(1).double()  # squared in place
        return float(sq.sqrt().mean())


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """A PCG64 Generator's state as plain Python values (``torch.load(weights_only=True)``)."""
    st = rng.bit_generator.state
    return {
        "bit_generator": str(st["bit_generator"]),
        "state": int(st["state"]["state"]),
        "inc": int(st["state"]["inc"]),
        "has_uint32": int(st["has_uint32"]),
        "uinteger": int(st["uinteger"]),
    }


def rng_restore(s: dict[str, Any]) -> dict[str, Any]:
    """The ``bit_generator.state`` dict that :func:`rng_state` saved."""
    return {
        "bit_generator": s["bit_generator"],
        "state": {"state": int(s["state"]), "inc": int(s["inc"])},
        "has_uint32": int(s["has_uint32"]),
        "uinteger": int(s["uinteger"]),
    }
