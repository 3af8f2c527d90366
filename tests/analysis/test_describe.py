"""Regime descriptors (analysis/describe.py): contact spells, label skew and speed
heterogeneity on numbers worked by hand, and a whole world described without training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from mobidfl.analysis.describe import (
    contact_spells,
    describe_world,
    label_skew_index,
    speed_heterogeneity,
)


def _adj(n: int, pairs: list[tuple[int, int]]) -> sp.csr_matrix:
    rows = [a for a, b in pairs] + [b for a, b in pairs]
    cols = [b for a, b in pairs] + [a for a, b in pairs]
    return sp.csr_matrix((np.ones(len(rows), bool), (rows, cols)), shape=(n, n))


def test_contact_spells_worked_by_hand():
    # Prepare: 3 agents over 6 steps, 10 s each.
    #   pair (0,1): in range at steps 0,1,2 and 5 -> spells of 3 and 1 steps, gap 5 - 2 = 3
    #   pair (1,2): in range at steps 1 and 3      -> spells of 1 and 1 steps, gap 3 - 1 = 2
    #   pair (0,2): never
    steps = [[(0, 1)], [(0, 1), (1, 2)], [(0, 1)], [(1, 2)], [], [(0, 1)]]
    adjacency = [_adj(3, s) for s in steps]
    # Execute
    durations, gaps = contact_spells(adjacency, step_s=10.0)
    # Assert: durations 30, 10 (pair 0-1) and 10, 10 (pair 1-2); gaps 30 and 20 s
    assert sorted(durations) == [10.0, 10.0, 10.0, 30.0]
    assert sorted(gaps) == [20.0, 30.0]


def test_contact_spells_of_no_contact_are_empty():
    durations, gaps = contact_spells([_adj(4, []), _adj(4, [])], step_s=5.0)
    assert durations.size == 0 and gaps.size == 0


def test_label_skew_index_worked_by_hand():
    # every agent the pooled mix -> 0
    assert label_skew_index(np.array([[5, 5], [2, 2]])) == 0.0
    # two agents, one label each, pooled 50/50: TV = 0.5 * (0.5 + 0.5) = 0.5 = 1 - 1/2
    assert label_skew_index(np.array([[4, 0], [0, 4]])) == 0.5
    # pooled (6, 2)/8 = (0.75, 0.25); agent 1 (1, 0): TV 0.25; agent 2 (0.5, 0.5): TV 0.25
    assert math.isclose(label_skew_index(np.array([[4, 0], [2, 2]])), 0.25)
    # an agent without data is left out
    assert label_skew_index(np.array([[4, 0], [0, 4], [0, 0]])) == 0.5


def test_speed_heterogeneity_worked_by_hand():
    assert speed_heterogeneity(np.zeros(5)) == 0.0
    # speeds 1 and 3: mean 2, population std 1 -> 0.5
    assert speed_heterogeneity(np.array([1.0, 3.0])) == 0.5


@pytest.mark.parametrize("partition", ["iid", "shards"])
def test_a_world_is_described_without_training_and_skew_follows_the_partition(partition):
    # Prepare: 8 cars that wander a small grid, 6 steps, two partitions of the same data
    world = {"map": "grid:3x3:100", "vehicles": 8, "pedestrians": 0, "sensors": 0,
             "uavs": 0, "steps": 6, "dataset": "digits", "model": "mlp",
             "partition": partition, "seed": 3, "vehicle": {"mobility": "random_walk"}}
    # Execute
    got = describe_world(world)
    # Assert: the counts of the world, the descriptors in their ranges; shards (two labels
    # per agent of ten) far more skewed than iid
    assert got.agents == 8 and got.steps == 6
    assert 0.0 < got.neighbours_per_step <= 7.0 and 0.0 < got.met_share <= 1.0
    assert got.contact_duration_s >= 60.0 or math.isnan(got.contact_duration_s)
    if partition == "shards":
        assert got.label_skew > 0.6
    else:
        assert got.label_skew < 0.2
