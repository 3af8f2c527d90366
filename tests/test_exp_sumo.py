"""Cached-DFL's comparison under manhattan and under SUMO traffic, scale ``ci`` (2 seeds)."""

from __future__ import annotations

import pytest
import torch

from analysis.experiments import sumo_003


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return sumo_003.run(scale="ci", seeds=(0, 1))


def test_cached_dfl_beats_dfl_under_both_mobilities(rows):
    # Prepare: 2 seeds x {manhattan, sumo} x {cached_lru, defedavg} on nyc_uws
    assert len(rows) == 8 and set(rows.mobility) == {"manhattan", "sumo"}
    # Execute
    gaps = sumo_003.gaps(rows)
    # Assert: Cached-DFL's Fig. 2 direction holds under SUMO traffic too, for every seed
    assert (gaps.lru_minus_dfl > 0.05).all(), gaps
    # Assert: the two mobilities are really different traffic (contacts differ)
    by_mobility = rows.groupby("mobility").neighbours_mean.mean()
    assert by_mobility["sumo"] != pytest.approx(by_mobility["manhattan"], rel=1e-3)
    assert (rows.neighbours_mean > 0).all()
    tables = sumo_003.tables(rows)
    assert any("LRU minus DFL" in title for title in tables)
