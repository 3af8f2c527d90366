"""Communication in the benchmark: accuracy over bytes, bytes to target, the Pareto view.

Every learning run counts the bytes its policy sends (``bytes_sent`` in ``model.csv``, summed
over agents per step): a link model counts what it put on the air, the ideal link counts
every model message the policy sent, none limited (docs/concepts/links.md). From those
per-step tables, pure functions:

* :func:`cumulative_per_agent`: bytes sent so far per agent at every row (the x axis of
  accuracy over bytes);
* :func:`bytes_to_target`: per seed the bytes per agent sent by the first evaluation at a
  target accuracy, and the median over every seed with a seed that never got there counted
  as never (:func:`mobidfl.analysis.bench_stats.time_to_target`, as for time);
* :func:`pareto_front`: which policies of a world no other beats on both final accuracy and
  bytes (Pareto 1906; the accuracy-communication trade-off of communication-efficient FL,
  e.g. McMahan et al. 2017, Fig. 2's rounds to target);
* :func:`accuracy_over_bytes`: the mean curve over seeds per policy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from mobidfl.analysis.bench_stats import TimeToTarget

__all__ = [
    "CURVE", "PER_AGENT", "accuracy_over_bytes", "bytes_to_target", "cumulative_per_agent",
    "pareto_front",
]

BYTES = "bytes_sent"
"""The per-step column summed (``model.csv``: bytes every agent sent this step)."""
PER_AGENT = "bytes_per_agent"
"""The column :func:`cumulative_per_agent` fills in curves and per-run tables."""
CURVE = ("time_s", "acc_mean", PER_AGENT)
"""A run's curve at each evaluation (the bench's ``curves``, published as
``curves.parquet``): simulated time, mean accuracy, and the bytes sent per agent by then
(NaN for runs made before the ideal link counted bytes)."""


def cumulative_per_agent(table: pd.DataFrame, *, agents: int,
                         column: str = BYTES) -> np.ndarray:
    """Bytes sent so far per agent at every row of a run's per-step table.

    The running sum of ``column`` over ``agents``. All NaN when the column is absent (a run made
    before the ideal link counted bytes) or ``agents`` < 1; a NaN step (a policy that did not say
    what it sent) makes every later total NaN: unknown stays unknown.
    """
    if column not in table or agents < 1:
        return np.full(len(table), np.nan)
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    return np.cumsum(values) / float(agents)


def bytes_to_target(curves: Mapping[Any, pd.DataFrame],
                    targets: Mapping[Any, float]) -> TimeToTarget:
    """Bytes per agent to a target accuracy over seeds.

    As :func:`mobidfl.analysis.bench_stats.time_to_target` does for time.

    ``curves``: per seed a run's curve (:data:`CURVE` columns: ``acc_mean`` and the bytes
    per agent sent by each evaluation); ``targets``: per seed the target accuracy. Per seed,
    the bytes sent by the first evaluation at ``acc_mean >= target``
    (:func:`mobidfl.analysis.bench_stats.first_time_at` on the bytes instead of the time), never
    reached = +inf; the median over every seed, never counting as never. Seeds whose bytes
    are unknown (a run made before the ideal link counted them) or without a target are
    left out: unknown is not never.
    """
    from mobidfl.analysis.bench_stats import first_time_at, time_to_target

    spent = []
    for seed, curve in curves.items():
        target = float(targets.get(seed, math.nan))
        if not math.isfinite(target) or PER_AGENT not in curve or curve.empty:
            continue
        if not np.isfinite(pd.to_numeric(curve[PER_AGENT], errors="coerce").to_numpy(float)).all():
            continue
        spent.append(first_time_at(curve, target, time=PER_AGENT))
    return time_to_target(spent)


def pareto_front(cost: Sequence[float] | np.ndarray,
                 value: Sequence[float] | np.ndarray) -> np.ndarray:
    """Whether each point is on the Pareto front of low ``cost`` (bytes) and high ``value``.

    ``value`` is the accuracy; on the front: no other point has cost <= and value >= with one of
    them strict. Points with a non-finite coordinate are never on it, nor do they dominate; equal
    points are both on it.
    """
    c, v = np.asarray(cost, dtype=float), np.asarray(value, dtype=float)
    if c.shape != v.shape:
        raise ValueError(f"cost {c.shape} and value {v.shape}: one of each per point")
    ok = np.isfinite(c) & np.isfinite(v)
    no_worse = (c[:, None] <= c[None, :]) & (v[:, None] >= v[None, :])  # [k, i]: k vs i
    better = (c[:, None] < c[None, :]) | (v[:, None] > v[None, :])
    dominated = (no_worse & better & ok[:, None]).any(axis=0)
    return ok & ~dominated


def accuracy_over_bytes(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of the accuracy and the bytes per agent sent, at each evaluation time.

    Per column and policy: ``column, policy, time_s, bytes_per_agent, acc_mean``; rows whose bytes
    are unknown are left out.
    """
    cols = ["column", "policy", "time_s", PER_AGENT, "acc_mean"]
    if curves.empty or PER_AGENT not in curves:
        return pd.DataFrame(columns=cols)
    known = curves[np.isfinite(pd.to_numeric(curves[PER_AGENT], errors="coerce"))]
    mean = known.groupby(["column", "policy", "time_s"], sort=False)[
        [PER_AGENT, "acc_mean"]].mean().reset_index()
    return mean[cols]
