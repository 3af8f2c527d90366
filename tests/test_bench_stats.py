"""The benchmark's statistics (analysis/bench_stats.py): numbers checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.bench_stats import (
    first_time_at,
    last_value,
    normalised,
    paired_difference,
    run_numbers,
    t_interval,
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
    assert test.p == pytest.approx(0.016130, abs=1e-5)
    assert test.distinguishable
    assert test.n == 5


def test_paired_difference_pairs_by_seed_and_handles_no_spread():
    a = pd.Series([0.5, 0.6, np.nan], index=[3, 1, 2])
    b = pd.Series([0.4, 0.5, 0.9], index=[1, 3, 2])
    test = paired_difference(a, b)  # seed 3: 0.5 - 0.5, seed 1: 0.6 - 0.4; seed 2 dropped
    assert test.n == 2 and test.mean == pytest.approx(0.1)
    same = paired_difference(pd.Series([0.2, 0.3]), pd.Series([0.1, 0.2]))
    assert same.p == 0.0 and same.distinguishable  # +0.1 on every seed
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
    assert numbers == {"final_acc": 0.4, "p10_acc": 0.2, "bytes_per_agent": 1000.0,
                       "energy_per_agent": 2.0, "end_s": 240.0}
    ideal = run_numbers(table.drop(columns=["bytes_sent", "energy_j"]), agents=4)
    assert math.isnan(ideal["bytes_per_agent"]) and math.isnan(ideal["energy_per_agent"])
