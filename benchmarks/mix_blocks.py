"""D-PSGD's block-wise sparse mixing: a fresh block per step against two buffers reused.

:func:`mobidfl.model.learning.params.mix_stacks` mixes the MLP's parameter stacks ``[N, P]`` with a
sparse row-stochastic W column block by column block (about 2 MB a block). Two ways of
moving a block through the CSR kernel, side by side in one process, alternating (A B A B)
so that a change of load hits both, on 1 thread:

* **fresh**: ``block.copy_(W @ block.contiguous())``: two new ``N x b`` tensors per block
  (the copy in and the product), each a fresh allocation whose pages fault on first touch;
* **buffers** (``mix_stacks``): the block is copied into a buffer allocated once per call
  and the product written into a second one (``torch.mm(W, src, out=dst)``), then copied
  back.

Both run the same kernel on the same values, so the results are compared bit for bit. W is
a random symmetric contact graph with ``--degree`` neighbours per car (the city benchmark
has 5.6 at N = 1,000 and 53 at N = 10,000) plus self-loops, rows normalised. Prints the CPU
model, the load average, the 1-thread fp32 matmul peak at the start and the end, CPU
seconds of one mix of the whole MLP stack per variant (best of ``--repeats``), and the
ratio.

Run: ``python benchmarks/mix_blocks.py [--sizes 1000,3000] [--degrees 5.6,53] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp
import torch
from machine import matmul_peak

from mobidfl.cores import cpu_model
from mobidfl.model.learning.params import mix_columns, mix_stacks, mixing_operator

MLP_SHAPES = ((128, 784), (128,), (10, 128), (10,))
"""The MLP's layers (101,770 parameters)."""


def contact_mixing(n: int, degree: float, seed: int = 1) -> sp.csr_matrix:
    """Row-normalised symmetric random contacts with about ``degree`` neighbours, self-loops."""
    adj = sp.random(n, n, density=degree / n / 2, random_state=seed, format="csr")
    adj = ((adj + adj.T) > 0).astype(np.float32) + sp.eye(n, dtype=np.float32)
    return sp.csr_matrix(sp.diags(1 / np.asarray(adj.sum(1)).ravel()) @ adj, dtype=np.float32)


def mix_fresh(stacks: list[torch.Tensor], w: sp.csr_matrix) -> None:
    """The block loop with a fresh copy-in and product per block (the earlier code)."""
    n = int(w.shape[0])
    wt = mixing_operator(w)
    width = mix_columns(n)
    with torch.no_grad():
        for p in stacks:
            flat = p.reshape(n, -1)
            if flat.shape[1] <= width:
                p.copy_((wt @ flat).reshape(p.shape))
                continue
            for s in range(0, flat.shape[1], width):
                block = flat[:, s : s + width]
                block.copy_(wt @ block.contiguous())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,3000")
    parser.add_argument("--degrees", default="5.6,53")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpu = cpu_model()
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{cpu}; load {load}; {time.strftime('%Y-%m-%d %H:%M')} UTC; 1 thread; "
          f"matmul peak {matmul_peak().wall:.1f} GFLOP/s", flush=True)  # fmt: skip
    print(f"{'N':>6} {'degree':>7} {'width':>6} {'fresh CPU s':>12} {'buffers CPU s':>14} "
          f"{'ratio':>6} {'identical':>9} {'load':>5}")  # fmt: skip
    for n in (int(v) for v in args.sizes.split(",")):
        g = torch.Generator().manual_seed(0)
        base = [torch.randn(n, *shape, generator=g) for shape in MLP_SHAPES]
        for degree in (float(v) for v in args.degrees.split(",")):
            w = contact_mixing(n, degree)
            best = {"fresh": float("inf"), "buffers": float("inf")}
            out: dict[str, list[torch.Tensor]] = {}
            for _ in range(args.repeats):
                for name, fastest in best.items():
                    stacks = [b.clone() for b in base]
                    c = time.process_time()
                    if name == "fresh":
                        mix_fresh(stacks, w)
                    else:
                        mix_stacks(stacks, w, device=torch.device("cpu"))
                    best[name] = min(fastest, time.process_time() - c)
                    out[name] = stacks
            same = all(torch.equal(a, b) for a, b in zip(out["fresh"], out["buffers"],
                                                         strict=True))  # fmt: skip
            print(f"{n:6d} {w.nnz / n:7.1f} {mix_columns(n):6d} {best['fresh']:12.3f} "
                  f"{best['buffers']:14.3f} {best['fresh'] / best['buffers']:6.2f} "
                  f"{str(same):>9} {os.getloadavg()[0]:5.2f}", flush=True)  # fmt: skip
    print(
        f"matmul peak at the end {matmul_peak().wall:.1f} GFLOP/s; load "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
