"""analysis/stats.py: the one mean ± std convention (sample std, ddof = 1)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mobidfl.analysis.stats import format_mean_std, mean_std, sample_std


def test_mean_std_uses_the_sample_standard_deviation():
    # Prepare: 1, 2, 3: mean 2, sample std 1 (population std would be 0.816)
    values = [1.0, 2.0, 3.0]
    # Execute
    text = mean_std(values, digits=3)
    # Assert
    assert text == "2.000 ± 1.000"
    assert sample_std(values) == np.std(values, ddof=1) == 1.0


def test_mean_std_scales_signs_and_pads():
    # Prepare: accuracies as fractions in a pandas Series
    values = pd.Series([0.801, 0.812, 0.823])
    # Execute
    percent = mean_std(values, factor=100, digits=1)
    signed = mean_std(values, factor=100, digits=1, signed=True, width=7)
    # Assert: factor scales mean and std alike; width pads the mean only
    assert percent == "81.2 ± 1.1"
    assert signed == "  +81.2 ± 1.1"


def test_one_value_has_no_spread_and_no_value_is_na():
    # Prepare / Execute
    one = mean_std([0.5, float("nan")], digits=2)
    none = mean_std([float("nan")], digits=2)
    empty = mean_std([])
    # Assert: NaN is dropped; one finite value prints the mean alone
    assert one == "0.50"
    assert none == empty == "n/a"
    assert sample_std([4.0]) == 0.0


def test_format_mean_std_matches_mean_std_on_precomputed_statistics():
    # Prepare
    values = np.array([2.0, 4.0, 9.0])
    # Execute
    text = format_mean_std(values.mean(), values.std(ddof=1), values.size, digits=2)
    # Assert
    assert text == mean_std(values) == "5.00 ± 3.61"
    assert format_mean_std(5.0, 0.0, 1, signed=True) == "+5.00"


def test_mean_ci_is_students_t_interval():
    from scipy import stats

    from mobidfl.analysis.stats import format_ci, mean_ci

    # Prepare: 1, 2, 3 (mean 2, sample std 1) and a sample with a NaN
    values = [1.0, 2.0, 3.0]
    # Execute
    low, high = mean_ci(values)
    # Assert: scipy's t interval (an independent computation); NaN dropped; one value none
    want = stats.t.interval(0.95, 2, loc=2.0, scale=1.0 / np.sqrt(3))
    assert np.allclose((low, high), want)
    assert (low + high) / 2 == 2.0 and high - low > 2 * 1.96 / np.sqrt(3)  # wider than normal
    assert np.allclose(mean_ci([1.0, np.nan, 2.0, 3.0]), want)
    assert np.isnan(mean_ci([4.0])).all() and format_ci([4.0]) == "n/a"
    assert format_ci(values, signed=True) == f"[{want[0]:+.2f}, {want[1]:+.2f}]"


def test_mean_ci_covers_the_true_mean_at_its_level():
    from mobidfl.analysis.stats import mean_ci

    # Prepare: 2,000 samples of 10 seeds from a known normal (mean 3)
    rng = np.random.default_rng(0)
    samples = rng.normal(3.0, 2.0, size=(2000, 10))
    # Execute
    bounds = np.array([mean_ci(s, level=0.95) for s in samples])
    covered = ((bounds[:, 0] <= 3.0) & (3.0 <= bounds[:, 1])).mean()
    narrow = np.array([mean_ci(s, level=0.5) for s in samples[:200]])
    # Assert: ~95 % coverage (binomial sd 0.5 %); a lower level gives narrower intervals
    assert 0.935 < covered < 0.965, covered
    assert (np.diff(narrow, axis=1) < np.diff(bounds[:200], axis=1)).all()
