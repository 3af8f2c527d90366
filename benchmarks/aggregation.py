"""Model averaging cost: one matmul per layer (Engine.mix) vs a per-agent state_dict loop.

The engine stores all agents' parameters as per-layer stacks, so a mixing step
``x_i <- sum_j W_ij x_j`` is ``W @ stack.reshape(N, -1)`` per layer (:meth:`Engine.mix`).
The usual alternative, one ``nn.Module`` per agent and a Python loop building each new
state_dict from the neighbours' state_dicts, is timed on the same W and parameters, and
checked to give the same result.

Run: ``python benchmarks/aggregation.py [--quick] [--sizes 100,1000] [--degree 10]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
import torch

from mobidfl.model.learning.data import load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.maths.mixing import dpsgd_weights


def contact_graph(n: int, degree: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < degree / max(n - 1, 1), k=1)
    return sp.csr_matrix(upper | upper.T)


def state_dict_loop(states: list[dict[str, torch.Tensor]], w: sp.csr_matrix) -> list[dict]:
    """The per-agent way: for each agent, weighted sum of its neighbours' state_dicts."""
    out = []
    for i in range(w.shape[0]):
        lo, hi = w.indptr[i], w.indptr[i + 1]
        new = {}
        for key in states[i]:
            acc = torch.zeros_like(states[i][key])
            for j, wij in zip(w.indices[lo:hi], w.data[lo:hi], strict=True):
                acc.add_(states[j][key], alpha=float(wij))
            new[key] = acc
        out.append(new)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--nets", default="mlp,cnn")
    parser.add_argument("--degree", type=float, default=10.0, help="mean neighbours per agent")
    args = parser.parse_args()
    sizes = [100] if args.quick else [int(s) for s in args.sizes.split(",")]
    torch.set_num_threads(1)
    ds = load_dataset("mnist5k", root=None, test_size=100, seed=0)
    print(
        f"{'net':5} {'N':>5} {'params/agent':>12} {'Engine.mix':>14} {'state_dict loop':>16}"
        f" {'ratio':>7}"
    )
    for net in args.nets.split(","):
        for n in sizes:
            rng = np.random.default_rng(0)
            parts = [rng.choice(ds.n_train, 16, replace=False) for _ in range(n)]
            eng = make_engine(
                "loop",
                TrainingSettings(
                    net=net, lr=0.01, batch_size=16, local_steps=1, seed=0, same_init=False
                ),
                dataset=ds,
                parts=parts,
            )
            names = eng.param_names
            states = [
                {k: p[i].clone() for k, p in zip(names, eng.params, strict=True)} for i in range(n)
            ]
            w = dpsgd_weights(contact_graph(n, args.degree, seed=n))
            eng.mix(w)  # warm-up
            for i in range(n):
                eng.set_agent(i, [states[i][k] for k in names])
            t = time.perf_counter()
            eng.mix(w)
            t_sparse = time.perf_counter() - t
            t = time.perf_counter()
            looped = state_dict_loop(states, w)
            t_loop = time.perf_counter() - t
            err = max(
                float((looped[i][k] - p[i]).abs().max())
                for i in range(0, n, max(1, n // 20))
                for k, p in zip(names, eng.params, strict=True)
            )
            assert err < 1e-4, err
            print(
                f"{net:5} {n:5d} {eng.num_params:12d} {t_sparse:12.3f} s {t_loop:14.3f} s "
                f"{t_loop / t_sparse:6.1f}x"
            )
            del eng, states, looped
    dense_vs_sparse(quick=args.quick)


def dense_vs_sparse(*, quick: bool) -> None:
    """Why ``Engine.mix`` uses a dense W above ``engine.DENSE_MIX_DENSITY`` non-zeros."""
    print(f"\n{'N':>5} {'neighbours':>10} {'density':>8} {'CSR':>9} {'dense':>9} {'CSR/dense':>9}")
    cases = [(100, 10), (200, 120)] if quick else [(200, 120), (1000, 10), (1000, 50)]
    width = 101_770  # one MLP agent (784-128-10)
    for n, degree in cases:
        w = dpsgd_weights(contact_graph(n, degree, seed=1))
        x = torch.randn(n, width)
        density = w.nnz / n**2
        dense = torch.from_numpy(w.toarray().astype(np.float32))
        sparse = _csr(w)
        t = time.perf_counter()
        y_sparse = sparse @ x
        t_sparse = time.perf_counter() - t
        t = time.perf_counter()
        y_dense = dense @ x
        t_dense = time.perf_counter() - t
        assert float((y_sparse - y_dense).abs().max()) < 1e-4
        print(
            f"{n:5d} {degree:10d} {density:8.3f} {t_sparse:7.3f} s {t_dense:7.3f} s "
            f"{t_sparse / t_dense:8.2f}x"
        )


def _csr(w: sp.csr_matrix) -> torch.Tensor:
    w = sp.csr_matrix(w)
    w.sort_indices()
    return torch.sparse_csr_tensor(  # the CSR operator Engine.mix uses below the threshold
        torch.from_numpy(w.indptr.astype(np.int64)),
        torch.from_numpy(w.indices.astype(np.int64)),
        torch.from_numpy(w.data.astype(np.float32)),
        size=w.shape,
    )


if __name__ == "__main__":
    main()
