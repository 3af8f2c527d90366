"""de Heredia's own decentralizepy code beside MobiDFL (validation/heredia.py, size ``ci``).

Fails when MobiDFL's random walk, neighbour test or mobility-aware weights drift from the
authors' code: exact checks on the authors' positions, statistical ones on the same settings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from validation import heredia
from validation.refcache import ensure

SEEDS = 2


@pytest.fixture(scope="module")
def result():
    try:
        folder = ensure(heredia.REFERENCE)
    except ConfigError as exc:  # offline and no seed copy: nothing to compare against
        pytest.skip(f"de Heredia's code unavailable: {exc}")
    return heredia.compare(size="ci", seeds=SEEDS, out=None, folder=folder)


@pytest.fixture(scope="module")
def rows(result):
    return {r.quantity.split(" (")[0]: r for r in heredia.rows(result)}


def test_mixing_weights_equal_the_authors_averaging_weights(result):
    # Sec. 5.4 on the authors' neighbour sets and speeds, every alpha of the thesis
    checks = result["checks"]
    assert sum(c["rows"] for c in checks) > 20  # enough rows with neighbours to mean something
    for alpha in heredia.ALPHAS:
        assert max(c["weight_err"][alpha] for c in checks) <= 1e-12, alpha


def test_neighbour_sets_on_the_authors_positions(result):
    checks = result["checks"]
    assert sum(c["ref_pairs"] for c in checks) > 10
    # The same test at the authors' 100 sample times gives their neighbour sets exactly.
    assert sum(c["sample_mismatch"] for c in checks) == 0
    # MobiDFL's "during" rule never loses one of the authors' pairs.
    assert sum(c["missing"] for c in checks) == 0


def test_one_iteration_of_the_walk_matches_advance(result):
    checks = result["checks"]
    assert max(c["step_err"] for c in checks) <= 1e-9
    # The authors' sample points lag the exact fold by less than two samples' travel.
    assert max(c["path_err"] for c in checks) <= 2 * max(c["max_speed_step"] for c in checks)


def test_speed_classes_match(result):
    ref_hm, mine_hm = result["speeds"]["hm_counts"]
    want = math.ceil(heredia.HM_PROPORTION * heredia.SIZES["ci"]["nodes"])
    assert ref_hm == mine_hm == [want] * result["stat_seeds"]
    assert result["stat_seeds"] == heredia.SIZES["ci"]["stat_seeds"] > SEEDS
    for label in ("HM", "LM"):
        ref, mine, pvalue = result["speeds"][label]
        assert pvalue >= 0.01, label
        assert abs(np.mean(mine) - np.mean(ref)) < 0.25 * np.mean(ref), label


def test_neighbour_statistics_agree_on_the_same_settings(result, rows):
    stats = [r for k, r in rows.items() if k.startswith(("neighbours", "distinct", "cumulative"))]
    assert len(stats) == 7
    assert all(r.verdict == "agree" for r in stats), [(r.quantity, r.reference, r.mobidfl)
                                                      for r in stats if r.verdict != "agree"]
    # HM clients meet more than LM ones on both sides (App. B).
    for side in ("ref_stats", "mine_stats"):
        s = result[side]
        assert np.mean([x["neighbours per iteration, HM"] for x in s]) > np.mean(
            [x["neighbours per iteration, LM"] for x in s])


def test_every_row_has_a_verdict_and_none_differs(rows):
    assert {r.verdict for r in rows.values()} <= {"agree", "explained"}
    assert rows["mixing weights at the code's default alpha = 2"].verdict == "explained"


def test_stat_verdict_flags_a_real_difference():
    # The rule used above can fail: a 30 % shift with small seed spread is "differs".
    assert heredia.stat_verdict([1.0, 1.02, 0.98], [1.3, 1.31, 1.29]) == "differs"
    assert heredia.stat_verdict([1.0, 1.02, 0.98], [1.05, 1.0, 1.04]) == "agree"


def test_unknown_size_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="--size"):
        heredia.compare(size="huge", seeds=1, out=None)
