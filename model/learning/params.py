"""Parameter stacks of all agents, and the pure functions that mix and combine them.

The parameters of all N agents live in per-layer stacks ``[N, *shape_l]`` (see
:mod:`model.learning.engine`). The functions here read stacks and return new tensors or write
into stacks in place (never rebinding them, because worker processes hold shared-memory
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
    "Params",
    "average_stacks",
    "combine_snapshots",
    "consensus_distance",
    "init_stacks",
    "mix_stacks",
    "mixing_operator",
    "rng_restore",
    "rng_state",
]

Params = tuple[torch.Tensor, ...]
"""One model's parameters, one tensor per layer (an agent's snapshot, an average)."""

DENSE_MIX_DENSITY = 0.05
"""Above this fraction of non-zeros a dense W matmul beats torch's CSR kernel (break-even
measured with benchmarks/aggregation.py: docs/performance/measurements.md)."""


def init_stacks(template: nn.Module, n: int, same_init: bool) -> list[torch.Tensor]:
    """Per-layer stacks: N copies of one init, or N successive inits from the seeded RNG."""
    if same_init:
        return [p.detach().unsqueeze(0).repeat(n, *([1] * p.dim())) for p in template.parameters()]
    stacks = [torch.empty(n, *p.shape) for p in template.parameters()]
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


def mix_stacks(stacks: Sequence[torch.Tensor], w: sp.csr_matrix, *, device: torch.device) -> None:
    """``x_i <- sum_j W_ij x_j`` in place, one matmul per layer (W is N x N, checked by the
    caller); in place because workers share the stacks' memory."""
    n = int(w.shape[0])
    wt = mixing_operator(w, device=device)
    with torch.no_grad():
        for p in stacks:
            p.copy_((wt @ p.reshape(n, -1)).reshape(p.shape))


def average_stacks(
    stacks: Sequence[torch.Tensor], agents: np.ndarray, weights: np.ndarray, *, device: torch.device
) -> Params:
    """``sum_k weights[k] x_{agents[k]}`` per layer, weights normalised to sum 1 (checked by
    the caller): FedAvg with weights = sample counts."""
    idx = np.asarray(agents, dtype=np.int64).reshape(-1)
    w = np.asarray(weights, dtype=np.float64)
    wt = torch.as_tensor(w / w.sum(), dtype=torch.float32, device=device)
    sel = torch.as_tensor(idx, device=device)
    with torch.no_grad():
        return tuple(
            (wt @ p.index_select(0, sel).reshape(idx.size, -1)).reshape(p.shape[1:]) for p in stacks
        )


def combine_snapshots(
    snapshots: Sequence[Params], weights: Sequence[float], *, n_layers: int, device: torch.device
) -> Params:
    """``sum_k weights[k] * snapshots[k]`` per layer, weights used as given (caches mix
    stored snapshots that are no longer any agent's current model)."""
    w = torch.as_tensor(np.asarray(weights, dtype=np.float64), dtype=torch.float32)
    out = []
    with torch.no_grad():
        for layer in range(n_layers):
            stack = torch.stack([s[layer].to(device) for s in snapshots])
            out.append(torch.tensordot(w.to(device), stack, dims=1))
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
                sq[s : s + 256] += (flat[s : s + 256] - mean).pow(2).sum(1).double()
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
