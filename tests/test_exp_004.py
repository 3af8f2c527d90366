"""Seed 004 (PSFL) experiment at ``ci`` scale: the directions of the paper's effects."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.experiments import psfl_004


@pytest.fixture(scope="module")
def rows():
    return psfl_004.run(scale="ci", seeds=(0,))


def test_federations_settle_at_the_number_of_areas_and_are_correct(rows):
    # Prepare
    psfl = rows[(rows["table"] == "areas") & (rows.policy == "psfl")]
    assert sorted(psfl.areas.unique().tolist()) == [3, 9]
    for _, row in psfl.iterrows():
        # Assert (Fig. 5): |F| ends at k (within one) with no node placed in another area
        assert abs(row.federations - row.areas) <= 1, row.to_dict()
        assert row.federation_errors <= 1, row.to_dict()
        # the areas are separable at this sigma: cross-border ds far above within-area ds
        assert row.ds_inter_first > 2 * row.ds_intra_first


def test_psfl_beats_central_fedavg_more_with_more_areas(rows):
    # Prepare
    areas = rows[rows["table"] == "areas"]
    psfl = areas[areas.policy == "psfl"].set_index("areas").acc_own
    central = areas[areas.policy == "central_fedavg"].set_index("areas").acc_own
    gap = psfl - central
    # Assert (Fig. 6): PSFL's federation models beat the global model on each node's labels,
    # and the margin grows with the number of areas
    assert (gap > 0).all(), gap.to_dict()
    assert gap[9] > gap[3]


def test_walker_leader_changes_on_entry_and_then_settles(rows):
    # Prepare
    walker = rows[(rows["table"] == "walker") & (rows.offset >= 0)]
    by_offset = walker.groupby("offset").dl.mean()
    # Assert (Fig. 7): DL is 1 when the ★ node enters an area, 0 once it has settled
    assert by_offset.iloc[0] > by_offset.iloc[-1]
    assert by_offset.iloc[-1] == 0.0
    assert np.isfinite(walker.dl).all()
