"""PSFL (Domini et al., ACSOS 2024) experiment at ``ci`` scale: the directions of its effects.

Runs the paper's sigma (20) on the authors' code's loss scale (``psfl_loss = batch_sum``)
with the default overlapping area label sets, over two seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.experiments import psfl_004

SEEDS = (0, 1)


@pytest.fixture(scope="module")
def rows():
    return psfl_004.run(scale="ci", seeds=SEEDS)


def _psfl(rows, areas: int):
    table = rows[(rows["table"] == "areas") & (rows.policy == "psfl") & (rows.areas == areas)]
    assert sorted(table.seed.tolist()) == list(SEEDS)
    return table


def test_three_areas_settle_at_three_correct_federations_on_the_paper_sigma(rows):
    # Prepare
    psfl = _psfl(rows, 3)
    for _, row in psfl.iterrows():
        # Assert (Fig. 5): |F| ends at k (within one), no node placed in another area, and
        # the areas are separable: cross-border ds far above within-area ds
        assert row.sigma == 20.0
        assert abs(row.federations - row.areas) <= 1, row.to_dict()
        assert row.federation_errors <= 1, row.to_dict()
        assert row.ds_inter_first > 2 * row.ds_intra_first


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL disagrees at 9 areas: with mnist5k's 10 classes, areas of >= 3 labels "
    "must overlap (windows {0,1,2}, {1,2,3}, ...: neighbours share 2 of 3 labels), so "
    "neighbouring areas are not distinct distributions and federations merge (ci, seeds "
    "0-1: |F| 2.5 +- 0.7 instead of 9); the paper's EMNIST-letters split has 3 disjoint "
    "labels per area",
)
def test_nine_areas_settle_at_nine_federations(rows):
    # Prepare / Assert (Fig. 5)
    for _, row in _psfl(rows, 9).iterrows():
        assert abs(row.federations - 9) <= 1, row.to_dict()


def _gap(rows, areas: int) -> np.ndarray:
    table = rows[(rows["table"] == "areas") & (rows.areas == areas)]
    psfl = table[table.policy == "psfl"].set_index("seed").acc_own
    central = table[table.policy == "central_fedavg"].set_index("seed").acc_own
    return (psfl - central).to_numpy()


def test_psfl_beats_central_fedavg_on_each_node_s_labels(rows):
    # Execute / Assert (Fig. 6): with 3 areas, every seed
    assert (_gap(rows, 3) > 0).all(), _gap(rows, 3)


@pytest.mark.xfail(
    strict=True,
    reason="MobiDFL disagrees: with overlapping 3-label areas (10 classes) 9 areas merge "
    "into 2-3 federations, so PSFL's margin over central FedAvg does not grow from 3 to 9 "
    "areas (ci, seeds 0-1: +0.099 at 3 areas, -0.036 +- 0.171 at 9)",
)
def test_psfl_margin_grows_with_more_areas(rows):
    # Execute / Assert (Fig. 6): the margin grows with the number of areas, every seed
    assert (_gap(rows, 9) > _gap(rows, 3)).all()


def test_walker_leader_changes_on_entry_and_then_settles(rows):
    # Prepare: the ★ node travels between areas (psfl_walker_speed)
    walker = rows[(rows["table"] == "walker") & (rows.offset >= 0)]
    assert sorted(walker.seed.unique().tolist()) == list(SEEDS)
    by_offset = walker.groupby("offset").dl.mean()
    after = rows[(rows["table"] == "walker") & rows.after_tour]
    # Assert (Fig. 7): DL is highest when the ★ node enters an area, 0 once it has settled
    # and after the tour, in every seed
    assert by_offset.iloc[0] > by_offset.iloc[-1]
    assert by_offset.iloc[-1] == 0.0
    assert np.isfinite(walker.dl).all()
    assert (after.groupby("seed").dl.sum() == 0).all()
