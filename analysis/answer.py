"""The answer of a pre-registered study: verdicts per world, the seeds, the rule, its score.

Version 3 of the controlled study (``analysis/scenarios/studies/mobility_regimes.toml``)
declares in its ``[design]`` table, before any run, what is computed here from its published
per-run data, and nothing else:

* two co-primary metrics per run: the mean accuracy over the run's evaluations
  (``auc_acc``, :func:`mobidfl.analysis.bench_stats.curve_mean`) and the accuracy within a
  byte budget (:func:`add_budget_accuracy`: the best accuracy reached while having sent at most
  D-PSGD's whole-run bytes per agent on the same world and seed);
* per world and metric, a verdict over the declared contenders (:func:`world_verdict`):
  **winner** (Holm over every pair of contenders rejects the best against each other one, with
  one declared test, the paired t-test), **level** (TOST within the declared margin for every
  pair, Holm), or **undecided**; identical arms are merged first (:func:`duplicate_arms`);
* a headroom gate (:func:`headroom_bound`): a world whose oracle (central FedAvg) is not
  clearly above the best contender is "ceiling" and draws no rule;
* the seeds, from a power analysis on a declared pilot (:func:`seeds_for_margin`);
* the rule (:func:`fit_rule`): at most one cut on each of at most two measured descriptors,
  each regime predicting its most frequent best policy, scored beside the majority constant on
  the training worlds, leave-one-world-out (:func:`leave_one_out`), by a permutation test
  (:func:`permutation_p`) and on the held-out worlds with Clopper-Pearson intervals
  (:func:`clopper_pearson`).

Every statistic goes through scipy.stats or statsmodels; the functions are pure (tables in,
numbers out) and tested on hand-worked cases in ``tests/analysis/test_answer.py``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mobidfl.analysis.bench_stats import accuracy_within
from mobidfl.analysis.measures import DESCRIPTORS

__all__ = [
    "LOG_DESCRIPTORS",
    "Rule",
    "Verdict",
    "add_budget_accuracy",
    "clopper_pearson",
    "duplicate_arms",
    "fit_rule",
    "headroom_bound",
    "leave_one_out",
    "permutation_p",
    "pilot_power",
    "rule_hits",
    "seeds_for_margin",
    "world_verdict",
]

LOG_DESCRIPTORS = tuple(d.name for d in DESCRIPTORS if d.log_scale)
"""Descriptors whose cuts lie geometrically midway (their levels span orders of magnitude)."""


# --- the co-primary metric: accuracy within a byte budget ---------------------------------
def add_budget_accuracy(runs: pd.DataFrame, curves: pd.DataFrame, *,
                        payer: str = "dpsgd") -> pd.DataFrame:
    """``runs`` with ``budget_mb`` and ``budget_acc`` per run.

    The budget of a world and seed is ``payer``'s whole-run bytes per agent there (the same
    seed is the same contacts and data split for every policy); a run's ``budget_acc`` is the
    best ``acc_mean`` at one of its evaluations where its cumulative bytes per agent were
    within it (:func:`mobidfl.analysis.bench_stats.accuracy_within`), NaN when it was over the
    budget at its first evaluation or the payer has no run there.
    """
    out = runs.copy()
    ok = out["status"] == "ok"
    paid = out[ok & (out["policy"] == payer)].set_index(["column", "seed"])["bytes_per_agent"]
    by_run = {key: g for key, g in curves.groupby(["column", "policy", "seed"], sort=False)}
    budgets, accs = [], []
    for row in out.itertuples(index=False):
        budget = float(paid.get((row.column, row.seed), math.nan))
        curve = by_run.get((row.column, row.policy, row.seed))
        budgets.append(budget / 1e6)
        if row.status != "ok" or curve is None:
            accs.append(math.nan)
            continue
        accs.append(accuracy_within(curve["acc_mean"].to_numpy(float),
                                    curve["bytes_per_agent"].to_numpy(float), budget))
    out["budget_mb"] = budgets
    out["budget_acc"] = accs
    return out


# --- one world: merged arms, the verdict, the headroom -----------------------------------
def _aligned(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1).astype(float).dropna()
    return joined["a"].to_numpy(), joined["b"].to_numpy()


def duplicate_arms(values: Mapping[str, pd.Series]) -> dict[str, str]:
    """``arm -> the earlier arm`` whose values it repeats exactly on every seed.

    Two policies that make identical runs in a world (e.g. mobility-aware weights where every
    speed is equal: de Heredia's W = 1/N + alpha (X - 1/N) with X = 1/N) are one arm there, not
    two votes in a family. Arms in the mapping's order; a repeat maps to the first it equals.
    """
    merged: dict[str, str] = {}
    kept: list[str] = []
    for name, series in values.items():
        s = pd.Series(series, dtype=float)
        twin = next((k for k in kept if s.index.equals(pd.Series(values[k]).index)
                     and np.array_equal(s.to_numpy(), pd.Series(values[k], dtype=float)
                                        .to_numpy(), equal_nan=True)), None)
        if twin is None:
            kept.append(name)
        else:
            merged[name] = twin
    return merged


@dataclass(frozen=True)
class Pair:
    """One pair of arms: ``a - b`` over their common seeds, its tests and Holm's answers."""

    a: str
    b: str
    mean: float
    n: int
    p: float
    p_holm: float
    p_tost: float
    p_tost_holm: float


@dataclass(frozen=True)
class Verdict:
    """A world's answer under one metric.

    ``kind``: ``winner``, ``level``, ``undecided`` or ``no data``; ``best``: the arm with the
    highest mean; ``not_beaten``: the arms no other arm beats (Holm); ``lead``: best minus the
    runner-up (mean, metric units) with the paired 95 % interval ``lead_low``..``lead_high``;
    ``merged``: arms folded into an identical one; ``alone``: why a single arm was left.
    """

    kind: str
    best: str
    not_beaten: tuple[str, ...]
    means: dict[str, float]
    lead: float = math.nan
    lead_low: float = math.nan
    lead_high: float = math.nan
    pairs: tuple[Pair, ...] = ()
    merged: dict[str, str] = field(default_factory=dict)
    alone: str = ""


def _t_interval(diff: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    from scipy import stats

    if diff.size < 2:
        return math.nan, math.nan
    sd = float(np.std(diff, ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, diff.size - 1)) * sd / math.sqrt(diff.size)
    mean = float(diff.mean())
    return mean - half, mean + half


def _paired_p(a: np.ndarray, b: np.ndarray) -> float:
    """The declared test: the paired t-test (scipy.stats.ttest_rel), the same for every pair.

    Identical values on every seed have no difference to test: p = 1 (scipy says NaN).
    """
    from scipy import stats

    if a.size < 2:
        return math.nan
    if np.array_equal(a, b):
        return 1.0
    return float(stats.ttest_rel(a, b).pvalue)


def _tost_p(a: np.ndarray, b: np.ndarray, margin: float) -> float:
    """TOST of ``|mean(a - b)| < margin`` (statsmodels ``ttost_paired``); identical: p = 0."""
    from statsmodels.stats.weightstats import ttost_paired

    if a.size < 2:
        return math.nan
    if np.array_equal(a, b):
        return 0.0
    return float(ttost_paired(a, b, -margin, margin)[0])


def world_verdict(values: Mapping[str, pd.Series], *, contenders: Sequence[str],
                  margin: float, alpha: float = 0.05) -> Verdict:
    """Winner, level or undecided among ``contenders`` (module docstring).

    ``values``: arm -> metric per seed (index); arms outside ``contenders`` are ignored, and
    an arm without a finite value (over the byte budget on every seed) is left out. Every pair
    of the remaining arms gets the paired t-test and TOST (``margin``); Holm runs over the
    pairs, once for the t-tests and once for the TOSTs.
    """
    from statsmodels.stats.multitest import multipletests

    arms = {p: pd.Series(values[p], dtype=float).dropna() for p in contenders if p in values}
    arms = {p: s for p, s in arms.items() if not s.empty}
    merged = duplicate_arms(arms)
    arms = {p: s for p, s in arms.items() if p not in merged}
    means = {p: float(s.mean()) for p, s in arms.items()}
    if not arms:
        return Verdict("no data", "", (), {}, merged=merged)
    best = max(arms, key=lambda p: (means[p], -list(contenders).index(p)))
    if len(arms) == 1:
        why = "identical runs" if merged else "the only arm with a value"
        kind = "level" if merged else "winner"
        return Verdict(kind, best, (best,), means, merged=merged, alone=why)
    raw = []
    for a, b in itertools.combinations(arms, 2):
        x, y = _aligned(arms[a], arms[b])
        raw.append((a, b, float((x - y).mean()) if x.size else math.nan, int(x.size),
                    _paired_p(x, y), _tost_p(x, y, margin)))

    def adjust(ps: list[float]) -> np.ndarray:
        p = np.asarray(ps, dtype=float)
        out = np.full(p.shape, np.nan)
        finite = np.isfinite(p)
        if finite.any():
            out[finite] = multipletests(p[finite], alpha=alpha, method="holm")[1]
        return out

    holm_t = adjust([r[4] for r in raw])
    holm_e = adjust([r[5] for r in raw])
    pairs = tuple(Pair(a, b, m, n, p, float(ph), pe, float(pe_h))
                  for (a, b, m, n, p, pe), ph, pe_h in zip(raw, holm_t, holm_e, strict=True))
    beaten = {(pr.b if pr.mean > 0 else pr.a) for pr in pairs if pr.p_holm < alpha}
    not_beaten = tuple(p for p in arms if p not in beaten)
    runner = max((p for p in arms if p != best), key=lambda p: means[p])
    x, y = _aligned(arms[best], arms[runner])
    low, high = _t_interval(x - y)
    against_best = [pr for pr in pairs if best in (pr.a, pr.b)]
    wins = all(pr.p_holm < alpha and (pr.mean > 0) == (pr.a == best) for pr in against_best)
    level = all(pr.p_tost_holm < alpha for pr in pairs)
    kind = "winner" if wins else "level" if level else "undecided"
    return Verdict(kind, best, not_beaten, means, lead=means[best] - means[runner],
                   lead_low=low, lead_high=high, pairs=pairs, merged=merged)


def headroom_bound(oracle: pd.Series, best: pd.Series, *, confidence: float = 0.95) -> float:
    """Lower bound of the paired ``confidence`` interval of ``oracle - best`` over seeds.

    A world where even this bound is small has no room for a policy to lead: its ranking is a
    ranking of noise near the ceiling. NaN with fewer than two common seeds.
    """
    x, y = _aligned(pd.Series(oracle, dtype=float), pd.Series(best, dtype=float))
    return _t_interval(x - y, confidence)[0]


def seeds_for_margin(sd: float, *, margin: float, alpha: float, power: float, family: int,
                     floor: int = 3, cap: int = 10) -> tuple[int, bool]:
    """Seeds for the paired t-test to detect ``margin`` with ``power`` at Holm's first step.

    Two-sided at ``alpha / family`` for differences of standard deviation ``sd``
    (statsmodels ``TTestPower``). Returns ``(seeds, capped)``: at least ``floor``, at most
    ``cap`` (``capped`` when the power analysis asked for more).
    """
    from statsmodels.stats.power import TTestPower

    if not (math.isfinite(sd) and sd >= 0 and margin > 0 and family >= 1):
        raise ValueError(f"need a finite sd >= 0, margin > 0 and family >= 1: {sd}, {margin}, "
                         f"{family}")
    if sd == 0:
        return floor, False
    n = floor
    test = TTestPower()
    while n <= cap:
        got = test.power(effect_size=margin / sd, nobs=n, alpha=alpha / family,
                         alternative="two-sided")
        if not math.isfinite(got):
            # scipy's noncentral t gives NaN for the far tail at large effects, and
            # statsmodels adds it: the near tail alone (one-sided at alpha / 2) is a lower bound
            # of the two-sided power, short of it by less than the far tail's probability
            got = test.power(effect_size=margin / sd, nobs=n, alpha=alpha / family / 2,
                             alternative="larger")
        if got >= power:
            return n, False
        n += 1
    return cap, True


def pilot_power(runs: pd.DataFrame, design: Mapping[str, Any]) -> dict[str, Any]:
    """The declared power analysis on a pilot's runs (``[design.seeds]``).

    Per pilot world and pair of contenders, the SD of the paired differences of the primary
    metric over the pilot seeds; ``sd`` = their 75th percentile; ``seeds`` from
    :func:`seeds_for_margin` at ``alpha / pairs`` (Holm's first step), ``margin``, ``power``,
    at least 3 and at most ``cap``. Returns those numbers and the per-pair table.
    """
    plan = design.get("seeds", {})
    metric = str(design["primary"])
    contenders = list(design["contenders"])
    ok = runs[runs["status"] == "ok"]
    rows = []
    for column, group in ok.groupby("column", sort=True):
        by = {p: g.set_index("seed")[metric].astype(float) for p, g in group.groupby("policy")}
        for a, b in itertools.combinations(contenders, 2):
            if a in by and b in by:
                x, y = _aligned(by[a], by[b])
                if x.size >= 2:
                    rows.append({"column": column, "a": a, "b": b, "n": int(x.size),
                                 "mean": float((x - y).mean()),
                                 "sd": float(np.std(x - y, ddof=1))})
    table = pd.DataFrame(rows, columns=["column", "a", "b", "n", "mean", "sd"])
    if table.empty:
        raise ValueError("the pilot has no pair of contenders with two seeds")
    sd = float(np.percentile(table["sd"], 75))
    family = len(contenders) * (len(contenders) - 1) // 2
    seeds, capped = seeds_for_margin(sd, margin=float(design["margin"]),
                                     alpha=float(design.get("alpha", 0.05)),
                                     power=float(plan.get("power", 0.8)), family=family,
                                     floor=3, cap=int(plan.get("cap", 10)))
    return {"sd": sd, "seeds": seeds, "capped": capped, "family": family, "pairs": table}


# --- the rule ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """At most one cut on each of at most two descriptors; each regime predicts a policy.

    ``names``: the descriptors cut (none: the constant); ``cuts``: one per name; ``predict``:
    regime key (``"lo"``/``"hi"`` per cut, comma-joined; ``""`` for the constant) -> policy.
    """

    names: tuple[str, ...]
    cuts: tuple[float, ...]
    predict: dict[str, str]
    constant: str

    def regime(self, row: Mapping[str, Any]) -> str:
        """The key of ``row``'s regime (``""`` for the constant; NaN descriptor: ``"?"``)."""
        one = _Worlds({n: np.array([float(row.get(n, math.nan))]) for n in self.names},
                      np.array([""]), [set()])
        return _keys(one, self.names, self.cuts)[0]

    def __call__(self, row: Mapping[str, Any]) -> str:
        """The policy predicted for a world with descriptors ``row`` (the constant's if unknown)."""
        return self.predict.get(self.regime(row), self.constant)

    @property
    def regimes(self) -> int:
        """Number of regimes (1: the constant)."""
        return 2 ** len(self.names)

    def text(self, labels: Mapping[str, str] | None = None) -> str:
        """The rule in words: each regime's condition and policy."""
        labels = labels or {}
        if not self.names:
            return f"**{self.constant}** everywhere"
        parts = []
        for key, policy in sorted(self.predict.items(),
                                  key=lambda kv: kv[0].replace("lo", "0").replace("hi", "1")):
            cond = []
            for name, cut, side in zip(self.names, self.cuts, key.split(","), strict=True):
                op = ">" if side == "hi" else "<="
                cond.append(f"{labels.get(name, name)} {op} {_fmt_cut(cut)}")
            parts.append(f"**{policy}** where " + " and ".join(cond))
        if len(self.predict) < self.regimes:  # a regime without a training world
            parts.append(f"**{self.constant}** (the constant) elsewhere")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``regime_rule.json``'s ``rule``)."""
        return {"names": list(self.names), "cuts": list(self.cuts),
                "predict": dict(self.predict), "constant": self.constant}


def _fmt_cut(cut: float) -> str:
    return f"{cut:.3g}" if abs(cut) < 100 else f"{cut:.0f}"


def _cuts(name: str, values: np.ndarray) -> list[float]:
    v = np.unique(values[np.isfinite(values)])
    if name in LOG_DESCRIPTORS and (v > 0).all():
        return [float(math.sqrt(a * b)) for a, b in itertools.pairwise(v)]
    return [float(a + b) / 2 for a, b in itertools.pairwise(v)]


def _majority(targets: Sequence[str], order: Sequence[str], prefer: str = "") -> str:
    counts = Counter(targets)
    top = max(counts.values())
    tied = [p for p in counts if counts[p] == top]
    if prefer in tied:
        return prefer
    return min(tied, key=lambda p: (order.index(p) if p in order else len(order), p))


@dataclass(frozen=True)
class _Worlds:
    """A training table as arrays, read once (the fit runs thousands of times)."""

    values: dict[str, np.ndarray]
    targets: np.ndarray
    not_beaten: list[set[str]]

    @classmethod
    def of(cls, frame: pd.DataFrame, names: Sequence[str]) -> _Worlds:
        beaten = frame["not_beaten"] if "not_beaten" in frame else pd.Series([""] * len(frame))
        return cls({n: frame[n].to_numpy(float) for n in names if n in frame},
                   frame["target"].astype(str).to_numpy(),
                   [set(str(x).split(";")) for x in beaten])

    def take(self, rows: np.ndarray) -> _Worlds:
        return _Worlds({n: v[rows] for n, v in self.values.items()}, self.targets[rows],
                       [self.not_beaten[i] for i in np.flatnonzero(rows)]
                       if rows.dtype == bool else [self.not_beaten[i] for i in rows])


def _keys(worlds: _Worlds, names: tuple[str, ...], cuts: tuple[float, ...]) -> list[str]:
    n = len(worlds.targets)
    if not names:
        return [""] * n
    parts = []
    for name, cut in zip(names, cuts, strict=True):
        v = worlds.values[name]
        parts.append(np.where(~np.isfinite(v), "?", np.where(v > cut, "hi", "lo")))
    return [",".join(p[i] for p in parts) if all(p[i] != "?" for p in parts) else "?"
            for i in range(n)]


def _fit_arrays(worlds: _Worlds, names: tuple[str, ...], cuts: tuple[float, ...],
                constant: str, order: Sequence[str]) -> tuple[Rule, int]:
    keys = _keys(worlds, names, cuts)
    groups: dict[str, list[str]] = {}
    for key, target in zip(keys, worlds.targets, strict=True):
        groups.setdefault(key, []).append(str(target))
    predict = {k: _majority(t, order, constant) for k, t in groups.items() if k != "?"}
    hits = sum(predict.get(k, constant) == t for k, t in zip(keys, worlds.targets, strict=True))
    return Rule(names, cuts, predict, constant), int(hits)


def _fit(worlds: _Worlds, descriptors: Sequence[str], order: Sequence[str]) -> Rule:
    if not len(worlds.targets):
        raise ValueError("no training world to fit a rule on")
    constant = _majority(list(map(str, worlds.targets)), order)
    best, hits = _fit_arrays(worlds, (), (), constant, order)
    best_key = (hits, -1)
    names_all = [d for d in descriptors if d in worlds.values]
    candidates: list[tuple[str, ...]] = [(d,) for d in names_all]
    candidates += list(itertools.combinations(names_all, 2))
    for names in candidates:
        grids = [_cuts(n, worlds.values[n]) for n in names]
        for cuts in itertools.product(*grids):
            rule, hits = _fit_arrays(worlds, names, tuple(cuts), constant, order)
            key = (hits, -rule.regimes)
            if key > best_key:  # strict: earlier names and lower cuts win ties
                best, best_key = rule, key
    return best


def _hits(rule: Rule, worlds: _Worlds) -> tuple[int, int]:
    keys = _keys(worlds, rule.names, rule.cuts)
    said = [rule.predict.get(k, rule.constant) for k in keys]
    exact = sum(s == t for s, t in zip(said, worlds.targets, strict=True))
    contender = sum(s in nb for s, nb in zip(said, worlds.not_beaten, strict=True))
    return int(exact), int(contender)


def rule_hits(rule: Rule, frame: pd.DataFrame) -> tuple[int, int]:
    """``(exact, contender)`` hits on ``frame``.

    Exact: the prediction is the world's ``target``. Contender: it is among the world's
    ``not_beaten`` (``;``-joined).
    """
    return _hits(rule, _Worlds.of(frame, rule.names))


def fit_rule(frame: pd.DataFrame, *, descriptors: Sequence[str],
             order: Sequence[str]) -> Rule:
    """The declared rule fitted on ``frame`` (one row per training world).

    Columns: the ``descriptors`` and ``target`` (the world's best policy). Candidates: the
    majority constant, and every choice of one or two descriptors with one cut each between
    adjacent distinct values (:data:`LOG_DESCRIPTORS` geometrically midway); each regime
    predicts its majority target (ties: the constant's policy, then ``order``). Chosen: most
    exact hits, then fewest regimes, then the earlier descriptors, then the lower cuts.
    """
    if frame.empty:
        raise ValueError("no training world to fit a rule on")
    return _fit(_Worlds.of(frame, descriptors), descriptors, order)


def leave_one_out(frame: pd.DataFrame, *, descriptors: Sequence[str],
                  order: Sequence[str]) -> dict[str, int]:
    """Refit on all worlds but one, predict that one; the constant refit the same way.

    Returns the hits over the worlds: ``rule``/``constant`` exact, ``rule_contender``/
    ``constant_contender``, and ``n``.
    """
    worlds = _Worlds.of(frame, descriptors)
    n = len(frame)
    out = {"rule": 0, "constant": 0, "rule_contender": 0, "constant_contender": 0, "n": n}
    for i in range(n):
        keep = np.ones(n, dtype=bool)
        keep[i] = False
        rule = _fit(worlds.take(keep), descriptors, order)
        const = Rule((), (), {"": rule.constant}, rule.constant)
        test = worlds.take(~keep)
        for name, r in (("rule", rule), ("constant", const)):
            exact, contender = _hits(r, test)
            out[name] += exact
            out[name + "_contender"] += contender
    return out


def permutation_p(frame: pd.DataFrame, *, descriptors: Sequence[str], order: Sequence[str],
                  permutations: int = 1000, seed: int = 0) -> float:
    """P(a rule refit on shuffled targets scores >= the observed training hits).

    The targets are permuted over the worlds (numpy's ``default_rng(seed)``), the rule refit on
    each permutation; the p-value counts the observed fit itself, ``(1 + k) / (1 + B)``.
    """
    worlds = _Worlds.of(frame, descriptors)
    observed = _hits(_fit(worlds, descriptors, order), worlds)[0]
    rng = np.random.default_rng(seed)
    at_least = 0
    for _ in range(permutations):
        shuffled = _Worlds(worlds.values, rng.permutation(worlds.targets), worlds.not_beaten)
        at_least += _hits(_fit(shuffled, descriptors, order), shuffled)[0] >= observed
    return (1 + at_least) / (1 + permutations)


def clopper_pearson(k: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of ``k`` hits in ``n`` (scipy ``binomtest``); NaN for n = 0."""
    from scipy import stats

    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


# --- a user's world against the published answer (``--describe WORLD --rule STUDY``) ----------
def _scaled(name: str, value: float) -> float:
    if name in LOG_DESCRIPTORS:
        return math.log10(value) if value > 0 else math.nan
    return value


def recommend(answer: Mapping[str, Any], descriptors: Mapping[str, float]) -> dict[str, Any]:
    """What a published answer (``regime_rule.json``, schema 3) says for one world.

    Each metric's rule's policy (and whether that rule beat the constant out of sample), the
    descriptors outside the studied grid's range, and the nearest studied world (descriptors
    scaled to the grid's range, contacts and samples on a log scale) with its verdicts.
    """
    names = list(answer["ranges"])
    out: dict[str, Any] = {"rules": {}, "outside": [], "nearest": None}
    for metric, r in answer["rules"].items():
        rule = Rule(tuple(r["names"]), tuple(float(c) for c in r["cuts"]),
                    {str(k): str(v) for k, v in r["predict"].items()}, str(r["constant"]))
        out["rules"][metric] = {"policy": rule(descriptors),
                                "beats_constant": bool(r["beats_constant_out_of_sample"]),
                                "constant": rule.constant}
    for name in names:
        low, high = answer["ranges"][name]
        v = float(descriptors.get(name, math.nan))
        if math.isfinite(v) and not low <= v <= high:
            out["outside"].append((name, v, low, high))
    spans = {}
    for name in names:
        low, high = (_scaled(name, float(x)) for x in answer["ranges"][name])
        spans[name] = (high - low) if math.isfinite(high - low) and high > low else 1.0
    best, best_d = None, math.inf
    for world in answer["worlds"]:
        total = 0.0
        for name in names:
            a = _scaled(name, float(descriptors.get(name, math.nan)))
            b = _scaled(name, float(world.get(name) if world.get(name) is not None else math.nan))
            if math.isfinite(a) and math.isfinite(b):
                gap = (a - b) / spans[name]
                total += gap * gap  # a product overflows to inf; ** would raise
        if total < best_d:
            best, best_d = world, total
    out["nearest"] = best
    return out


def load_answer(path: str) -> dict[str, Any] | None:
    """A schema-3 ``regime_rule.json`` (a path or a shipped study's name); None if older.

    A file that says ``"schema": 3`` (or another schema) is checked whole
    (:func:`check_answer`): damaged, it is one :class:`~mobidfl.errors.ConfigError` naming it,
    never a recommendation of a policy that does not exist. A file without a schema is left
    to :func:`mobidfl.analysis.regime_map.load_rule` (which refuses what it cannot read).
    """
    import json
    from importlib import resources
    from pathlib import Path

    from mobidfl.analysis.study import PACKAGE, study_names
    from mobidfl.errors import ConfigError

    where = str(path)
    if path in study_names():
        shipped = resources.files(PACKAGE).joinpath(f"{path}.rule.json")
        if not shipped.is_file():
            return None
        text = shipped.read_text(encoding="utf-8")
        where = str(shipped)
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or "schema" not in data:
        return None
    try:
        if data["schema"] != 3:
            raise ValueError(f"schema {data['schema']!r} (this MobiDFL reads schema 3, or the "
                             "unversioned rule)")
        check_answer(data)
    except ValueError as exc:
        raise ConfigError("--rule", where, f"a regime_rule.json written by MobiDFL ({exc})"
                          ) from None
    return data


VERDICT_NUMBERS = ("lead_pp", "low_pp", "high_pp")
"""A studied world's verdict numbers in a schema-3 answer (null where not defined)."""


def check_answer(data: Mapping[str, Any]) -> None:
    """Raise ValueError saying what is wrong with a parsed schema-3 answer, if anything.

    What :func:`recommend` and ``--describe --rule`` read: ``study``; per metric a rule whose
    cuts are finite numbers, one per descriptor named, whose regimes and constant predict
    registered policies; each descriptor's studied range (finite, low <= high); each studied
    world's descriptors (finite or null) and verdicts.
    """
    from mobidfl.analysis.values import finite_number, registered_policy

    if not isinstance(data.get("study"), str):
        raise ValueError("no 'study' name")
    ranges = data.get("ranges")
    if not isinstance(ranges, dict):
        raise ValueError("no 'ranges' object")
    for name, span in ranges.items():
        if not (isinstance(span, list) and len(span) == 2):
            raise ValueError(f"ranges[{name!r}] is not [low, high]")
        low, high = (finite_number(v, f"ranges[{name!r}]") for v in span)
        if low > high:
            raise ValueError(f"ranges[{name!r}] = {span!r} has low > high")
    rules = data.get("rules")
    if not isinstance(rules, dict):
        raise ValueError("no 'rules' object")
    for metric, rule in rules.items():
        at = f"rules[{metric!r}]"
        if not isinstance(rule, dict):
            raise ValueError(f"{at} is not an object")
        names, cuts, predict = rule.get("names"), rule.get("cuts"), rule.get("predict")
        if not (isinstance(names, list) and len(names) <= 2
                and all(isinstance(n, str) and n in ranges for n in names)):
            raise ValueError(f"{at}.names = {names!r} is not at most two of the ranges' "
                             "descriptors")
        if not (isinstance(cuts, list) and len(cuts) == len(names)):
            raise ValueError(f"{at}.cuts = {cuts!r} is not one cut per name")
        for i, cut in enumerate(cuts):
            finite_number(cut, f"{at}.cuts[{i}]")
        keys = {",".join(k) for k in itertools.product(("lo", "hi"), repeat=len(names))}
        if not isinstance(predict, dict) or not predict:
            raise ValueError(f"{at}.predict is not an object of regimes")
        for key, policy in predict.items():
            if key not in keys:
                raise ValueError(f"{at}.predict has the regime {key!r} (allowed: "
                                 + ", ".join(sorted(keys)) + ")")
            registered_policy(policy, f"{at}.predict[{key!r}]")
        registered_policy(rule.get("constant"), f"{at}.constant")
        if not isinstance(rule.get("beats_constant_out_of_sample"), bool):
            raise ValueError(f"{at}.beats_constant_out_of_sample is not true or false")
    worlds = data.get("worlds")
    if not isinstance(worlds, list):
        raise ValueError("no 'worlds' list")
    for i, world in enumerate(worlds):
        at = f"worlds[{i}]"
        if not (isinstance(world, dict) and isinstance(world.get("variant"), str)):
            raise ValueError(f"{at} has no variant")
        for name in ranges:
            if world.get(name) is not None:
                finite_number(world[name], f"{at}.{name}")
        for metric in ("auc_acc", "budget_acc"):
            verdict = world.get(metric)
            if not (isinstance(verdict, dict) and isinstance(verdict.get("kind"), str)
                    and isinstance(verdict.get("best"), str)):
                raise ValueError(f"{at}.{metric} is not a verdict (kind, best)")
            if verdict["best"]:
                registered_policy(verdict["best"], f"{at}.{metric}.best")
            for key in VERDICT_NUMBERS:
                if verdict.get(key) is not None:
                    finite_number(verdict[key], f"{at}.{metric}.{key}")
