"""The pre-registered study's answer (analysis/answer.py) on hand-worked numbers: the byte
budget, merged arms, winner / level / undecided, the headroom gate, the power analysis, the
rule, its leave-one-out and permutation scores, and the binomial interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.answer import (
    Rule,
    add_budget_accuracy,
    clopper_pearson,
    duplicate_arms,
    fit_rule,
    headroom_bound,
    leave_one_out,
    permutation_p,
    rule_hits,
    seeds_for_margin,
    world_verdict,
)
from mobidfl.analysis.bench_stats import accuracy_within, curve_mean


def _s(*values: float) -> pd.Series:
    return pd.Series(values, index=range(len(values)), dtype=float)


def test_curve_mean_is_the_mean_over_evaluations_and_the_last_k():
    table = pd.DataFrame({"acc_mean": [np.nan, 0.2, np.nan, 0.4, np.nan, 0.9]})
    assert curve_mean(table) == pytest.approx(0.5)
    assert curve_mean(table, last=2) == pytest.approx(0.65)
    assert math.isnan(curve_mean(pd.DataFrame({"acc_mean": [np.nan]})))


def test_accuracy_within_a_budget_is_the_best_reached_before_it_is_spent():
    acc = np.array([0.3, 0.6, 0.5, 0.8])
    spent = np.array([10.0, 20.0, 30.0, 40.0])
    assert accuracy_within(acc, spent, 30.0) == 0.6  # best of the first three
    assert accuracy_within(acc, spent, 45.0) == 0.8
    assert math.isnan(accuracy_within(acc, spent, 5.0))  # over budget at once


def test_the_budget_is_the_payer_s_spend_on_the_same_world_and_seed():
    # Prepare: D-PSGD spent 20 MB per agent; caching spends 10 MB per evaluation
    runs = pd.DataFrame({"column": ["w"] * 2, "policy": ["dpsgd", "cached_lru"],
                         "seed": [0, 0], "status": ["ok", "ok"],
                         "bytes_per_agent": [20e6, 40e6]})
    curves = pd.DataFrame({
        "column": ["w"] * 4, "seed": [0] * 4,
        "policy": ["dpsgd", "dpsgd", "cached_lru", "cached_lru"],
        "acc_mean": [0.5, 0.6, 0.55, 0.9], "bytes_per_agent": [10e6, 20e6, 20e6, 40e6]})
    # Execute
    out = add_budget_accuracy(runs, curves).set_index("policy")
    # Assert: caching's 0.9 came after the budget; within it, 0.55
    assert out.loc["dpsgd", "budget_acc"] == 0.6
    assert out.loc["cached_lru", "budget_acc"] == 0.55
    assert out.loc["cached_lru", "budget_mb"] == 20.0


def test_identical_arms_are_merged_into_the_first():
    values = {"dpsgd": _s(0.5, 0.6), "mobility_aware": _s(0.5, 0.6), "psfl": _s(0.5, 0.7)}
    assert duplicate_arms(values) == {"mobility_aware": "dpsgd"}


def test_a_clear_winner_is_a_winner():
    # Three contenders 5 points apart with little spread: Holm over 3 pairs rejects both
    values = {"dpsgd": _s(0.80, 0.81, 0.79, 0.80, 0.805),
              "cached_lru": _s(0.85, 0.86, 0.84, 0.851, 0.856),
              "psfl": _s(0.70, 0.71, 0.69, 0.702, 0.7)}
    v = world_verdict(values, contenders=["dpsgd", "cached_lru", "psfl"], margin=0.02)
    assert (v.kind, v.best, v.not_beaten) == ("winner", "cached_lru", ("cached_lru",))
    assert v.lead == pytest.approx(0.8514 - 0.801)
    assert v.lead_low > 0


def test_arms_within_the_margin_are_level_and_noise_is_undecided():
    level = {"a": _s(0.800, 0.810, 0.790, 0.805), "b": _s(0.801, 0.809, 0.791, 0.806),
             "c": _s(0.799, 0.811, 0.789, 0.804)}
    v = world_verdict(level, contenders=["a", "b", "c"], margin=0.02)
    assert v.kind == "level"
    noisy = {"a": _s(0.70, 0.90, 0.80), "b": _s(0.85, 0.70, 0.78), "c": _s(0.72, 0.88, 0.75)}
    v = world_verdict(noisy, contenders=["a", "b", "c"], margin=0.02)
    assert v.kind == "undecided" and set(v.not_beaten) == {"a", "b", "c"}


def test_the_declared_test_is_the_paired_t_test_by_hand():
    from scipy import stats

    # a - b = (0.02, 0.03, 0.04): mean 0.03, sd 0.01, t = 0.03 / (0.01 / sqrt 3) = 5.196
    values = {"a": _s(0.52, 0.53, 0.54), "b": _s(0.50, 0.50, 0.50)}
    v = world_verdict(values, contenders=["a", "b"], margin=0.02)
    (pair,) = v.pairs
    assert pair.p == pytest.approx(2 * stats.t.sf(0.03 / (0.01 / math.sqrt(3)), 2))
    assert pair.p == pytest.approx(0.0351, abs=1e-4)
    assert v.kind == "winner"  # one pair: Holm's family of 1


def test_an_arm_over_budget_everywhere_is_left_out_and_one_left_wins_alone():
    values = {"dpsgd": _s(0.5, 0.6), "cached_lru": _s(np.nan, np.nan)}
    v = world_verdict(values, contenders=["dpsgd", "cached_lru"], margin=0.02)
    assert (v.kind, v.best, v.alone) == ("winner", "dpsgd", "the only arm with a value")


def test_the_headroom_bound_is_the_lower_t_bound_of_the_paired_gap():
    from scipy import stats

    oracle, best = _s(0.90, 0.91, 0.92), _s(0.85, 0.85, 0.85)  # gaps 0.05, 0.06, 0.07
    expected = 0.06 - stats.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)
    assert headroom_bound(oracle, best) == pytest.approx(expected)


def test_seeds_for_a_margin_follow_the_power_of_the_t_test_at_holm_s_first_step():
    from statsmodels.stats.power import TTestPower

    n, capped = seeds_for_margin(0.01, margin=0.02, alpha=0.05, power=0.8, family=3, cap=10)
    power = TTestPower().power
    assert power(effect_size=2.0, nobs=n, alpha=0.05 / 3, alternative="two-sided") >= 0.8
    assert power(effect_size=2.0, nobs=n - 1, alpha=0.05 / 3, alternative="two-sided") < 0.8 \
        or n == 3
    assert not capped
    assert seeds_for_margin(0.05, margin=0.02, alpha=0.05, power=0.8, family=3,
                            cap=6) == (6, True)


def _worlds(targets: list[str], contacts: list[float], skew: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"neighbours_per_step": contacts, "label_skew": skew,
                         "target": targets, "not_beaten": targets})


def test_a_rule_that_separates_the_worlds_is_found_with_its_cut():
    # psfl wins where contacts are high, cached_lru where they are low; skew is noise
    frame = _worlds(["cached_lru"] * 3 + ["psfl"] * 4, [0.05, 0.1, 1.0, 4.0, 9.0, 16.0, 25.0],
                    [0.1, 0.5, 0.8, 0.1, 0.5, 0.8, 0.5])
    rule = fit_rule(frame, descriptors=["neighbours_per_step", "label_skew"],
                    order=["dpsgd", "cached_lru", "psfl"])
    assert rule.names == ("neighbours_per_step",)
    assert rule.cuts == (pytest.approx(2.0),)  # geometric midway between 1 and 4
    assert rule_hits(rule, frame) == (7, 7)
    assert rule({"neighbours_per_step": 0.2}) == "cached_lru"


def test_with_one_policy_everywhere_the_rule_is_the_constant():
    frame = _worlds(["psfl"] * 5, [0.1, 1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4, 0.5])
    rule = fit_rule(frame, descriptors=["neighbours_per_step", "label_skew"], order=["psfl"])
    assert rule.names == () and rule.text() == "**psfl** everywhere"


def test_leave_one_out_and_permutation_see_a_real_pattern_and_not_noise():
    separable = _worlds(["a"] * 6 + ["b"] * 6, list(np.geomspace(0.05, 30, 12)),
                        [0.5] * 12)
    names, order = ["neighbours_per_step", "label_skew"], ["a", "b"]
    loo = leave_one_out(separable, descriptors=names, order=order)
    assert loo["rule"] >= 10 and loo["constant"] <= 6
    assert permutation_p(separable, descriptors=names, order=order, permutations=200) < 0.05
    # the same targets shuffled against the descriptors: no better than chance
    rng = np.random.default_rng(3)
    noise = separable.assign(target=rng.permutation(separable["target"].to_numpy()))
    noise = noise.assign(not_beaten=noise["target"])
    assert permutation_p(noise, descriptors=names, order=order, permutations=200) > 0.05


def test_clopper_pearson_matches_the_exact_binomial_bounds():
    from scipy import stats

    low, high = clopper_pearson(7, 10)
    assert low == pytest.approx(stats.beta.ppf(0.025, 7, 4))
    assert high == pytest.approx(stats.beta.ppf(0.975, 8, 3))
    assert all(math.isnan(x) for x in clopper_pearson(0, 0))


def test_a_rule_reads_as_words_and_unknown_descriptors_fall_back_to_the_constant():
    rule = Rule(("neighbours_per_step",), (2.0,), {"lo": "cached_lru", "hi": "psfl"}, "psfl")
    assert rule.text() == ("**cached_lru** where neighbours_per_step <= 2; "
                           "**psfl** where neighbours_per_step > 2")
    assert rule({"neighbours_per_step": float("nan")}) == "psfl"


def test_seeds_for_a_large_effect_where_the_two_sided_power_is_nan():
    from scipy import stats

    # sd 0.0038, margin 0.02: effect 5.25; statsmodels' two-sided power is NaN at n = 4
    # (scipy's nct.cdf of the far tail); the near tail alone is 0.9946 there, 0.7495 at 3
    sd = 0.003808064644515036
    n, capped = seeds_for_margin(sd, margin=0.02, alpha=0.05, power=0.8, family=3, cap=6)
    assert (n, capped) == (4, False)
    near = stats.nct.sf(stats.t.isf(0.05 / 6, 3), 3, 0.02 / sd * 2.0)
    assert near == pytest.approx(0.9946, abs=1e-4)
