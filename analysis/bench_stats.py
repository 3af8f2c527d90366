"""The benchmark's statistics: pure functions of per-step tables and per-seed numbers.

Per run (one policy, one world, one seed; :func:`run_numbers`): the final mean accuracy,
the 10th-percentile agent's final accuracy, the simulated time to reach a target accuracy,
bytes on air and energy per agent. Per cell (one policy and world over seeds): the mean
with a 95 % Student-t confidence interval (:func:`t_interval`), the score normalised
between ``local`` (0) and ``central_fedavg`` (1) seed by seed (:func:`normalised`), and the
paired difference against the best policy of the column with a paired t-test
(:func:`paired_difference`): the runs of two policies with the same seed share the world
(mobility, data split, initial models), so differences are taken seed by seed.

Non-finite values (a metric a run did not record, a target never reached) are left out of
means, as in :mod:`analysis.stats` (whose sample standard deviation this reuses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.stats import sample_std

__all__ = [
    "CONFIDENCE",
    "Interval",
    "PairedTest",
    "RUN_NUMBERS",
    "first_time_at",
    "last_value",
    "normalised",
    "paired_difference",
    "run_numbers",
    "t_interval",
]

CONFIDENCE = 0.95
"""Two-sided level of every interval and test (alpha = 0.05)."""

RUN_NUMBERS = ("final_acc", "p10_acc", "bytes_per_agent", "energy_per_agent", "end_s")
"""What :func:`run_numbers` returns for one run (time to target needs the target)."""


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` finite values and the half-width of its confidence interval (NaN when
    ``n < 2``: one seed has no spread to estimate)."""

    mean: float
    half: float
    n: int

    def text(self, digits: int = 3, factor: float = 1.0) -> str:
        if self.n == 0:
            return "n/a"
        mean = f"{self.mean * factor:.{digits}f}"
        return mean if not math.isfinite(self.half) else f"{mean} ± {self.half * factor:.{digits}f}"


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def t_interval(values: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student-t confidence half-width ``t_{1-a/2, n-1} s / sqrt(n)`` of the finite
    values (``s`` the sample standard deviation, :func:`analysis.stats.sample_std`)."""
    from scipy import stats

    v = _finite(values)
    if v.size == 0:
        return Interval(float("nan"), float("nan"), 0)
    if v.size == 1:
        return Interval(float(v[0]), float("nan"), 1)
    t = float(stats.t.ppf(0.5 + confidence / 2.0, v.size - 1))
    return Interval(float(v.mean()), t * sample_std(v) / math.sqrt(v.size), int(v.size))


@dataclass(frozen=True)
class PairedTest:
    """``a - b`` over the seeds both have: mean, confidence half-width, two-sided p-value of
    the paired t-test, and whether the difference is distinguishable from zero."""

    mean: float
    half: float
    p: float
    n: int

    @property
    def distinguishable(self) -> bool:
        return bool(self.n >= 2 and self.p < 1.0 - CONFIDENCE)


def paired_difference(a: pd.Series, b: pd.Series) -> PairedTest:
    """Paired t-test of ``a - b`` over the seeds (index) where both are finite.

    A difference identical on every seed (up to float noise) has no spread: it is
    distinguishable when it is not zero (p = 0) and not when it is (p = 1). Fewer than two
    pairs: p is NaN.
    """
    from scipy import stats

    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1).astype(float)
    joined = joined[np.isfinite(joined["a"]) & np.isfinite(joined["b"])]
    diff = (joined["a"] - joined["b"]).to_numpy()
    n = int(diff.size)
    if n == 0:
        return PairedTest(float("nan"), float("nan"), float("nan"), 0)
    interval = t_interval(diff)
    if n < 2:
        return PairedTest(float(diff.mean()), float("nan"), float("nan"), n)
    if sample_std(diff) <= 1e-12 * max(1.0, abs(float(diff.mean()))):  # float noise only
        return PairedTest(float(diff.mean()), 0.0, 0.0 if diff.mean() != 0 else 1.0, n)
    p = float(stats.ttest_rel(joined["a"], joined["b"]).pvalue)
    return PairedTest(interval.mean, interval.half, p, n)


def normalised(value: pd.Series, low: pd.Series, high: pd.Series) -> pd.Series:
    """``(value - low) / (high - low)`` seed by seed (index): 0 = ``local``'s accuracy, 1 =
    ``central_fedavg``'s on the same seed; NaN where the two are equal or missing."""
    low = low.reindex(value.index).astype(float)
    high = high.reindex(value.index).astype(float)
    span = high - low
    out = (value.astype(float) - low) / span.where(span != 0)
    return out.astype(float)


def last_value(table: pd.DataFrame, column: str) -> float:
    """The last finite value of ``column`` (a run evaluates every ``eval_every`` steps; NaN
    in between), NaN when the column is absent or never finite."""
    if column not in table:
        return float("nan")
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else float("nan")


def first_time_at(table: pd.DataFrame, target: float, *, column: str = "acc_mean",
                  time: str = "time_s") -> float:
    """Simulated seconds at the first evaluation where ``column >= target``; NaN if never
    (or when the target is not finite)."""
    if not math.isfinite(target) or column not in table or time not in table:
        return float("nan")
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    hit = np.flatnonzero(np.isfinite(values) & (values >= target))
    return float(table[time].to_numpy(dtype=float)[hit[0]]) if hit.size else float("nan")


def run_numbers(table: pd.DataFrame, *, agents: int) -> dict[str, float]:
    """One run's headline numbers from its per-step table (``model.csv``'s columns).

    ``final_acc``: the last evaluated ``acc_mean``; ``p10_acc``: the last evaluated
    ``acc_p10`` (the accuracy 90 % of the agents reach or beat); ``bytes_per_agent`` and
    ``energy_per_agent``: the run's ``bytes_sent`` and ``energy_j`` (summed over agents per
    step) summed over steps, over ``agents`` (NaN without a link model: nothing is
    accounted); ``end_s``: the simulated time of the last row.
    """
    def total(column: str) -> float:
        if column not in table or agents <= 0:
            return float("nan")
        return float(pd.to_numeric(table[column], errors="coerce").fillna(0.0).sum()) / agents

    return {
        "final_acc": last_value(table, "acc_mean"),
        "p10_acc": last_value(table, "acc_p10"),
        "bytes_per_agent": total("bytes_sent"),
        "energy_per_agent": total("energy_j"),
        "end_s": last_value(table, "time_s"),
    }
