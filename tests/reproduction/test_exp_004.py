"""PSFL (Domini et al., ACSOS 2024) at ``mobidfl reproduce psfl_004 --scale ci``: the
directions of Figs. 5 and 6 with 3 areas, over two seeds."""

from __future__ import annotations

import pytest

from tests.reproduce_ci import effects, run_ci, value

PAPER = "psfl_004"
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def per_run(tmp_path_factory):
    return run_ci(PAPER, seeds=SEEDS, folder=tmp_path_factory.mktemp(PAPER))


def test_three_areas_settle_at_three_federations(per_run):
    # Assert (Fig. 5): |F| ends at the number of areas (within one), every seed
    for seed in SEEDS:
        assert abs(value(per_run, "PSFL", seed, "federations") - 3) <= 1


def test_psfl_beats_central_fedavg_on_each_node_s_labels(per_run):
    # Execute / Assert (Fig. 6): with 3 areas, every seed
    assert (effects(PAPER, per_run, "than centralised FedAvg (3 areas)") > 0).all()
