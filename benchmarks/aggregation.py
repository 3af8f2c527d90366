"""Model averaging cost: one sparse matmul per layer vs a per-agent state_dict loop.

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

from model.learning.data import load_dataset
from model.learning.engine import make_engine
from model.maths.mixing import dpsgd_weights


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
        f"{'net':5} {'N':>5} {'params/agent':>12} {'sparse matmul':>14} {'state_dict loop':>16}"
        f" {'ratio':>7}"
    )
    for net in args.nets.split(","):
        for n in sizes:
            rng = np.random.default_rng(0)
            parts = [rng.choice(ds.n_train, 16, replace=False) for _ in range(n)]
            eng = make_engine(
                "loop",
                net=net,
                dataset=ds,
                parts=parts,
                lr=0.01,
                batch_size=16,
                local_steps=1,
                seed=0,
                same_init=False,
            )
            names = eng._fn.names
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


if __name__ == "__main__":
    main()
