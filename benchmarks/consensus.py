"""The consensus distance of an evaluation step, squared in place against the old way.

``mean_i ||x_i - x_bar||`` over every layer
(:func:`mobidfl.model.learning.params.consensus_distance`), side by side, alternating, on the same
stacks: the library's (one temporary per block of 256 agents, squared in place) against the
expression it replaced (``(x - x_bar).pow(2)``: a second temporary). Both must give the same float;
prints the CPU model, the load and the fp32 matmul peak of one thread at the start and the end.

Run: ``python benchmarks/consensus.py [--agents 100,600] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from machine import machine_line, matmul_peak

from mobidfl.model.learning.params import consensus_distance


def two_temporaries(stacks: list[torch.Tensor]) -> float:
    """The replaced expression, kept here as the yardstick."""
    n = int(stacks[0].shape[0])
    with torch.no_grad():
        sq = torch.zeros(n, dtype=torch.float64)
        for p in stacks:
            flat = p.reshape(n, -1)
            mean = flat.mean(0, keepdim=True)
            for s in range(0, n, 256):
                sq[s : s + 256] += (flat[s : s + 256] - mean).pow(2).sum(1).double()
        return float(sq.sqrt().mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="100,600")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(machine_line())
    print(f"fp32 matmul peak, one thread: {matmul_peak().wall:.1f} GFLOP/s (start)")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for n in (int(a) for a in args.agents.split(",")):
        # the mlp's layers (784-128-10), one row per agent
        stacks = [torch.randn(n, *shape, generator=gen)
                  for shape in ((128, 784), (128,), (10, 128), (10,))]
        times: dict[str, list[float]] = {"in place": [], "two temporaries": []}
        cpu = torch.device("cpu")
        assert consensus_distance(stacks, device=cpu) == two_temporaries(stacks)  # same float
        for _ in range(args.repeats):
            for name, series in times.items():
                start = time.process_time()
                if name == "in place":
                    consensus_distance(stacks, device=cpu)
                else:
                    two_temporaries(stacks)
                series.append(time.process_time() - start)
        rows.append((n, *(statistics.median(t) * 1e3 for t in times.values())))
    print(f"fp32 matmul peak, one thread: {matmul_peak().wall:.1f} GFLOP/s (end)")
    print("agents | in place (CPU ms) | two temporaries (CPU ms) | ratio")
    for n, new, old in rows:
        print(f"{n} | {new:.1f} | {old:.1f} | {old / new:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
