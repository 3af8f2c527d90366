"""The benchmark's statistics (analysis/bench_stats.py): numbers checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mobidfl.analysis.bench_stats import (
    EQUIVALENCE_MARGIN,
    across_columns,
    compare_column,
    detectable_difference,
    equivalence,
    first_time_at,
    holm,
    last_value,
    normalised,
    paired_difference,
    run_numbers,
    score,
    seeds_needed,
    t_interval,
    time_to_target,
)


def test_t_interval_is_student_t_over_the_sample_std():
    interval = t_interval([1.0, 2.0, 3.0])
    # t_{0.975, 2} = 4.302653, s = 1, n = 3
    assert interval.mean == pytest.approx(2.0)
    assert interval.half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert interval.n == 3


def test_t_interval_drops_non_finite_and_has_no_spread_for_one_value():
    assert t_interval([0.5, float("nan")]).n == 1
    assert math.isnan(t_interval([0.5]).half)
    assert t_interval([0.5]).mean == 0.5
    assert t_interval([]).n == 0 and t_interval([]).text() == "n/a"
    assert t_interval([1.0, 3.0]).text(digits=1) == "2.0 ± 12.7"  # t_{0.975, 1} s / sqrt 2


def test_paired_difference_is_the_paired_t_test():
    a = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0], index=[0, 1, 2, 3, 4])
    b = pd.Series([0.0, 1.0, 2.0, 3.0, 5.0], index=[0, 1, 2, 3, 4])
    test = paired_difference(a, b)
    # differences 1, 1, 1, 1, 0: mean 0.8, s = 0.4472, t = 0.8 / (0.4472 / sqrt 5) = 4.0
    assert test.mean == pytest.approx(0.8)
    # p = 2 sf_t4(4.0) = 0.01613009 (scipy, float64, ~1e-15): the 6-decimal hand value is
    # within half its last digit, 5e-7 (was 1e-5, which would pass 0.01614)
    assert test.p == pytest.approx(0.016130, abs=5e-7)
    assert test.distinguishable
    assert test.n == 5


def test_paired_difference_pairs_by_seed_and_handles_no_spread():
    a = pd.Series([0.5, 0.6, np.nan], index=[3, 1, 2])
    b = pd.Series([0.4, 0.5, 0.9], index=[1, 3, 2])
    test = paired_difference(a, b)  # seed 3: 0.5 - 0.5, seed 1: 0.6 - 0.4; seed 2 dropped
    assert test.n == 2 and test.mean == pytest.approx(0.1)
    # +0.1 on every seed: no spread. This test used to assert p = 0 and "distinguishable"
    # from two seeds (the zero-variance shortcut the review found); the exact sign-flip test
    # says p = 2 / 2^2 = 0.5: two seeds that agree cannot show a difference.
    same = paired_difference(pd.Series([0.2, 0.3]), pd.Series([0.1, 0.2]))
    assert same.p == pytest.approx(0.5) and not same.distinguishable
    assert same.method == "sign-flip" and same.mean == pytest.approx(0.1)
    equal = paired_difference(pd.Series([0.2, 0.3]), pd.Series([0.2, 0.3]))
    assert equal.p == 1.0 and not equal.distinguishable
    one = paired_difference(pd.Series([0.2]), pd.Series([0.1]))
    assert one.n == 1 and not one.distinguishable


def test_normalised_is_zero_at_local_and_one_at_central_per_seed():
    low = pd.Series([0.2, 0.4], index=[0, 1])
    high = pd.Series([0.8, 0.4], index=[0, 1])
    value = pd.Series([0.5, 0.5], index=[0, 1])
    out = normalised(value, low, high)
    assert out[0] == pytest.approx(0.5)
    assert math.isnan(out[1])  # local == central: no scale on that seed
    assert normalised(low, low, high)[0] == 0.0
    assert normalised(high, low, high)[0] == 1.0


def test_first_time_and_last_value_skip_steps_without_evaluation():
    table = pd.DataFrame({"time_s": [120.0, 240.0, 360.0, 480.0],
                          "acc_mean": [np.nan, 0.5, 0.7, np.nan]})
    assert first_time_at(table, 0.6) == 360.0
    assert first_time_at(table, 0.5) == 240.0
    assert math.isnan(first_time_at(table, 0.9))
    assert math.isnan(first_time_at(table, float("nan")))
    assert last_value(table, "acc_mean") == 0.7
    assert math.isnan(last_value(table, "missing"))


def test_run_numbers_sum_link_columns_over_steps_per_agent():
    table = pd.DataFrame({
        "time_s": [120.0, 240.0], "acc_mean": [0.3, 0.4], "acc_p10": [0.1, 0.2],
        "bytes_sent": [1000.0, 3000.0], "energy_j": [2.0, 6.0],
    })
    numbers = run_numbers(table, agents=4)
    assert numbers == {"final_acc": 0.4, "p10_acc": 0.2, "auc_acc": pytest.approx(0.35),
                       "last3_acc": pytest.approx(0.35), "bytes_per_agent": 1000.0,
                       "energy_per_agent": 2.0, "end_s": 240.0}
    older = run_numbers(table.drop(columns=["bytes_sent", "energy_j"]), agents=4)
    assert math.isnan(older["bytes_per_agent"]) and math.isnan(older["energy_per_agent"])
    # a step whose bytes are unknown (a policy that did not count them) is no 0
    unknown = run_numbers(table.assign(bytes_sent=[1000.0, math.nan]), agents=4)
    assert math.isnan(unknown["bytes_per_agent"])


def test_a_constant_difference_gets_the_exact_sign_flip_p_not_zero():
    a = pd.Series([0.6, 0.7, 0.65, 0.8, 0.75])
    test = paired_difference(a, a - 0.1)  # -0.1 ... +0.1 on each of 5 seeds
    # all 2^5 = 32 sign patterns; only all-plus and all-minus are as extreme: p = 2 / 32
    assert test.p == pytest.approx(2 / 32)
    # independent cross-check: Wilcoxon's exact signed-rank test of five positive differences
    assert test.p == pytest.approx(stats.wilcoxon([0.1] * 5).pvalue)
    assert not test.distinguishable  # 0.0625 >= 0.05: five agreeing seeds are not enough
    six = paired_difference(pd.Series(np.arange(6.0)), pd.Series(np.arange(6.0) - 0.1))
    assert six.p == pytest.approx(2 / 64) and six.distinguishable


def test_holm_adjusts_the_finite_p_values_step_down():
    adjusted, rejected = holm([0.01, 0.04, 0.03, float("nan")])
    # m = 3 finite: sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03, max(0.03, 2 x 0.03) = 0.06,
    # max(0.06, 1 x 0.04) = 0.06; the NaN is not a test and stays out of the family
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(adjusted[3])
    assert rejected.tolist() == [True, False, False, False]
    # Bonferroni bounds Holm from above: m p >= Holm's adjusted p
    assert all(3 * p >= q - 1e-12 for p, q in zip([0.01, 0.04, 0.03], adjusted[:3],
                                                  strict=True))


def test_equivalence_is_tost_within_the_margin():
    assert EQUIVALENCE_MARGIN == 0.02
    d = pd.Series([0.01, 0.00, 0.02, 0.01, 0.01])
    zero = pd.Series([0.0] * 5)
    # mean 0.01, s^2 = (0 + 0.0001 + 0.0001 + 0 + 0) / 4 = 0.000025 x 2, s = 0.0070711,
    # se = s / sqrt 5 = 0.0031623; upper test t = (0.01 - 0.02) / se = -3.1623 (df 4),
    # lower test t = (0.01 + 0.02) / se = 9.49: TOST p = the larger = P(T_4 < -3.1623)
    se = math.sqrt(0.0002 / 4) / math.sqrt(5)
    expected = max(stats.t.cdf((0.01 - 0.02) / se, 4), stats.t.sf((0.01 + 0.02) / se, 4))
    # scipy's float64 t CDF (~1e-15): 0.01705471, within half the hand value's last digit
    # (6 decimals: 5e-7; was 1e-5)
    assert expected == pytest.approx(0.017055, abs=5e-7)
    assert equivalence(d, zero) == pytest.approx(expected, rel=1e-6)
    # without spread: exact one-sided sign-flip tests, 1 / 2^5 inside the margin, 1 outside
    assert equivalence(pd.Series([0.01] * 5), zero) == pytest.approx(1 / 32)
    assert equivalence(pd.Series([0.05] * 5), zero) == pytest.approx(1.0)
    assert math.isnan(equivalence(pd.Series([0.01]), pd.Series([0.0])))


def _column() -> dict[str, pd.Series]:
    seeds = [0, 1, 2, 3, 4]
    a = pd.Series([0.80, 0.82, 0.81, 0.83, 0.84], index=seeds)
    return {
        "a": a,
        "b": a - pd.Series([0.001, -0.001, 0.002, 0.0, -0.002], index=seeds),  # level
        "c": a - pd.Series([0.10, 0.12, 0.11, 0.09, 0.08], index=seeds),  # worse
        "d": a + pd.Series([-0.15, 0.12, -0.10, 0.08, -0.02], index=seeds),  # noisy
    }


def test_compare_column_tests_every_pair_with_holm():
    finals = _column()
    out = compare_column(finals)
    assert out.best == "a" and out.selection == "all pairs"
    assert out.family == 6  # 4 policies: 4 x 3 / 2 pairs, not the 3 against the best
    raw = {}
    for x, y in [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]:
        diff = (finals[x] - finals[y]).to_numpy()
        t = diff.mean() / (diff.std(ddof=1) / math.sqrt(5))  # the paired t statistic
        raw[(x, y)] = 2 * stats.t.sf(abs(t), 4)
    # Holm by hand: sorted p_(1..6), adjusted_(k) = max over j <= k of (6 - j + 1) p_(j)
    ordered = sorted(raw, key=raw.get)
    adjusted, running = {}, 0.0
    for k, pair in enumerate(ordered):
        running = max(running, min(1.0, (6 - k) * raw[pair]))
        adjusted[pair] = running
    c = out.against_best["c"]
    assert c.test.mean == pytest.approx(-0.10) and c.test.p == pytest.approx(raw[("a", "c")])
    assert c.p_holm == pytest.approx(adjusted[("a", "c")]) and c.verdict == "worse"
    b = out.against_best["b"]
    assert b.p_holm == pytest.approx(adjusted[("a", "b")]) and b.verdict == "level"
    assert b.p_level_holm < 0.05 <= b.p_holm
    d = out.against_best["d"]
    assert d.verdict == "undecided"  # neither shown worse nor shown within the margin
    assert d.p_holm >= 0.05 and d.p_level_holm >= 0.05
    assert set(out.contenders) == {"a", "b", "d"}  # c is beaten (by a and by b)


def test_compare_column_chooses_on_tuning_seeds_when_given():
    finals = _column()
    tuning = {"a": pd.Series([0.70, 0.71]), "b": pd.Series([0.75, 0.74]),
              "c": pd.Series([0.60, 0.61]), "d": pd.Series([0.5, 0.6])}
    out = compare_column(finals, tuning=tuning)
    assert out.best == "b" and out.selection == "tuning seeds"  # b best on other seeds
    assert out.family == 3  # only the m - 1 tests against b: the choice used other seeds
    assert out.against_best["a"].verdict == "level"
    assert out.against_best["a"].test.mean == pytest.approx(0.0, abs=1e-3)
    assert compare_column({}).best == ""


def test_compare_column_states_the_detectable_difference():
    finals = _column()
    out = compare_column(finals)
    # pooled sd of the paired differences with the best: sqrt(mean of the three variances)
    var = [(finals["a"] - finals[p]).var(ddof=1) for p in ("b", "c", "d")]
    assert out.sd == pytest.approx(math.sqrt(sum(var) / 3))
    assert out.n == 5
    assert out.detectable == pytest.approx(detectable_difference(out.sd, 5))
    assert out.detectable_holm > out.detectable  # alpha / 6 needs a larger difference


def test_detectable_difference_has_80_percent_power():
    sd, n = 0.05, 5
    delta = detectable_difference(sd, n)
    # independent check with the noncentral t: power = P(|T'| > t_crit), T' ~ nct(4, nc)
    crit = stats.t.ppf(0.975, n - 1)
    nc = delta / sd * math.sqrt(n)
    power = stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc)
    # solve_power's root finder stops at power 0.80000005 (5.1e-8 off, scipy's float64 nct,
    # the same on every CPU): 1e-6 keeps 20 x (was 1e-4)
    assert power == pytest.approx(0.80, abs=1e-6)
    assert delta / sd == pytest.approx(1.682, abs=1e-3)  # 5 seeds: 1.68 sd of the difference
    assert detectable_difference(sd, n, alpha=0.05 / 6) > delta
    assert math.isnan(detectable_difference(sd, 1)) and detectable_difference(0.0, 5) == 0.0


def test_seeds_needed_for_a_two_point_half_width():
    # sd 0.02: n = 6 gives t_{0.975,5} 0.02 / sqrt 6 = 2.5706 x 0.02 / 2.4495 = 0.02099 > 0.02,
    # n = 7 gives 2.4469 x 0.02 / 2.6458 = 0.01850 <= 0.02
    assert seeds_needed(0.02) == 7
    assert 2.5706 * 0.02 / math.sqrt(6) > 0.02 >= 2.4469 * 0.02 / math.sqrt(7)
    # sd 0.05: even 10 seeds give 2.2622 x 0.05 / sqrt 10 = 0.0358: the cap
    assert seeds_needed(0.05) == 10
    assert seeds_needed(0.0) == 2 and seeds_needed(float("nan")) == 10
    # a higher cap: n = 20 gives 2.0930 x 0.05 / sqrt 20 = 0.0234 > 0.02, still the cap
    assert seeds_needed(0.05, cap=20) == 20
    # sd 0.03: n = 11 gives 2.2281 x 0.03 / sqrt 11 = 0.02015 > 0.02, n = 12 gives
    # 2.2010 x 0.03 / sqrt 12 = 0.01906: 12 with room, the default cap otherwise
    assert seeds_needed(0.03, cap=20) == 12 and seeds_needed(0.03) == 10


def test_score_only_where_central_fedavg_stands_clear_of_local():
    low = pd.Series([0.20, 0.30, 0.25])
    high = pd.Series([0.80, 0.85, 0.80])
    # gap 0.60, 0.55, 0.55: mean 0.5667, s = 0.02887, half = 4.3027 x 0.02887 / sqrt 3
    # = 0.0717, lower bound 0.495 > 0.05: the score is defined
    ok = score(pd.Series([0.50, 0.575, 0.525]), low, high)
    assert ok.reason == ""
    # per seed (0.5 - 0.2) / 0.6 = 0.5, (0.575 - 0.3) / 0.55 = 0.5, (0.525 - 0.25) / 0.55 = 0.5
    assert ok.interval.mean == pytest.approx(0.5) and ok.interval.half == pytest.approx(0.0)
    assert score(low, low, high).interval.mean == pytest.approx(0.0)
    # gap 0.03, 0.08: mean 0.055, half = 12.706 x 0.035355 / sqrt 2 = 0.3177, lower -0.26
    noisy = score(pd.Series([0.51, 0.55]), pd.Series([0.50, 0.52]), pd.Series([0.53, 0.60]))
    assert math.isnan(noisy.interval.mean)
    assert "lower bound -0.263" in noisy.reason
    assert "fewer than two seeds" in score(low[:1], low[:1], high[:1]).reason
    assert math.isnan(score(low[:1], low[:1], high[:1]).interval.mean)


def test_time_to_target_counts_the_seeds_that_never_reach_it():
    times = [np.nan, 100.0, 200.0, np.nan, 300.0]
    reach = time_to_target(times)
    # never = +inf: sorted 100, 200, 300, inf, inf -> median 300 (the mean over the three
    # that reached it would say 200, hiding the two that never did)
    assert (reach.reached, reach.n, reach.median) == (3, 5, 300.0)
    assert (reach.fastest, reach.slowest) == (100.0, 300.0)
    assert reach.text(factor=1 / 100, digits=1) == "3.0 (3/5)"
    one = time_to_target([np.nan, 100.0, np.nan, np.nan, np.nan])  # the review's one of five
    assert one.median == math.inf and one.text() == "never (1/5)"
    assert time_to_target([100.0, 300.0]).median == 200.0
    assert time_to_target([100.0, np.nan]).median == math.inf  # half never: no median time
    assert time_to_target([]).text() == "n/a"


def test_a_column_grows_to_its_widest_cell_and_stops_at_the_cap():
    """seeds_for_column: the largest seeds_needed among the cells, never below what has run.

    By hand, with sd 0.02 and a ± 0.02 target: n = 6 gives t(0.975, 5) 0.02 / sqrt(6) =
    2.5706 x 0.008165 = 0.02099 > 0.02, and n = 7 gives 2.4469 x 0.007559 = 0.01850: 7 seeds.
    sd 0.01 needs 4 (n = 3: 4.3027 x 0.005774 = 0.0248; n = 4: 3.1824 x 0.005 = 0.0159)."""
    from mobidfl.analysis.bench_stats import seeds_for_column

    assert seeds_for_column([0.01], have=3) == 4
    assert seeds_for_column([0.01, 0.02], have=3) == 7
    assert seeds_for_column([0.01, 0.02], have=8) == 8  # never fewer than have run
    assert seeds_for_column([0.05], have=3) == 10  # 0.05 needs 15: the cap
    assert seeds_for_column([0.05], have=3, cap=6) == 6
    assert seeds_for_column([float("nan")], have=2, cap=5) == 5  # no spread known: the cap
    assert seeds_for_column([0.0, 0.0], have=2) == 2  # no spread: 2 already enough
    assert seeds_for_column([], have=3) == 3


def test_a_claim_across_columns_is_its_own_holm_family():
    # Prepare: two policies in two columns on three seeds; A loses 0.10, 0.12, 0.11 in
    # the changed world, B moves +0.05, -0.05, +0.01
    rows = []
    for seed, (a0, a1, b0, b1) in enumerate([(0.50, 0.40, 0.60, 0.65), (0.60, 0.48, 0.60, 0.55),
                                            (0.70, 0.59, 0.60, 0.61)]):
        rows += [{"column": "start", "policy": "A", "seed": seed, "final_acc": a0},
                 {"column": "moved", "policy": "A", "seed": seed, "final_acc": a1},
                 {"column": "start", "policy": "B", "seed": seed, "final_acc": b0},
                 {"column": "moved", "policy": "B", "seed": seed, "final_acc": b1}]
    # Execute
    table = across_columns(pd.DataFrame(rows), base="start", other="moved")
    a, b = (table.set_index("policy").loc[p] for p in ("A", "B"))
    # Assert, by hand: A's differences have mean -0.11 and sd 0.01, t = -0.11 / (0.01 /
    # sqrt 3) = -19.053 with 2 degrees of freedom, whose two-sided p is
    # 1 - |t| / sqrt(t^2 + 2) = 0.002743; Holm over the two policies doubles the smaller
    assert a["diff"] == pytest.approx(-0.11) and a["n"] == 3
    assert a["p"] == pytest.approx(0.002743, rel=1e-3)
    assert a["p_holm"] == pytest.approx(2 * 0.002743, rel=1e-3)
    assert a["direction"] == "lowers"
    assert b["diff"] == pytest.approx(0.01 / 3) and b["direction"] == "no claim"
    assert b["p_holm"] >= b["p"]
