"""The benchmark's statistics: pure functions of per-step tables and per-seed numbers.

Per run (one policy, one world, one seed; :func:`run_numbers`): the final mean accuracy,
the 10th-percentile agent's final accuracy, the simulated time to reach a target accuracy,
bytes on air and energy per agent. Per cell (one policy and world over seeds): the mean
with a 95 % Student-t confidence interval (:func:`t_interval`), the seeds it would need for
a half-width of :data:`HALF_WIDTH` (:func:`seeds_needed`), the score normalised between
``local`` (0) and ``central_fedavg`` (1) seed by seed (:func:`normalised`), defined only
where that scale stands clear of the noise (:func:`score`), and the time to target counted
over every seed, never-reached ones included (:func:`time_to_target`).

Per column (one world; :func:`compare_column`): the runs of two policies with the same seed
share the world (mobility, data split, initial models), so policies are compared seed by
seed (:func:`paired_difference`, the paired t-test; :func:`equivalence`, TOST with the
margin :data:`EQUIVALENCE_MARGIN`). The best policy is not picked and then tested on the
same seeds: by default every pair of policies is tested and Holm's correction
(:func:`holm`, statsmodels) runs over all the pairs, so the comparisons with the column's
best are part of a family whose error rate holds whichever policy the data make best;
with separate tuning seeds the best is chosen on those and tested on the others. Each
policy is then *worse* than the best (Holm-significant), *level* with it (TOST-equivalent,
Holm over the same family), or *undecided*. :func:`detectable_difference` states what the
seeds can detect (statsmodels' power of the paired t-test).

Non-finite values (a metric a run did not record, a target never reached) are left out of
means, as in :mod:`mobidfl.analysis.stats` (whose sample standard deviation this reuses); the time
to target is the exception (:func:`time_to_target`): a seed that never reached the target
counts as never, not as missing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mobidfl.analysis.measures import curve_mean, evaluations, last_value, run_metrics
from mobidfl.analysis.stats import sample_std

__all__ = [
    "CONFIDENCE",
    "EQUIVALENCE_MARGIN",
    "HALF_WIDTH",
    "MAX_SEEDS",
    "POWER",
    "SCORE_FLOOR",
    "ColumnComparison",
    "Comparison",
    "Interval",
    "PairedTest",
    "Score",
    "TimeToTarget",
    "across_columns",
    "accuracy_within",
    "compare_column",
    "curve_mean",
    "detectable_difference",
    "equivalence",
    "evaluations",
    "first_time_at",
    "holm",
    "last_value",
    "normalised",
    "paired_difference",
    "run_numbers",
    "score",
    "seeds_needed",
    "t_interval",
    "time_to_target",
]

CONFIDENCE = 0.95
"""Two-sided level of every interval and test (alpha = 0.05)."""

ALPHA = 1.0 - CONFIDENCE

EQUIVALENCE_MARGIN = 0.02
"""Two policies are *level* when TOST shows their mean final accuracies (0-1) within
± 0.02 of each other. Why 2 percentage points: it is about the seed-to-seed standard
deviation of one policy's final accuracy on these worlds, below the gaps the papers report
between exchange policies (several points), and the half-width :func:`seeds_needed` aims
at, so that a cell's interval and the margin are on the same scale."""

SCORE_FLOOR = 0.05
"""The score's unit is central FedAvg − local (final accuracy). It is given only where the
lower bound of that gap's 95 % interval is above 0.05: below that, one equivalence margin
(0.02) of accuracy is more than 0.4 score units and the score mostly measures the noise of
its own denominator (the reviewer found intervals 3.7 x the accuracy's there)."""

POWER = 0.8
"""Power at which :func:`detectable_difference` states the smallest detectable difference."""

HALF_WIDTH = 0.02
"""The 95 % half-width of a cell's mean final accuracy :func:`seeds_needed` plans for (the
equivalence margin)."""

MAX_SEEDS = 10
""":func:`seeds_needed` says at most this many (more is not a bench the CPUs can run)."""

@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` finite values and the half-width of its confidence interval.

    NaN when ``n < 2``: one seed has no spread to estimate.
    """

    mean: float
    half: float
    n: int

    def text(self, digits: int = 3, factor: float = 1.0) -> str:
        """``mean ± half`` to ``digits`` decimals, times ``factor``; ``n/a`` without samples."""
        if self.n == 0:
            return "n/a"
        mean = f"{self.mean * factor:.{digits}f}"
        return mean if not math.isfinite(self.half) else f"{mean} ± {self.half * factor:.{digits}f}"


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return v[np.isfinite(v)]


def t_interval(values: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student-t confidence half-width of the finite values.

    The half-width is ``t_{1-a/2, n-1} s / sqrt(n)``, ``s`` the sample standard deviation
    (:func:`mobidfl.analysis.stats.sample_std`).
    """
    from scipy import stats

    v = _finite(values)
    if v.size == 0:
        return Interval(float("nan"), float("nan"), 0)
    if v.size == 1:
        return Interval(float(v[0]), float("nan"), 1)
    t = float(stats.t.ppf(0.5 + confidence / 2.0, v.size - 1))
    return Interval(float(v.mean()), t * sample_std(v) / math.sqrt(v.size), int(v.size))


# --- paired tests ------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedTest:
    """``a - b`` over the seeds both have.

    Mean, confidence half-width, two-sided p-value (before any multiplicity correction), and whether
    the difference is distinguishable from zero on its own. ``method``: ``"paired t"``, or
    ``"sign-flip"`` for a difference without spread (:func:`paired_difference`).
    """

    mean: float
    half: float
    p: float
    n: int
    method: str = "paired t"

    @property
    def distinguishable(self) -> bool:
        """``p < alpha`` for this one test alone.

        A table of many tests reads :func:`compare_column`'s Holm-adjusted p instead.
        """
        return bool(self.n >= 2 and self.p < ALPHA)


def _pairs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """``a - b`` over the seeds (index) where both are finite."""
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1).astype(float)
    joined = joined[np.isfinite(joined["a"]) & np.isfinite(joined["b"])]
    return (joined["a"] - joined["b"]).to_numpy()


def _no_spread(diff: np.ndarray) -> bool:
    """The differences are the same on every seed, up to float noise.

    The t statistic would be a ratio of rounding errors, or infinite.
    """
    return sample_std(diff) <= 1e-12 * max(1.0, float(np.abs(diff).max()))


def _sign_flip_p(diff: np.ndarray, alternative: str) -> float:
    """Exact sign-flip (paired permutation) test of mean ``diff`` = 0.

    All ``2^n`` sign patterns (``scipy.stats.permutation_test``).
    """
    from scipy import stats

    result = stats.permutation_test((diff,), np.mean, permutation_type="samples",
                                    alternative=alternative, n_resamples=np.inf)
    return float(result.pvalue)


def paired_difference(a: pd.Series, b: pd.Series) -> PairedTest:
    """Paired t-test of ``a - b`` over the seeds (index) where both are finite.

    A difference identical on every seed (up to float noise) has no spread: the t statistic
    is infinite (or 0/0) and would claim p = 0 from as few as two seeds. Such a pair gets
    the exact sign-flip test instead (the paired permutation test the t-test approximates,
    ``scipy.stats.permutation_test``): ``n`` differences all of one sign give
    ``p = 2 / 2^n`` (0.0625 for 5 seeds, 0.5 for 2), all zero give p = 1. That is the
    honest answer of ``n`` seeds that all agree: no assumption about a spread they do not
    show. The interval of such a difference has half-width 0 (no spread was seen). Fewer
    than two pairs: p is NaN.
    """
    diff = _pairs(a, b)
    n = int(diff.size)
    if n == 0:
        return PairedTest(float("nan"), float("nan"), float("nan"), 0)
    if n < 2:
        return PairedTest(float(diff.mean()), float("nan"), float("nan"), n)
    if _no_spread(diff):
        return PairedTest(float(diff.mean()), 0.0, _sign_flip_p(diff, "two-sided"), n,
                          "sign-flip")
    from scipy import stats

    interval = t_interval(diff)
    p = float(stats.ttest_1samp(diff, 0.0).pvalue)  # = ttest_rel of the pairs
    return PairedTest(interval.mean, interval.half, p, n)


def equivalence(a: pd.Series, b: pd.Series, *, margin: float = EQUIVALENCE_MARGIN) -> float:
    """p-value of TOST that ``-margin < mean(a - b) < margin`` over the seeds both have.

    Two one-sided paired t-tests (statsmodels' ``ttost_paired``): small p = shown *level*.

    NaN with fewer than two pairs. A difference without spread gets the exact sign-flip
    tests of ``a - b + margin > 0`` and ``a - b - margin < 0`` (the larger p), as in
    :func:`paired_difference`: ``n`` seeds within the margin give ``1 / 2^n``, not 0.
    """
    if not margin > 0:
        raise ValueError(f"margin must be > 0, got {margin!r}")
    diff = _pairs(a, b)
    if diff.size < 2:
        return float("nan")
    if _no_spread(diff):
        return max(_sign_flip_p(diff + margin, "greater"), _sign_flip_p(diff - margin, "less"))
    from statsmodels.stats.weightstats import ttost_paired

    return float(ttost_paired(diff, np.zeros_like(diff), -margin, margin)[0])


def holm(pvalues: Sequence[float] | np.ndarray, *, alpha: float = ALPHA) -> tuple[
        np.ndarray, np.ndarray]:
    """Holm's step-down adjustment of the finite p-values: ``(adjusted p, rejected)``.

    As statsmodels ``multipletests(method="holm")``; NaN p-values (tests that could not be made)
    stay NaN, are not rejected and do not count in the family.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    rejected = np.zeros(p.shape, dtype=bool)
    finite = np.isfinite(p)
    if finite.any():
        reject, corrected, _, _ = multipletests(p[finite], alpha=alpha, method="holm")
        adjusted[finite] = corrected
        rejected[finite] = reject
    return adjusted, rejected


# --- across columns: what one world change does to each policy ---------------------------
def across_columns(finals: pd.DataFrame, *, base: str, other: str,
                   alpha: float = ALPHA) -> pd.DataFrame:
    """Test a claim across two columns as its own family of tests.

    A claim such as "static cars lower every policy's accuracy" or "DCM beats DAM": per
    policy, the paired difference ``other - base`` of final accuracy over the seeds both
    columns ran (:func:`paired_difference`: the same seed is the same data split and initial
    model in both worlds), Holm-adjusted over the policies (:func:`holm`). A per-column test
    says nothing about such a claim: two columns' winners may each be unresolved while the
    change between them is clear, and the reverse.

    Parameters
    ----------
    finals
        One row per run with columns ``column``, ``policy``, ``seed`` and ``final_acc``.
    base, other
        The two columns compared (``other - base``).
    alpha
        Family-wise error rate of the Holm step-down.

    Returns
    -------
    pandas.DataFrame
        One row per policy that ran in both: ``policy``, ``diff``, ``half``, ``n``, ``p``,
        ``p_holm``, ``direction`` (``"raises"``, ``"lowers"`` where Holm rejects, else
        ``"no claim"``), and ``method`` (:class:`PairedTest`).
    """
    rows = []
    for policy in dict.fromkeys(finals["policy"]):
        mine = finals[finals["policy"] == policy]
        a = mine[mine["column"] == other].set_index("seed")["final_acc"]
        b = mine[mine["column"] == base].set_index("seed")["final_acc"]
        if a.empty or b.empty:
            continue
        test = paired_difference(a, b)
        rows.append({"policy": policy, "diff": test.mean, "half": test.half, "n": test.n,
                     "p": test.p, "method": test.method})
    table = pd.DataFrame(rows, columns=["policy", "diff", "half", "n", "p", "method"])
    adjusted, rejected = holm(table["p"].to_numpy(float), alpha=alpha)
    table["p_holm"] = adjusted
    table["direction"] = np.where(~rejected, "no claim",
                                  np.where(table["diff"] > 0, "raises", "lowers"))
    return table


# --- one column: the best, and every policy against it -------------------------------------
@dataclass(frozen=True)
class Comparison:
    """One policy against the column's best.

    The paired difference (``test``), its Holm-adjusted p (``p_holm``), the TOST p and its Holm
    adjustment (``p_level``, ``p_level_holm``), and the verdict: ``"best"``, ``"worse"``
    (Holm-significant, below the best), ``"better"`` (Holm-significant, above: only possible when
    the best was chosen on tuning seeds, or on unequal seeds), ``"level"`` (TOST-equivalent within
    the margin after Holm, and not significantly different) or ``"undecided"`` (neither: the seeds
    cannot tell).
    """

    test: PairedTest
    p_holm: float
    p_level: float
    p_level_holm: float
    verdict: str


@dataclass(frozen=True)
class ColumnComparison:
    """:func:`compare_column`'s answer for one column (world).

    ``best``: the policy with the highest mean final accuracy (on the tuning seeds when
    given, else on the seeds compared); ``selection``: ``"all pairs"`` or ``"tuning seeds"``;
    ``family``: the number of paired tests Holm corrects over; ``contenders``: the policies
    no other policy beats after Holm (all pairs; with tuning seeds, the best and those not
    worse than it); ``against_best``: a :class:`Comparison` per other policy; ``sd``, ``n``:
    the pooled standard deviation of the paired differences with the best and the seeds per
    pair; ``detectable`` and ``detectable_holm``: the smallest difference the paired t-test
    detects with 80 % power at alpha = 0.05 and at Holm's strictest step (alpha / family).
    """

    best: str
    selection: str
    family: int
    contenders: tuple[str, ...]
    against_best: dict[str, Comparison] = field(default_factory=dict)
    sd: float = float("nan")
    n: int = 0
    detectable: float = float("nan")
    detectable_holm: float = float("nan")


def _verdict(test: PairedTest, p_holm: float, p_level_holm: float) -> str:
    if math.isfinite(p_holm) and p_holm < ALPHA:
        return "worse" if test.mean < 0 else "better"
    if math.isfinite(p_level_holm) and p_level_holm < ALPHA:
        return "level"
    return "undecided"


def compare_column(finals: Mapping[str, pd.Series], *,
                   tuning: Mapping[str, pd.Series] | None = None,
                   margin: float = EQUIVALENCE_MARGIN) -> ColumnComparison:
    """The column's best policy and every other policy's verdict against it.

    ``finals``: policy -> final accuracy per seed (index), the candidates only (the oracle
    reference excluded by the caller). Picking the best by its mean and then testing the
    others against it on the same seeds double-dips: the maximum of several noisy means is
    biased upward, so "worse than the best" is found too often. Two ways out:

    * ``tuning`` given (policy -> final accuracy on *other* seeds): the best is the highest
      mean there, and the ``m - 1`` paired tests against it on ``finals``' seeds are
      independent of the choice; Holm runs over those ``m - 1`` tests.
    * default, all pairs: every pair of the ``m`` policies is tested (``m (m - 1) / 2``
      paired t-tests and TOSTs) and Holm runs over all of them. The family's error rate is
      then controlled for every pair at once, so for the pairs with the best too, whichever
      policy the data made best: the choice no longer inflates the claims. ``contenders``
      lists the policies that no other policy beats after Holm.

    A pair is *worse* (or *better*) when its Holm-adjusted paired p is below 0.05, *level*
    when its Holm-adjusted TOST p is (a pair both is reported worse: the difference was
    shown, though within the margin), *undecided* otherwise.
    """
    policies = [p for p, s in finals.items() if np.isfinite(np.asarray(s, dtype=float)).any()]
    if not policies:
        return ColumnComparison(best="", selection="", family=0, contenders=())
    chooser = tuning if tuning is not None else finals

    def mean(policy: str) -> float:
        seen = t_interval(chooser.get(policy, pd.Series(dtype=float)))
        return seen.mean if seen.n else -math.inf

    best = max(policies, key=mean)
    others = [p for p in policies if p != best]
    if tuning is not None:
        pairs = [(p, best) for p in others]
        selection = "tuning seeds"
    else:
        pairs = list(itertools.combinations(policies, 2))
        selection = "all pairs"
    tests = [paired_difference(finals[a], finals[b]) for a, b in pairs]
    levels = [equivalence(finals[a], finals[b], margin=margin) for a, b in pairs]
    p_holm, _ = holm([t.p for t in tests])
    level_holm, _ = holm(levels)
    family = int(np.isfinite([t.p for t in tests]).sum())

    against: dict[str, Comparison] = {}
    beaten: set[str] = set()
    for (a, b), test, ph, pl, plh in zip(pairs, tests, p_holm, levels, level_holm, strict=True):
        if math.isfinite(ph) and ph < ALPHA:
            beaten.add(a if test.mean < 0 else b)
        if best not in (a, b):
            continue
        if a == best:  # orient as other - best
            test = PairedTest(-test.mean, test.half, test.p, test.n, test.method)
            a = b
        against[a] = Comparison(test, float(ph), float(pl), float(plh),
                                _verdict(test, float(ph), float(plh)))
    contenders = tuple(p for p in policies if p not in beaten)

    variances = [sample_std(_pairs(finals[p], finals[best])) ** 2 for p in others
                 if against[p].test.n >= 2]
    ns = [against[p].test.n for p in others if against[p].test.n >= 2]
    sd = math.sqrt(float(np.mean(variances))) if variances else float("nan")
    n = int(min(ns)) if ns else 0
    return ColumnComparison(
        best=best, selection=selection, family=family, contenders=contenders,
        against_best=against, sd=sd, n=n,
        detectable=detectable_difference(sd, n),
        detectable_holm=detectable_difference(sd, n, alpha=ALPHA / max(family, 1)),
    )


# --- what the seeds can tell ----------------------------------------------------------------
def detectable_difference(sd: float, n: int, *, alpha: float = ALPHA,
                          power: float = POWER) -> float:
    """The smallest mean paired difference the paired t-test over ``n`` seeds detects.

    Two-sided, with probability ``power`` at level ``alpha``, when the differences have standard
    deviation ``sd``: statsmodels' ``TTestPower().solve_power`` gives the effect size ``d``
    (difference / sd), times ``sd``. NaN when ``n < 2`` or ``sd`` is not finite; 0 when ``sd`` is 0.
    """
    if n < 2 or not math.isfinite(sd) or sd < 0:
        return float("nan")
    if sd == 0:
        return 0.0
    from statsmodels.stats.power import TTestPower

    d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power,
                                 alternative="two-sided")
    return float(np.asarray(d).item()) * sd


def seeds_needed(sd: float, *, half_width: float = HALF_WIDTH, cap: int = MAX_SEEDS,
                 confidence: float = CONFIDENCE) -> int:
    """The fewest seeds (at least 2) whose Student-t half-width is at most ``half_width``.

    The half-width ``t_{1-a/2, n-1} sd / sqrt(n)`` of a cell with sample standard deviation ``sd``;
    ``cap`` when even ``cap`` seeds are not enough, or when ``sd`` is unknown (NaN: one seed).
    """
    from scipy import stats

    if not math.isfinite(sd):
        return cap
    for n in range(2, cap + 1):
        if float(stats.t.ppf(0.5 + confidence / 2.0, n - 1)) * sd / math.sqrt(n) <= half_width:
            return n
    return cap



def seeds_for_column(stds: Sequence[float], *, have: int, half_width: float = HALF_WIDTH,
                     cap: int = MAX_SEEDS, confidence: float = CONFIDENCE) -> int:
    """How many seeds a column runs next under the half-width stopping rule.

    Seeds are added until every cell's 95 % half-width is at most ``half_width`` or ``cap`` seeds
    are reached (a stopping rule fixed before the runs).

    ``stds``: each cell's sample standard deviation of final accuracy over the ``have``
    seeds run so far (NaN: unknown). The column grows to the largest :func:`seeds_needed`
    among its cells, never shrinks below ``have`` and never passes ``cap``; all cells of a
    column share their seeds, so the policies stay paired seed by seed.
    """
    if have < 0 or cap < 1:
        raise ValueError(f"have = {have} and cap = {cap}: need have >= 0 and cap >= 1")
    need = [seeds_needed(float(sd), half_width=half_width, cap=cap, confidence=confidence)
            for sd in stds]
    return max(have, min(cap, max(need, default=have)))

# --- the score --------------------------------------------------------------------------------
def normalised(value: pd.Series, low: pd.Series, high: pd.Series) -> pd.Series:
    """``(value - low) / (high - low)`` seed by seed (index).

    0 = ``local``'s accuracy, 1 = ``central_fedavg``'s on the same seed; NaN where the two are equal
    or missing. Use :func:`score`, which checks first that the scale stands clear of the noise.
    """
    low = low.reindex(value.index).astype(float)
    high = high.reindex(value.index).astype(float)
    span = high - low
    out = (value.astype(float) - low) / span.where(span != 0)
    return out.astype(float)


@dataclass(frozen=True)
class Score:
    """The normalised score's mean and half-width over seeds, or NaN with ``reason``."""

    interval: Interval
    reason: str = ""


def score(value: pd.Series, low: pd.Series, high: pd.Series, *,
          floor: float = SCORE_FLOOR) -> Score:
    """:func:`normalised` per seed, then :func:`t_interval`, where the scale is clear.

    The scale is ``high - low`` (central FedAvg − local) seed by seed; the score is given
    only when that gap's own 95 % interval has its lower bound above ``floor``
    (:data:`SCORE_FLOOR`). Otherwise the score is NaN and ``reason`` says why: dividing by
    a gap within the noise blows the score's interval up (and can flip its sign).
    """
    nan = Interval(float("nan"), float("nan"), 0)
    gap = t_interval(_pairs(high, low))
    if gap.n < 2:
        return Score(nan, "no scale: central FedAvg and local share fewer than two seeds")
    lower = gap.mean - gap.half
    if not lower > floor:
        return Score(nan, f"no clear scale: central FedAvg − local = {gap.mean:.3f} ± "
                          f"{gap.half:.3f}, lower bound {lower:.3f} ≤ {floor}")
    return Score(t_interval(normalised(value, low, high)))


# --- time to target -------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeToTarget:
    """Seeds that reached the target and the median time over all seeds.

    ``reached`` of ``n`` seeds; never = +inf in the median (+inf when half or more never reached it;
    NaN with no seed), with the fastest and slowest reaching seed.
    """

    # Shaped as Interval above (fields, then text()): each summary prints itself.
    reached: int
    n: int
    median: float
    fastest: float
    slowest: float

    def text(self, factor: float = 1.0, digits: int = 2) -> str:
        """The median time (``never`` if infinite) and ``(reached/n)``; ``n/a`` without runs."""
        if self.n == 0:
            return "n/a"
        median = "never" if math.isinf(self.median) else f"{self.median * factor:.{digits}f}"
        return f"{median} ({self.reached}/{self.n})"


def time_to_target(times: Sequence[float] | np.ndarray | pd.Series) -> TimeToTarget:
    """Time (or bytes, :func:`mobidfl.analysis.comm.bytes_to_target`) to target over every seed.

    NaN (never reached) counts as +inf.

    The mean over the seeds that reached the target says nothing of the others (one of five
    reaching it early gives a fast "mean"). Here every seed counts: the median with
    never-reached = +inf (``numpy.median``) is the Kaplan-Meier median of runs that all end
    at the same simulated time (every never-reached run is censored after every observed
    time), and it is +inf ("never") unless more than half reached the target.
    """
    v = np.asarray(times, dtype=float)
    if v.size == 0:
        return TimeToTarget(0, 0, float("nan"), float("nan"), float("nan"))
    hit = v[np.isfinite(v)]
    median = float(np.median(np.where(np.isfinite(v), v, np.inf)))
    return TimeToTarget(int(hit.size), int(v.size), median,
                        float(hit.min()) if hit.size else float("nan"),
                        float(hit.max()) if hit.size else float("nan"))


# --- one run ----------------------------------------------------------------------------------
def first_time_at(table: pd.DataFrame, target: float, *, column: str = "acc_mean",
                  time: str = "time_s") -> float:
    """Simulated seconds at the first evaluation where ``column >= target``.

    NaN if never (or when the target is not finite).
    """
    if not math.isfinite(target) or column not in table or time not in table:
        return float("nan")
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    hit = np.flatnonzero(np.isfinite(values) & (values >= target))
    return float(table[time].to_numpy(dtype=float)[hit[0]]) if hit.size else float("nan")


def accuracy_within(acc: np.ndarray, spent: np.ndarray, budget: float) -> float:
    """The best accuracy a run reached at an evaluation where it had sent at most ``budget``.

    ``acc`` and ``spent`` (cumulative bytes per agent) at the run's evaluations, in order.
    NaN when even its first evaluation had sent more (the policy cannot run within the
    budget) or the budget is not finite.
    """
    acc = np.asarray(acc, dtype=float)
    spent = np.asarray(spent, dtype=float)
    if acc.shape != spent.shape:
        raise ValueError(f"acc and spent differ in shape: {acc.shape} != {spent.shape}")
    if not math.isfinite(budget):
        return float("nan")
    inside = np.isfinite(acc) & np.isfinite(spent) & (spent <= budget * (1.0 + 1e-12))
    return float(acc[inside].max()) if inside.any() else float("nan")


def run_numbers(table: pd.DataFrame, *, agents: int) -> dict[str, float]:
    """One run's headline numbers from its per-step table (``model.csv``'s columns).

    Every metric of :data:`mobidfl.analysis.measures.METRICS` that has a function, in its order:
    ``final_acc``: the last evaluated ``acc_mean``; ``p10_acc``: the last evaluated
    ``acc_p10`` (the accuracy 90 % of the agents reach or beat); ``auc_acc``: the mean
    ``acc_mean`` over the run's evaluations and ``last3_acc`` over its last three
    (:func:`curve_mean`); ``bytes_per_agent`` and
    ``energy_per_agent``: the run's ``bytes_sent`` and ``energy_j`` (summed over agents per
    step) summed over steps, over ``agents`` (NaN when the run has no such column: energy at
    the ideal link, bytes in runs made before the ideal link counted them; NaN too when a
    step's value is unknown, never a silent 0); ``end_s``: the simulated time of the last row.
    """
    return run_metrics(table, agents=agents)
